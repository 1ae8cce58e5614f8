// NEON kernels against the scalar reference, on random data.
//
// For every weight type the NEON table must read the same activation format through the
// same converter as the scalar table, and give the same dot product up to float summation
// order: |neon - scalar| <= 1e-5 * sum|w_i * a_i|, for vec_dot and for the tile (gemm)
// kernel where there is one ("+gemm" in the table). Three NEON variants are checked: the
// table entry as registered (whatever the CPU detection picked), and both builds of the
// integer kernels directly (plain NEON, and SDOT when this CPU has it), so one run on a
// dotprod CPU covers both code paths. Prints a table; exits nonzero on any mismatch.
//
// Off AArch64 there is nothing to test (the NEON table is empty) and the test passes;
// scripts/test_aarch64.sh runs it under qemu-aarch64.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/fp16.h"
#include "cpu/kernels.h"
#include "quant/types.h"

#if defined(__aarch64__)

namespace ember {
// Test hooks defined in cpu/kernels_neon.cpp (not part of the engine's interface).
bool neon_has_dotprod();
VecDotFn neon_vec_dot(DType weight, DType act, bool dotprod);
GemmFn neon_gemm(DType weight, DType act, bool dotprod);
}  // namespace ember

using namespace ember;

namespace {

constexpr double kRelTol = 1e-5;

struct Rng {
    uint64_t s;
    uint64_t next() {  // splitmix64
        uint64_t z = (s += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    float uniform() { return (float)(next() >> 40) * (1.0f / 16777216.0f); }  // [0, 1)
    float sym() { return 2.0f * uniform() - 1.0f; }
    // roughly normal, with an occasional outlier (activations have a few large channels)
    float act() {
        float g = 0.0f;
        for (int i = 0; i < 4; ++i) g += sym();
        return (next() % 64 == 0) ? g * 20.0f : g;
    }
};

// where each block keeps its float scales (bytes that must stay finite in random blocks)
struct ScaleField {
    size_t offset;
    bool f32;  // float (Q8_K) instead of fp16
};

std::vector<ScaleField> scale_fields(DType t) {
    switch (t) {
        case DType::Q4_0: return {{offsetof(BlockQ4_0, d), false}};
        case DType::Q4_1: return {{offsetof(BlockQ4_1, d), false}, {offsetof(BlockQ4_1, m), false}};
        case DType::Q5_0: return {{offsetof(BlockQ5_0, d), false}};
        case DType::Q5_1: return {{offsetof(BlockQ5_1, d), false}, {offsetof(BlockQ5_1, m), false}};
        case DType::Q8_0: return {{offsetof(BlockQ8_0, d), false}};
        case DType::Q2_K: return {{offsetof(BlockQ2_K, d), false}, {offsetof(BlockQ2_K, dmin), false}};
        case DType::Q3_K: return {{offsetof(BlockQ3_K, d), false}};
        case DType::Q4_K: return {{offsetof(BlockQ4_K, d), false}, {offsetof(BlockQ4_K, dmin), false}};
        case DType::Q5_K: return {{offsetof(BlockQ5_K, d), false}, {offsetof(BlockQ5_K, dmin), false}};
        case DType::Q6_K: return {{offsetof(BlockQ6_K, d), false}};
        case DType::Q8_K: return {{offsetof(BlockQ8_K, d), true}};
        case DType::IQ4_NL: return {{offsetof(BlockIQ4_NL, d), false}};
        case DType::IQ4_XS: return {{offsetof(BlockIQ4_XS, d), false}};
        default: return {};
    }
}

// One weight row of n elements. mode 0: real values through the reference quantizer where
// the type has one; mode 1: random bits (every code point, e.g. -128 in Q8_0, all hmask /
// scale patterns) with finite random scales; float types get finite random values incl.
// subnormal halves.
std::vector<uint8_t> make_weights(DType t, int64_t n, int mode, Rng& rng) {
    const TypeTraits& tt = *type_traits((uint32_t)t);
    std::vector<uint8_t> w((size_t)row_bytes(tt, n));
    if (t == DType::F32) {
        for (int64_t i = 0; i < n; ++i) {
            const float v = mode == 0 ? rng.sym() : rng.act() * 1e3f;
            std::memcpy(&w[(size_t)i * 4], &v, 4);
        }
        return w;
    }
    if (t == DType::F16 || t == DType::BF16) {
        for (int64_t i = 0; i < n; ++i) {
            uint16_t h;
            if (mode == 0) {
                h = t == DType::F16 ? fp32_to_fp16(rng.sym()) : fp32_to_bf16(rng.sym());
            } else {
                do h = (uint16_t)rng.next();  // any finite pattern, subnormals included
                while (t == DType::F16 ? ((h >> 10) & 0x1f) == 0x1f || ((h >> 10) & 0x1f) > 20
                                       : ((h >> 7) & 0xff) == 0xff || ((h >> 7) & 0xff) > 140);
            }
            std::memcpy(&w[(size_t)i * 2], &h, 2);
        }
        return w;
    }
    if (mode == 0 && tt.quantize) {
        std::vector<float> x((size_t)n);
        for (float& v : x) v = rng.sym();
        tt.quantize(x.data(), w.data(), n);
        return w;
    }
    for (uint8_t& b : w) b = (uint8_t)rng.next();
    const std::vector<ScaleField> fields = scale_fields(t);
    for (int64_t b = 0; b < n / tt.block_size; ++b) {
        uint8_t* blk = w.data() + b * tt.block_bytes;
        for (const ScaleField& f : fields) {
            const float v = (rng.uniform() * 0.1f + 1e-3f) * (rng.next() & 1 ? 1.0f : -1.0f);
            if (f.f32) {
                std::memcpy(blk + f.offset, &v, 4);
            } else {
                const uint16_t h = fp32_to_fp16(v);
                std::memcpy(blk + f.offset, &h, 2);
            }
        }
        // MXFP4's E8M0 byte: any exponent is valid; kept near 1 (2^-10 .. 2^5) so sums stay finite
        if (t == DType::MXFP4) blk[offsetof(BlockMXFP4, e)] = (uint8_t)(118 + rng.next() % 16);
    }
    return w;
}

// sum |w_i * a_i| over the dequantized row and activations: the scale of the rounding
// error a reordered float summation may introduce (for Q4_1/Q5_1 x Q8_1 the min term
// m * s_a is bounded by sum |m * a_i|, already in it)
double magnitude(DType wt, const std::vector<uint8_t>& w, DType at, const std::vector<uint8_t>& a,
                 int64_t n) {
    std::vector<float> wf((size_t)n), af((size_t)n);
    type_traits((uint32_t)wt)->dequantize(w.data(), wf.data(), n);
    type_traits((uint32_t)at)->dequantize(a.data(), af.data(), n);
    double m = 0.0;
    for (int64_t i = 0; i < n; ++i) m += std::fabs((double)wf[(size_t)i] * (double)af[(size_t)i]);
    return m;
}

struct Row {
    std::string variant;
    int cases = 0;
    double max_rel = 0.0;
    bool ok = true;
    std::string why;
};

}  // namespace

int main() {
    uint64_t seed = 20240611;
    if (const char* e = std::getenv("EMBER_TEST_SEED")) seed = std::strtoull(e, nullptr, 10);
    const bool dotprod = neon_has_dotprod();
    std::printf("NEON kernels vs scalar (seed %llu, dotprod %s, tolerance %.0e * sum|w*a|)\n",
                (unsigned long long)seed, dotprod ? "yes" : "no", kRelTol);
    std::printf("%-5s %-5s %-13s %6s %12s  %s\n", "type", "act", "variant", "cases", "max rel err", "result");

    const DType types[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0,  DType::Q4_1,
                           DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q2_K,  DType::Q3_K,
                           DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::MXFP4, DType::IQ4_NL,
                           DType::IQ4_XS};
    int failures = 0;
    for (DType t : types) {
        const char* name = type_name((uint32_t)t);
        const DotKernels* ref = dot_kernels_exact(t, Isa::SCALAR);
        const DotKernels* neon = dot_kernels_exact(t, Isa::NEON);
        if (!ref) {
            std::printf("%-5s %-5s %-13s %6s %12s  FAIL: no scalar kernel\n", name, "-", "-", "-", "-");
            ++failures;
            continue;
        }
        const DType at = ref->act_type;
        const char* aname = type_name((uint32_t)at);
        if (!neon) {  // the table has no NEON kernel for the format the scalar level uses
            std::printf("%-5s %-5s %-13s %6s %12s  FAIL: no NEON kernel for this activation format\n", name,
                        aname, "table", "-", "-");
            ++failures;
            continue;
        }
        if (neon->act_type != at || neon->convert != ref->convert) {
            std::printf("%-5s %-5s %-13s %6s %12s  FAIL: activation format/converter differs from scalar\n",
                        name, aname, "table", "-", "-");
            ++failures;
            continue;
        }

        struct Variant {
            const char* label;
            VecDotFn fn;
            GemmFn gemm;
        };
        std::vector<Variant> variants = {{"table", neon->vec_dot, neon->gemm}};
        if (at != DType::F32) {  // the integer kernels exist in two builds
            variants.push_back({"neon", neon_vec_dot(t, at, false), neon_gemm(t, at, false)});
            if (dotprod) variants.push_back({"dotprod", neon_vec_dot(t, at, true), neon_gemm(t, at, true)});
        }

        const TypeTraits& wt = *type_traits((uint32_t)t);
        const TypeTraits& act = *type_traits((uint32_t)at);
        std::vector<int64_t> sizes;
        if (wt.block_size == 1) {
            sizes = {1, 3, 4, 7, 15, 16, 17, 33, 100, 256, 4099};  // every tail length
        } else {
            for (int64_t blocks : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{5}, int64_t{16}, 4096 / wt.block_size + 1}) sizes.push_back(blocks * wt.block_size);
        }

        std::vector<Row> rows(variants.size());
        for (size_t v = 0; v < variants.size(); ++v) {
            rows[v].variant = variants[v].label;
            if (!variants[v].fn) {
                rows[v].ok = false;
                rows[v].why = "missing";
            }
        }
        Rng rng{seed ^ ((uint64_t)t * 0x100000001b3ull)};
        for (int64_t n : sizes) {
            for (int mode = 0; mode < 2; ++mode) {
                for (int rep = 0; rep < 8; ++rep) {
                    const std::vector<uint8_t> w = make_weights(t, n, mode, rng);
                    std::vector<float> x((size_t)n);
                    for (float& v : x) v = rng.act();
                    std::vector<uint8_t> a((size_t)row_bytes(act, n));
                    if (ref->convert)
                        ref->convert(x.data(), a.data(), n);
                    else
                        std::memcpy(a.data(), x.data(), a.size());
                    float s_ref = 0.0f;
                    ref->vec_dot(n, &s_ref, w.data(), a.data());
                    const double mag = magnitude(t, w, at, a, n);
                    for (size_t v = 0; v < variants.size(); ++v) {
                        if (!variants[v].fn) continue;
                        float s = 0.0f;
                        variants[v].fn(n, &s, w.data(), a.data());
                        const double err = std::fabs((double)s - (double)s_ref);
                        const double rel = mag > 0 ? err / mag : err;
                        Row& r = rows[v];
                        ++r.cases;
                        if (rel > r.max_rel || std::isnan(rel)) r.max_rel = rel;
                        if (!(err <= kRelTol * mag) && r.ok) {
                            r.ok = false;
                            char buf[160];
                            std::snprintf(buf, sizeof buf, "n=%lld mode=%d: %.9g vs scalar %.9g", (long long)n,
                                          mode, (double)s, (double)s_ref);
                            r.why = buf;
                        }
                    }
                }
            }
        }
        // tile kernels: nr x nc dot products (full 4-column groups and a remainder) against
        // the scalar vec_dot of each pair, output written with a padded leading dimension
        {
            const int64_t n = wt.block_size == 1 ? 259 : 8 * wt.block_size;
            const int nr = 3, nc = 7;
            const size_t lds = nr + 2;
            std::vector<std::vector<uint8_t>> ws, as;
            for (int r = 0; r < nr; ++r) ws.push_back(make_weights(t, n, r % 2, rng));
            for (int c = 0; c < nc; ++c) {
                std::vector<float> x((size_t)n);
                for (float& v : x) v = rng.act();
                std::vector<uint8_t> a((size_t)row_bytes(act, n));
                if (ref->convert)
                    ref->convert(x.data(), a.data(), n);
                else
                    std::memcpy(a.data(), x.data(), a.size());
                as.push_back(std::move(a));
            }
            std::vector<uint8_t> wbuf, abuf;
            for (const auto& r : ws) wbuf.insert(wbuf.end(), r.begin(), r.end());
            for (const auto& c : as) abuf.insert(abuf.end(), c.begin(), c.end());
            for (size_t v = 0; v < variants.size(); ++v) {
                if (!variants[v].gemm) continue;
                std::vector<float> out(lds * nc, NAN);
                variants[v].gemm(n, nr, nc, wbuf.data(), ws[0].size(), abuf.data(), as[0].size(), out.data(), lds);
                Row& row = rows[v];
                row.variant = std::string(variants[v].label) + "+gemm";
                for (int c = 0; c < nc; ++c)
                    for (int r = 0; r < nr; ++r) {
                        float s_ref = 0.0f;
                        ref->vec_dot(n, &s_ref, ws[(size_t)r].data(), as[(size_t)c].data());
                        const double mag = magnitude(t, ws[(size_t)r], at, as[(size_t)c], n);
                        const float got = out[(size_t)c * lds + (size_t)r];
                        const double err = std::fabs((double)got - (double)s_ref);
                        const double rel = mag > 0 ? err / mag : err;
                        ++row.cases;
                        if (rel > row.max_rel || std::isnan(rel)) row.max_rel = rel;
                        if (!(err <= kRelTol * mag) && row.ok) {
                            row.ok = false;
                            char buf[160];
                            std::snprintf(buf, sizeof buf, "gemm r=%d c=%d: %.9g vs scalar %.9g", r, c, (double)got,
                                          (double)s_ref);
                            row.why = buf;
                        }
                    }
            }
        }
        for (const Row& r : rows) {
            std::printf("%-5s %-5s %-13s %6d %12.2e  %s%s%s\n", name, aname, r.variant.c_str(), r.cases, r.max_rel,
                        r.ok ? "ok" : "FAIL", r.why.empty() ? "" : ": ", r.why.c_str());
            if (!r.ok) ++failures;
        }
    }
    if (failures) {
        std::printf("%d NEON kernel check(s) FAILED\n", failures);
        return 1;
    }
    std::printf("all NEON kernels match the scalar reference\n");
    return 0;
}

#else

int main() {
    std::printf("test_neon_kernels: not an AArch64 build, nothing to test (see scripts/test_aarch64.sh)\n");
    return 0;
}

#endif
