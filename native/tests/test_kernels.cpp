// CPU dot-product kernels, every weight type at every ISA level this CPU runs:
//   1. each level's activation converter is bit-exact with the scalar one;
//   2. each level's vec_dot and tile (gemm) kernel equal the scalar reference up to float
//      summation order (relative 1e-5 of sum |w_i x_i|);
//   3. the scalar reference is close to a float64 dot of the gguf-exact dequantized
//      weights and the unquantized activations (within the 8-bit activation rounding);
//   4. mul_mat (row split across threads, column chunks) equals the reference, and a
//      column computed alone has the same bits as in a batch (decode == prefill).
// Prints a table; exits nonzero on any failure. Portable: no ISA-specific code here.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstddef>
#include <cstring>
#include <iterator>
#include <random>
#include <vector>

#include "core/error.h"
#include "core/fp16.h"
#include "core/tensor.h"
#include "cpu/kernels.h"
#include "quant/types.h"

using namespace ember;

namespace {

std::mt19937 rng(1234);

float randn() {
    static std::normal_distribution<float> nd(0.0f, 1.0f);
    return nd(rng);
}

// Random activations with the spread of real hidden states (a few larger values).
std::vector<float> rand_acts(int64_t n) {
    std::vector<float> v((size_t)n);
    for (auto& x : v) x = randn() * ((rng() % 16) == 0 ? 6.0f : 1.0f);
    return v;
}

uint16_t rand_half(float lo, float hi) {
    std::uniform_real_distribution<float> u(lo, hi);
    return fp32_to_fp16(u(rng));
}

// One weight row of type t: quantized from random floats where a reference quantizer
// exists, otherwise random valid blocks (every bit pattern is valid except in the
// fp16 scales, which are set to finite values).
std::vector<uint8_t> rand_row(DType t, int64_t k) {
    const TypeTraits* tt = type_traits((uint32_t)t);
    std::vector<uint8_t> row((size_t)row_bytes(*tt, k));
    if (tt->quantize) {
        std::vector<float> f = rand_acts(k);
        for (auto& x : f) x *= 0.05f;
        tt->quantize(f.data(), row.data(), k);
        return row;
    }
    for (auto& b : row) b = (uint8_t)(rng() & 0xff);
    const int64_t nb = k / tt->block_size;
    for (int64_t i = 0; i < nb; ++i) {
        uint8_t* blk = row.data() + i * tt->block_bytes;
        auto set = [&](size_t off, uint16_t h) { std::memcpy(blk + off, &h, 2); };
        switch (t) {
            case DType::Q2_K:
                set(offsetof(BlockQ2_K, d), rand_half(0.0f, 0.01f));
                set(offsetof(BlockQ2_K, dmin), rand_half(0.0f, 0.01f));
                break;
            case DType::Q3_K: set(offsetof(BlockQ3_K, d), rand_half(-0.01f, 0.01f)); break;
            case DType::Q4_K:
                set(offsetof(BlockQ4_K, d), rand_half(0.0f, 0.005f));
                set(offsetof(BlockQ4_K, dmin), rand_half(0.0f, 0.005f));
                break;
            case DType::Q5_K:
                set(offsetof(BlockQ5_K, d), rand_half(0.0f, 0.003f));
                set(offsetof(BlockQ5_K, dmin), rand_half(0.0f, 0.003f));
                break;
            case DType::Q6_K: set(offsetof(BlockQ6_K, d), rand_half(-0.001f, 0.001f)); break;
            case DType::IQ4_NL: set(offsetof(BlockIQ4_NL, d), rand_half(-0.001f, 0.001f)); break;
            case DType::IQ4_XS: set(offsetof(BlockIQ4_XS, d), rand_half(-0.0002f, 0.0002f)); break;
            default: break;
        }
    }
    return row;
}

struct Case {
    DType type;
    int64_t k;
};

struct Stats {
    double worst_ref = 0;    // max |level - scalar| / (1e-5 * mag)    (pass <= 1)
    double worst_gemm = 0;   // same for the tile kernel
    double worst_f64 = 0;    // max |scalar - f64| / bound             (pass <= 1)
    double worst_mm = 0;     // mul_mat vs scalar
    bool convert_exact = true;
    bool has_gemm = false;
};

int64_t act_block(DType act) {
    const TypeTraits* t = type_traits((uint32_t)act);
    return t->block_size;
}

}  // namespace

// Attention's and SwiGLU's kernels at each level against float64 (the scalar level
// included): scores, exponentials with their sum, the value accumulation, silu(g) * u.
int check_attention_kernels(const Isa* levels) {
    int failures = 0;
    const int64_t d = 64, nk = 29;  // a block that is not a multiple of the four-key kernel
    const size_t stride = 3 * d;    // keys of one head sit between other heads' keys
    constexpr int kG = 5;               // query heads per key head: covers every group kernel
    const size_t qs = d + 8, ldo = 32;  // heads' rows with gaps between them
    std::vector<float> q(qs * kG), acc0(qs * kG), w(ldo * kG), g(203), u(203);
    std::vector<uint16_t> kv(stride * nk);
    std::uniform_real_distribution<float> un(-1.0f, 1.0f);
    for (auto& x : q) x = un(rng);
    for (auto& x : acc0) x = un(rng);
    for (auto& h : kv) h = fp32_to_fp16(un(rng));
    for (auto& x : w) x = 0.5f + 0.5f * un(rng);
    for (size_t i = 0; i < g.size(); ++i) {
        g[i] = 12.0f * un(rng);
        u[i] = un(rng);
    }
    g[0] = -100.0f;  // far outside the exponential's range, both ways
    g[1] = 100.0f;
    for (int li = 0; li < 4; ++li) {
        const Isa isa = levels[li];
        if (!isa_supported(isa)) continue;
        const AttentionKernels& ak = attention_kernels(isa);
        double worst = 0.0;
        auto rel = [&](double got, double want, double mag) {
            worst = std::fmax(worst, std::fabs(got - want) / (1e-6 * mag + 1e-30));
        };
        // every group size G: each head against float64, and with the same bits as alone
        std::vector<float> sc(ldo * kG), sc1(ldo);
        for (int G = 1; G <= kG; ++G) {
            ak.scores(q.data(), qs, G, kv.data(), stride, nk, d, 0.125f, sc.data(), ldo);
            for (int h = 0; h < G; ++h) {
                ak.scores(q.data() + h * qs, qs, 1, kv.data(), stride, nk, d, 0.125f, sc1.data(), ldo);
                if (std::memcmp(sc1.data(), sc.data() + h * ldo, nk * sizeof(float)) != 0) worst = INFINITY;
                for (int64_t j = 0; j < nk; ++j) {
                    double want = 0, mag = 0;
                    for (int64_t i = 0; i < d; ++i) {
                        const double p = (double)q[h * qs + i] * fp16_to_fp32(kv[j * stride + i]);
                        want += p;
                        mag += std::fabs(p);
                    }
                    rel(sc[h * ldo + j], 0.125 * want, 0.125 * mag);
                }
            }
        }
        sc.resize(nk);
        std::vector<float> e(sc);
        const float mx = *std::max_element(sc.begin(), sc.end());
        const float sum = ak.exp_sub_sum(e.data(), nk, mx);
        double want_sum = 0;
        for (int64_t j = 0; j < nk; ++j) {
            const double x = std::exp((double)sc[j] - mx);
            want_sum += x;
            rel(e[j], x, 2.0 * x);  // the exponential within 2 ulp-ish (1e-6 relative)
        }
        rel(sum, want_sum, 2.0 * want_sum);
        for (int G = 1; G <= kG; ++G) {
            std::vector<float> acc(acc0), acc1(acc0);
            ak.accumulate(acc.data(), qs, G, kv.data(), stride, w.data(), ldo, nk, d);
            for (int h = 0; h < G; ++h) {
                ak.accumulate(acc1.data() + h * qs, qs, 1, kv.data(), stride, w.data() + h * ldo, ldo, nk, d);
                if (std::memcmp(acc1.data() + h * qs, acc.data() + h * qs, d * sizeof(float)) != 0) worst = INFINITY;
                for (int64_t i = 0; i < d; ++i) {
                    double want = acc0[h * qs + i], mag = std::fabs(acc0[h * qs + i]);
                    for (int64_t j = 0; j < nk; ++j) {
                        const double p = (double)w[h * ldo + j] * fp16_to_fp32(kv[j * stride + i]);
                        want += p;
                        mag += std::fabs(p);
                    }
                    rel(acc[h * qs + i], want, mag);
                }
            }
        }
        std::vector<float> y(g.size());
        ak.swiglu(g.data(), u.data(), y.data(), (int64_t)g.size());
        for (size_t i = 0; i < g.size(); ++i) {
            const double want = (double)g[i] / (1.0 + std::exp(-(double)g[i])) * u[i];
            rel(y[i], want, 4.0 * std::fabs(want) + 1e-30);
        }
        const bool ok = worst <= 1.0 && std::isfinite(worst);
        std::printf("attention/swiglu %-7s worst %.3f  %s\n", isa_name(isa), worst, ok ? "ok" : "FAIL");
        if (!ok) ++failures;
    }
    return failures;
}

// The gated delta rule's token step at each level against float64, for head sizes with and
// without an 8- and 16-element tail, over 12 tokens (the state carried from step to step):
// every state element and output within 1e-5 of the size of its sums.
int check_delta_step(const Isa* levels) {
    int failures = 0;
    std::uniform_real_distribution<float> un(-1.0f, 1.0f);
    for (int64_t S : {64, 128, 37}) {
        const int T = 12;
        std::vector<float> k((size_t)(S * T)), q((size_t)(S * T)), v((size_t)(S * T)), M0((size_t)(S * S));
        std::vector<float> decay(T), beta(T);
        for (auto& x : k) x = un(rng) / std::sqrt((float)S);
        for (auto& x : q) x = un(rng) / std::sqrt((float)S);
        for (auto& x : v) x = un(rng);
        for (auto& x : M0) x = 0.2f * un(rng);
        for (int t = 0; t < T; ++t) {
            decay[t] = 0.75f + 0.25f * std::fabs(un(rng));
            beta[t] = 0.5f + 0.5f * std::fabs(un(rng));
        }
        // float64: the same recurrence, and the size of each sum (for the tolerance)
        std::vector<double> Md(M0.begin(), M0.end()), outd((size_t)(S * T)), magd((size_t)(S * T));
        for (int t = 0; t < T; ++t) {
            const float* kt = &k[(size_t)(t * S)];
            const float* qt = &q[(size_t)(t * S)];
            for (int64_t j = 0; j < S; ++j) {
                double* m = &Md[(size_t)(j * S)];
                double sk = 0;
                for (int64_t i = 0; i < S; ++i) sk += (m[i] *= decay[t]) * kt[i];
                const double d = (v[(size_t)(t * S + j)] - sk) * beta[t];
                double o = 0, mag = 0;
                for (int64_t i = 0; i < S; ++i) {
                    m[i] += d * kt[i];
                    o += m[i] * qt[i];
                    mag += std::fabs(m[i] * qt[i]);
                }
                outd[(size_t)(t * S + j)] = o * 0.125;
                magd[(size_t)(t * S + j)] = mag * 0.125;
            }
        }
        for (int li = 0; li < 4; ++li) {
            const Isa isa = levels[li];
            if (!isa_supported(isa)) continue;
            const AttentionKernels& ak = attention_kernels(isa);
            std::vector<float> M(M0), out((size_t)(S * T));
            for (int t = 0; t < T; ++t)
                ak.delta_step(M.data(), &k[(size_t)(t * S)], &q[(size_t)(t * S)], &v[(size_t)(t * S)], decay[t],
                              beta[t], 0.125f, &out[(size_t)(t * S)], S);
            double worst = 0;
            for (size_t i = 0; i < out.size(); ++i)
                worst = std::fmax(worst, std::fabs(out[i] - outd[i]) / (1e-5 * magd[i] + 1e-30));
            for (size_t i = 0; i < M.size(); ++i)
                worst = std::fmax(worst, std::fabs(M[i] - Md[i]) / (1e-5 * (std::fabs(Md[i]) + 0.01)));
            const bool ok = worst <= 1.0 && std::isfinite(worst);
            std::printf("delta_step S=%-3lld %-7s worst %.3f  %s\n", (long long)S, isa_name(isa), worst,
                        ok ? "ok" : "FAIL");
            if (!ok) ++failures;
        }
    }
    return failures;
}

// The AVX-512 level's attention kernels against AVX2's, bit for bit (the model-level
// tests compare whole logits; this walks the shapes): head sizes with and without a
// 16-element tail, blocks of every length up to 40 (whole eight-key steps and each
// remainder), one to five heads a group, keys a stride apart.
int check_attention_512() {
    if (!isa_supported(Isa::AVX512)) {
        std::printf("attention avx512 vs avx2: skipped (no AVX-512 level on this CPU)\n");
        return 0;
    }
    const AttentionKernels& wide = attention_kernels(Isa::AVX512);
    const AttentionKernels& base = attention_kernels(Isa::AVX2);
    std::uniform_real_distribution<float> un(-1.0f, 1.0f);
    int failures = 0, cases = 0;
    for (int64_t d : {8, 24, 32, 64, 80, 96, 128, 256}) {
        constexpr int kG = 5;
        const size_t stride = 2 * (size_t)d + 8, qs = (size_t)d + 16, ldo = 48;
        const int64_t max_nk = 40;
        std::vector<float> q(qs * kG), acc0(qs * kG), w(ldo * kG);
        std::vector<uint16_t> kv(stride * max_nk);
        for (auto& x : q) x = un(rng);
        for (auto& x : acc0) x = un(rng);
        for (auto& h : kv) h = fp32_to_fp16(un(rng));
        for (auto& x : w) x = un(rng);
        for (int64_t nk = 1; nk <= max_nk; ++nk)
            for (int G = 1; G <= kG; ++G) {
                ++cases;
                std::vector<float> s1(ldo * kG, 7.0f), s2(ldo * kG, 7.0f);
                wide.scores(q.data(), qs, G, kv.data(), stride, nk, d, 0.125f, s1.data(), ldo);
                base.scores(q.data(), qs, G, kv.data(), stride, nk, d, 0.125f, s2.data(), ldo);
                std::vector<float> a1(acc0), a2(acc0);
                wide.accumulate(a1.data(), qs, G, kv.data(), stride, w.data(), ldo, nk, d);
                base.accumulate(a2.data(), qs, G, kv.data(), stride, w.data(), ldo, nk, d);
                // (the untouched slots too: the scores after nk and the gaps between rows)
                const bool same = std::memcmp(s1.data(), s2.data(), s1.size() * sizeof(float)) == 0 &&
                                  std::memcmp(a1.data(), a2.data(), a1.size() * sizeof(float)) == 0;
                if (!same) {
                    if (failures < 5)
                        std::printf("attention avx512 vs avx2: d=%lld nk=%lld G=%d differs\n", (long long)d,
                                    (long long)nk, G);
                    ++failures;
                }
            }
    }
    std::printf("attention avx512 vs avx2: %d shapes, %s\n", cases, failures ? "FAIL" : "same bits");
    return failures ? 1 : 0;
}

// A raw block's f16 scale d (and min scale dmin, for the types that have one) set to
// these values; everything else in the block is left as it is.
void set_block_scales(DType t, uint8_t* blk, float d, float dmin) {
    size_t d_at = 0, dmin_at = SIZE_MAX;
    switch (t) {
        case DType::Q4_1: case DType::Q5_1: dmin_at = 2; break;
        case DType::Q2_K: d_at = offsetof(BlockQ2_K, d); dmin_at = offsetof(BlockQ2_K, dmin); break;
        case DType::Q3_K: d_at = offsetof(BlockQ3_K, d); break;
        case DType::Q4_K: dmin_at = offsetof(BlockQ4_K, dmin); break;
        case DType::Q5_K: dmin_at = offsetof(BlockQ5_K, dmin); break;
        case DType::Q6_K: d_at = offsetof(BlockQ6_K, d); break;
        case DType::MXFP4: {  // an E8M0 byte: 2^(e - 128) on the doubled values, d a power of two
            const int e = (int)std::lround(std::log2(d)) + 128;
            blk[offsetof(BlockMXFP4, e)] = (uint8_t)(e < 0 ? 0 : e > 255 ? 255 : e);
            return;
        }
        default: break;
    }
    const uint16_t hd = fp32_to_fp16(d), hm = fp32_to_fp16(dmin);
    std::memcpy(blk + d_at, &hd, 2);
    if (dmin_at != SIZE_MAX) std::memcpy(blk + dmin_at, &hm, 2);
}

// The integer sums at their extremes: every weight at the largest magnitude its type
// allows (all bits clear, or all set) against activations all at +127 or -127, so int16
// intermediates in a kernel would overflow here if their bounds were wrong. Every level's
// mul_mat (a batch of 5 columns, which takes the prefill tiles, and one column), on the
// rows as they are and on the four-row copy where the level reads it, must match the
// scalar reference to float rounding. Q6_K also with every value 0 (q - 32 = -32) under
// the largest scales of either sign: the re-encoded decode's int16 sums of (q - 32) a
// reach 8 * 32 * 127 there.
int check_extreme_sums(const Isa* levels) {
    int failures = 0;
    for (DType t : {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q2_K, DType::Q3_K,
                    DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::MXFP4, DType::IQ4_NL, DType::IQ4_XS}) {
        const TypeTraits* tt = type_traits((uint32_t)t);
        // K-quants: one super-block per row; M = 8 rows give the four-row tiles and N = 5
        // columns the four-column tile plus a single one
        const int64_t K = tt->block_size, M = 8, N = 5;
        const size_t wrow = (size_t)row_bytes(*tt, K);
        struct Fill {
            uint8_t byte;
            int q6_scale;  // Q6_K's sub-block scales instead of `byte` (0: as filled)
        };
        for (const Fill f : {Fill{0x00, 0}, Fill{0xff, 0}, Fill{0x81, 0}, Fill{0x77, 0}, Fill{0x00, 127}, Fill{0x00, -128}})
            for (float sign : {1.0f, -1.0f}) {
                if (f.q6_scale && t != DType::Q6_K) continue;
                const uint8_t fill = f.byte;
                // raw blocks: scales 1.0 (and min 0), everything else `fill` (so the
                // K-quants' sub-block scales and mins are at their largest or smallest too)
                std::vector<uint8_t> w(wrow * M, fill);
                for (int64_t b = 0; b < M * K / tt->block_size; ++b) {
                    set_block_scales(t, w.data() + b * tt->block_bytes, 1.0f, 0.0f);
                    if (f.q6_scale)
                        std::memset(w.data() + b * tt->block_bytes + offsetof(BlockQ6_K, scales), (uint8_t)f.q6_scale,
                                    sizeof(BlockQ6_K::scales));
                }
                std::vector<uint8_t> wx4(w.size());
                four_row_layout(tensor_2d(t, K, M, w.data()), wx4.data(), 0, M);
                std::vector<float> xs((size_t)(K * N), sign);
                const DotKernels& ref = dot_kernels(t, Isa::SCALAR);
                const TypeTraits* at = type_traits((uint32_t)ref.act_type);
                const size_t arow = (size_t)row_bytes(*at, K);
                std::vector<uint8_t> act(arow * N);
                for (int64_t c = 0; c < N; ++c) ref.convert(xs.data() + c * K, act.data() + c * arow, K);
                const Tensor wt = tensor_2d(t, K, M, w.data());
                std::vector<float> want((size_t)(M * N)), got((size_t)(M * N));
                Tensor x = tensor_2d(ref.act_type, K, N, act.data());
                Tensor o = tensor_2d(DType::F32, M, N, want.data());
                mul_mat(&wt, &x, &o, 0, 1, Isa::SCALAR);
                for (int li = 0; li < 4; ++li) {  // levels: SCALAR, AVX2, AVX512, NEON
                    const Isa isa = levels[li];
                    if (!isa_supported(isa) || !dot_kernels_exact(t, isa)) continue;
                    for (int four = 0; four < 2; ++four) {
                        if (four && !four_row_layout_read(t, isa)) continue;
                        Tensor wl = wt;
                        const RowGroups groups{wx4.data(), nullptr};
                        if (four) wl.extra = &groups;
                        for (int64_t n : {N, (int64_t)1}) {
                            x.ne[1] = n;
                            Tensor og = tensor_2d(DType::F32, M, n, got.data());
                            mul_mat(&wl, &x, &og, 0, 1, isa);
                            for (int64_t i = 0; i < M * n; ++i)
                                if (std::fabs(got[i] - want[i]) > 1e-5f * std::fabs(want[i]) + 1e-6f) {
                                    std::printf("extreme sums: %s %s%s fill %02x scales %d sign %+.0f N=%lld: %g != %g  FAIL\n",
                                                tt->name, isa_name(isa), four ? " four-row" : "", fill, f.q6_scale,
                                                sign, (long long)n, got[i], want[i]);
                                    ++failures;
                                    break;
                                }
                        }
                    }
                    x.ne[1] = N;
                }
            }
    }
    std::printf("extreme integer sums: %s\n", failures ? "FAIL" : "ok");
    return failures;
}

// MXFP4's E8M0 scales over their range, the subnormal halves (e = 0, 1) included: rows
// whose blocks all share one exponent, every level's mul_mat (five columns: the prefill
// tiles; one: the decode), on the rows as they are and on the four-row copy, against the
// scalar reference. The SIMD levels turn the exponent bytes into floats by their bits.
int check_mxfp4_exponents(const Isa* levels) {
    int failures = 0, checked = 0;
    const DType t = DType::MXFP4;
    const int64_t K = 256, M = 8, N = 5;
    const size_t wrow = (size_t)(K / QK * sizeof(BlockMXFP4));
    for (int e : {0, 1, 2, 3, 100, 128, 200, 230}) {  // 2^(230-128) x 12 x the activations stays finite
        std::vector<uint8_t> w(wrow * M);
        for (auto& b : w) b = (uint8_t)(rng() & 0xff);
        for (int64_t b = 0; b < M * K / QK; ++b) w[(size_t)b * sizeof(BlockMXFP4)] = (uint8_t)e;
        std::vector<uint8_t> wx4(w.size());
        const Tensor wt = tensor_2d(t, K, M, w.data());
        four_row_layout(wt, wx4.data(), 0, M);
        std::vector<float> xs;
        for (int64_t c = 0; c < N; ++c) {
            auto v = rand_acts(K);
            xs.insert(xs.end(), v.begin(), v.end());
        }
        const DotKernels& ref = dot_kernels(t, Isa::SCALAR);
        const size_t arow = (size_t)(K / QK * sizeof(BlockQ8_0));
        std::vector<uint8_t> act(arow * N);
        for (int64_t c = 0; c < N; ++c) ref.convert(xs.data() + c * K, act.data() + c * arow, K);
        std::vector<float> wdq((size_t)(M * K)), adq((size_t)(N * K)), want((size_t)(M * N));
        type_traits((uint32_t)t)->dequantize(w.data(), wdq.data(), M * K);
        type_traits((uint32_t)DType::Q8_0)->dequantize(act.data(), adq.data(), N * K);
        std::vector<double> mag((size_t)(M * N));
        for (int64_t c = 0; c < N; ++c)
            for (int64_t r = 0; r < M; ++r) {
                ref.vec_dot(K, &want[c * M + r], w.data() + r * wrow, act.data() + c * arow);
                for (int64_t i = 0; i < K; ++i) mag[c * M + r] += std::fabs((double)wdq[r * K + i] * adq[c * K + i]);
            }
        for (int li = 0; li < 4; ++li) {
            const Isa isa = levels[li];
            if (!isa_supported(isa)) continue;
            for (int four = 0; four < 2; ++four) {
                if (four && !four_row_layout_read(t, isa)) continue;
                Tensor wl = wt;
                const RowGroups groups{wx4.data(), nullptr};
                if (four) wl.extra = &groups;
                for (int64_t n : {N, (int64_t)1}) {
                    std::vector<float> got((size_t)(M * n), NAN);
                    Tensor x = tensor_2d(DType::Q8_0, K, n, act.data());
                    Tensor o = tensor_2d(DType::F32, M, n, got.data());
                    mul_mat(&wl, &x, &o, 0, 1, isa);
                    bool bad = false;
                    for (int64_t i = 0; i < M * n; ++i)
                        bad |= !(std::fabs((double)got[i] - want[i]) <= 1e-5 * mag[i] + 1e-44);
                    ++checked;
                    if (bad) {
                        ++failures;
                        std::printf("MXFP4 e=%d at %s, N=%lld%s: differs from scalar  FAIL\n", e, isa_name(isa),
                                    (long long)n, four ? " (four-row copy)" : "");
                    }
                }
            }
        }
    }
    std::printf("MXFP4 exponents 0..230 (subnormal halves included): %d cases, %s\n", checked,
                failures ? "FAIL" : "ok");
    return failures;
}

// The AVX-512 level's prefill tiles, without AMX (the 512-bit tiles: sixteen rows in the
// lanes for the K-quants, the four-row groups after them as four rows) and, where the
// CPU and OS have it, on the AMX tile unit: every output of a batched mul_mat has the
// bits of each column decoded alone, and the tile unit's the bits of the 512-bit tiles,
// on the rows as they are and on the four-row copy, for random rows and for the extreme
// blocks (largest scales and values against +-127 activations: the 256 h + l split and
// the int32 sums at their bounds). M = 48 rows are three sixteen-row tile blocks (M = 52:
// and a four-row group after them); N = 37 columns nine four-column tiles and one left
// over; K a whole panel block and part of another (the tiles' panels are made per block).
int check_amx() {
    if (!isa_supported(Isa::AVX512)) {
        std::printf("AVX-512 / AMX tiles: skipped (no AVX-512 level on this CPU)\n");
        return 0;
    }
    const bool amx = amx_supported();
    int failures = 0, checked = 0;
    const bool was = amx_enabled();
    for (DType t : {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q2_K, DType::Q3_K,
                    DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::MXFP4, DType::IQ4_NL, DType::IQ4_XS}) {
        const TypeTraits* tt = type_traits((uint32_t)t);
        const bool kq = tt->block_size == 256;
        // K: a whole panel block and part of one (8 super-blocks, 64 32-element blocks)
        const int64_t K = (kq ? 10 : 80) * tt->block_size, N = 37;
        const size_t wrow = (size_t)row_bytes(*tt, K);
        // M = 52: the same and a four-row group past the sixteen-row blocks (no AMX)
        for (const int64_t M : {48, 52})
        for (int variant = 0; variant < 4; ++variant) {
            std::vector<uint8_t> w;
            std::vector<float> xs((size_t)(K * N));
            if (variant == 0) {
                for (int64_t r = 0; r < M; ++r) {
                    auto row = rand_row(t, K);
                    w.insert(w.end(), row.begin(), row.end());
                }
                for (int64_t c = 0; c < N; ++c) {
                    auto v = rand_acts(K);
                    std::copy(v.begin(), v.end(), xs.begin() + c * K);
                }
            } else {
                // every byte 0xff (largest values and scales) or 0x81, d = dmin = 1
                w.assign(wrow * M, variant == 2 ? 0x81 : 0xff);
                for (int64_t b = 0; b < M * K / tt->block_size; ++b) {
                    set_block_scales(t, w.data() + b * tt->block_bytes, 1.0f, 1.0f);
                }
                for (int64_t i = 0; i < K * N; ++i) xs[(size_t)i] = variant == 3 ? -1.0f : (i % 3 ? 1.0f : -1.0f);
            }
            const DotKernels& k = dot_kernels(t, Isa::AVX512);
            const size_t arow = (size_t)row_bytes(*type_traits((uint32_t)k.act_type), K);
            std::vector<uint8_t> act(arow * N);
            for (int64_t c = 0; c < N; ++c) k.convert(xs.data() + c * K, act.data() + c * arow, K);
            std::vector<uint8_t> wx4(w.size());
            const Tensor wt = tensor_2d(t, K, M, w.data());
            four_row_layout(wt, wx4.data(), 0, M);
            for (int four = 0; four < 2; ++four) {
                if (four && !four_row_layout_read(t, Isa::AVX512)) continue;
                Tensor wl = wt;
                const RowGroups groups{wx4.data(), nullptr};
                if (four) wl.extra = &groups;
                std::vector<float> want((size_t)(M * N), NAN), got((size_t)(M * N), NAN), one((size_t)M, NAN);
                Tensor x = tensor_2d(k.act_type, K, N, act.data());
                Tensor ow = tensor_2d(DType::F32, M, N, want.data()), og = tensor_2d(DType::F32, M, N, got.data());
                set_amx_enabled(false);
                // the CPU-dependent choices (amd_tuning) both ways: the same bits
                set_amd_tuning(true);
                mul_mat(&wl, &x, &og, 0, 1, Isa::AVX512);
                set_amd_tuning(false);
                mul_mat(&wl, &x, &ow, 0, 1, Isa::AVX512);
                bool bad = std::memcmp(want.data(), got.data(), want.size() * sizeof(float)) != 0, bad_amx = false;
                if (amx && M % 16 == 0) {
                    set_amx_enabled(true);
                    for (int nth : {1, 2})
                        for (int ith = 0; ith < nth; ++ith) mul_mat(&wl, &x, &og, ith, nth, Isa::AVX512);
                    bad_amx = std::memcmp(want.data(), got.data(), want.size() * sizeof(float)) != 0;
                    for (float v : got) bad_amx |= std::isnan(v);
                }
                // each column alone (the decode path) against the batch
                for (int64_t c = 0; c < N && !bad; ++c) {
                    Tensor x1 = tensor_2d(k.act_type, K, 1, act.data() + c * arow);
                    Tensor o1 = tensor_2d(DType::F32, M, 1, one.data());
                    set_amd_tuning(c % 2 == 1);  // the decode's CPU-dependent choices both ways
                    mul_mat(&wl, &x1, &o1, 0, 1, Isa::AVX512);
                    bad |= std::memcmp(one.data(), want.data() + c * M, (size_t)M * sizeof(float)) != 0;
                }
                for (float v : want) bad |= std::isnan(v);
                ++checked;
                if (bad || bad_amx) {
                    ++failures;
                    std::printf("%s: %s M=%lld variant %d%s: not the bits of %s  FAIL\n",
                                bad ? "512-bit tiles" : "AMX tiles", tt->name, (long long)M, variant,
                                four ? " (four-row copy)" : "",
                                bad ? "each column decoded alone" : "the 512-bit tiles");
                }
            }
        }
    }
    set_amx_enabled(was);
    set_amd_tuning(cpu_is_amd());
    std::printf("AVX-512 tiles%s: %d cases, %s%s\n", amx ? " and AMX tiles" : "", checked,
                failures ? "FAIL" : "bit for bit ok", amx ? "" : " (AMX skipped: this CPU or OS gives no AMX-INT8)");
    return failures;
}

int main() {
    const DType types[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0,  DType::Q4_1,
                           DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q2_K,  DType::Q3_K,
                           DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::MXFP4, DType::IQ4_NL,
                           DType::IQ4_XS};
    const Isa levels[] = {Isa::SCALAR, Isa::AVX2, Isa::AVX512, Isa::NEON};
    int failures = 0;

    // The type table walked by id: every type a model may hold as a weight has kernels at
    // every level (and is checked below); every other id is refused, never handed another
    // type's kernel.
    for (uint32_t id = 0; id < kDTypeCount + 8; ++id) {
        const DType t = (DType)id;
        const bool listed = std::find(std::begin(types), std::end(types), t) != std::end(types);
        if (weight_type_supported(t) != listed) {
            std::printf("type id %u (%s): weight_type_supported says %d but the checked list %s it\n", id,
                        type_name(id) ? type_name(id) : "?", (int)weight_type_supported(t),
                        listed ? "has" : "lacks");
            ++failures;
        }
        for (Isa isa : levels) {
            if (!isa_supported(isa)) continue;
            bool refused = false;
            try {
                (void)dot_kernels(t, isa);
            } catch (const Error&) {
                refused = true;
            }
            if (refused == listed) {
                std::printf("type id %u at %s: %s\n", id, isa_name(isa),
                            listed ? "no kernel for a supported type" : "a kernel handed out for an unsupported type");
                ++failures;
            }
        }
    }
    std::printf("detected ISA: %s\n", isa_name(detect_isa()));
    std::printf("%-5s %-7s %-9s %-8s %9s %9s %9s %9s  %s\n", "type", "isa", "kernels", "convert", "vec_dot",
                "gemm", "mul_mat", "ref/f64", "result");
    int x4_checked = 0;
    for (DType t : types) {
        const TypeTraits* tt = type_traits((uint32_t)t);
        const int64_t K = 768;  // 3 K-quant super-blocks, 24 legacy blocks
        const int64_t M = 37, N = 70;  // not multiples of any tile size; N spans two column chunks
        std::vector<std::vector<uint8_t>> wrows;
        std::vector<uint8_t> wbuf;
        for (int64_t r = 0; r < M; ++r) {
            auto row = rand_row(t, K);
            wbuf.insert(wbuf.end(), row.begin(), row.end());
        }
        const size_t wrow = (size_t)row_bytes(*tt, K);
        std::vector<std::vector<float>> xs;
        for (int64_t c = 0; c < N; ++c) xs.push_back(rand_acts(K));
        // dequantized weights (gguf-exact reference) for the float64 check
        std::vector<float> wdq((size_t)(M * K));
        for (int64_t r = 0; r < M; ++r) tt->dequantize(wbuf.data() + r * wrow, wdq.data() + r * K, K);

        const DotKernels& ref = dot_kernels(t, Isa::SCALAR);
        const TypeTraits* at = type_traits((uint32_t)ref.act_type);
        const size_t arow = (size_t)row_bytes(*at, K);
        std::vector<uint8_t> aref(arow * (size_t)N);
        for (int64_t c = 0; c < N; ++c) {
            if (ref.convert) ref.convert(xs[c].data(), aref.data() + c * arow, K);
            else std::memcpy(aref.data() + c * arow, xs[c].data(), arow);
        }
        // scalar reference values, their magnitudes and the float64 check
        std::vector<float> sref((size_t)(M * N));
        std::vector<double> mag((size_t)(M * N));
        double worst_f64 = 0;
        for (int64_t c = 0; c < N; ++c)
            for (int64_t r = 0; r < M; ++r) {
                ref.vec_dot(K, &sref[c * M + r], wbuf.data() + r * wrow, aref.data() + c * arow);
                double exact = 0, m = 0, qerr = 0;
                const int64_t ab = ref.act_type == DType::F32 ? 1 : act_block(ref.act_type);
                for (int64_t b0 = 0; b0 < K; b0 += ab) {
                    double amax = 0, wabs = 0;
                    for (int64_t i = b0; i < b0 + ab; ++i) {
                        const double w = wdq[r * K + i], x = xs[c][i];
                        exact += w * x;
                        m += std::fabs(w * x);
                        amax = std::fmax(amax, std::fabs(x));
                        wabs += std::fabs(w);
                    }
                    // activation rounding: |x - q d| <= d / 2 with d = amax / 127
                    if (ref.act_type != DType::F32) qerr += wabs * amax / 254.0;
                }
                mag[c * M + r] = m;
                // + fp16 scales of the activation blocks and float accumulation
                const double bound = qerr * 1.01 + 2e-3 * m + 1e-5 * m + 1e-30;
                const double e = std::fabs((double)sref[c * M + r] - exact) / bound;
                if (e > worst_f64) worst_f64 = e;
            }

        for (Isa isa : levels) {
            if (!isa_supported(isa)) continue;
            const DotKernels& k = dot_kernels(t, isa);
            const bool native = dot_kernels_exact(t, isa) != nullptr;
            if (isa != Isa::SCALAR && !native) {
                std::printf("%-5s %-7s %-9s (falls back a level)\n", tt->name, isa_name(isa), "-");
                continue;
            }
            Stats st;
            st.worst_f64 = worst_f64;
            st.has_gemm = k.gemm != nullptr;
            if (k.act_type != ref.act_type) {
                std::printf("%-5s %-7s activation type differs from scalar\n", tt->name, isa_name(isa));
                ++failures;
                continue;
            }
            std::vector<uint8_t> act(arow * (size_t)N);
            for (int64_t c = 0; c < N; ++c) {
                if (k.convert) k.convert(xs[c].data(), act.data() + c * arow, K);
                else std::memcpy(act.data() + c * arow, xs[c].data(), arow);
            }
            st.convert_exact = std::memcmp(act.data(), aref.data(), act.size()) == 0;
            auto rel = [&](float got, int64_t r, int64_t c) {
                return std::fabs((double)got - (double)sref[c * M + r]) / (1e-5 * mag[c * M + r] + 1e-30);
            };
            for (int64_t c = 0; c < N; ++c)
                for (int64_t r = 0; r < M; ++r) {
                    float s = 0;
                    k.vec_dot(K, &s, wbuf.data() + r * wrow, act.data() + c * arow);
                    st.worst_ref = std::fmax(st.worst_ref, rel(s, r, c));
                }
            bool nan_gemm = false;
            if (k.gemm) {
                // odd sub-tiles exercise the remainder paths of the tile driver
                for (int nr : {1, 3, 16, (int)M})
                    for (int nc : {1, 2, 5, (int)N}) {
                        std::vector<float> out((size_t)(nr * nc), NAN);
                        k.gemm(K, nr, nc, wbuf.data(), wrow, act.data(), arow, out.data(), (size_t)nr);
                        for (int c = 0; c < nc; ++c)
                            for (int r = 0; r < nr; ++r) {
                                nan_gemm |= std::isnan(out[c * nr + r]);
                                st.worst_gemm = std::fmax(st.worst_gemm, rel(out[c * nr + r], r, c));
                            }
                    }
            }
            // mul_mat through tensors, two "threads" run one after the other
            std::vector<float> out((size_t)(M * N), NAN);
            const Tensor w = tensor_2d(t, K, M, wbuf.data());
            Tensor x = tensor_2d(k.act_type, K, N, act.data());
            Tensor o = tensor_2d(DType::F32, M, N, out.data());
            bool variant = false;
            bool nan = false;  // NaN comparisons leave fmax unchanged: check them explicitly
            // 1 and 2 threads with a static split, then 2 and 3 taking chunks from a shared
            // counter (run one after the other here, so the first takes every chunk)
            for (int mode : {1, 2, -2, -3}) {
                const int nth = mode < 0 ? -mode : mode;
                std::atomic<int64_t> next[3] = {{0}, {0}, {0}};  // one counter per thread
                std::atomic<int64_t>* chunks = mode < 0 ? next : nullptr;
                std::fill(out.begin(), out.end(), NAN);
                for (int ith = 0; ith < nth; ++ith) mul_mat(&w, &x, &o, ith, nth, isa, chunks);
                for (float v : out) nan |= std::isnan(v);
                const std::vector<float> first(out.begin(), out.begin() + M);
                for (int64_t c = 0; c < N; ++c)
                    for (int64_t r = 0; r < M; ++r) st.worst_mm = std::fmax(st.worst_mm, rel(out[c * M + r], r, c));
                // single column: the decode path
                x.ne[1] = o.ne[1] = 1;
                std::fill(out.begin(), out.end(), NAN);
                for (auto& n : next) n = 0;
                for (int ith = 0; ith < nth; ++ith) mul_mat(&w, &x, &o, ith, nth, isa, chunks);
                // batch invariance: a column gets the same bits alone as in a batch
                if (std::memcmp(first.data(), out.data(), (size_t)M * sizeof(float)) != 0) variant = true;
                for (int64_t r = 0; r < M; ++r) {
                    nan |= std::isnan(out[r]);
                    st.worst_mm = std::fmax(st.worst_mm, rel(out[r], r, 0));
                }
                x.ne[1] = o.ne[1] = N;
            }
            // The four-row layout (RowGroups), where this level reads it: block i of row
            // 4g + r lies at block 4i + r of group g (re-encoded there for Q4_0:
            // four_row_block reads it back) and the rows after the last whole group as
            // they were; mul_mat on it gives the bits of the rows as they are, batched and
            // alone, for every split.
            bool x4_bad = false;
            if (four_row_layout_read(t, isa)) {
                ++x4_checked;
                std::vector<uint8_t> wx4(wbuf.size());
                four_row_layout(w, wx4.data(), 0, 16);  // in pieces, as the loader fills it
                four_row_layout(w, wx4.data(), 16, M);
                const size_t bb = (size_t)tt->block_bytes;
                const int64_t nb = K / tt->block_size;
                std::vector<uint8_t> blk(bb);
                for (int64_t r = 0; r < M; ++r)
                    for (int64_t i = 0; i < nb; ++i) {
                        const uint8_t* want = wbuf.data() + (size_t)r * wrow + (size_t)i * bb;
                        if (r < M / 4 * 4) {
                            four_row_block(t, wx4.data() + (size_t)(r / 4 * 4) * wrow, i, (int)(r % 4), blk.data());
                            x4_bad |= std::memcmp(blk.data(), want, bb) != 0;
                            // the plain interleave everywhere but where the type is re-encoded
                            if (!four_row_reencoded(t))
                                x4_bad |= std::memcmp(wx4.data() + (size_t)(r / 4 * 4) * wrow + (size_t)(4 * i + r % 4) * bb,
                                                      want, bb) != 0;
                        } else {
                            x4_bad |= std::memcmp(wx4.data() + (size_t)r * wrow + (size_t)i * bb, want, bb) != 0;
                        }
                    }
                Tensor w4 = w;
                RowGroups groups{wx4.data(), nullptr};
                w4.extra = &groups;
                std::vector<float> plain((size_t)(M * N)), four((size_t)(M * N));
                // also half filled, as the loader publishes it (RowGroups::filled): the
                // rows past the count come from data, whatever the copy holds there
                std::vector<uint8_t> half(wx4);
                std::memset(half.data() + (size_t)16 * wrow, 0xff, half.size() - (size_t)16 * wrow);
                const std::atomic<int64_t> sixteen{16};
                for (int filled : {0, 1}) {
                    if (filled) {
                        groups = RowGroups{half.data(), &sixteen};
                    }
                    for (int64_t n : {N, (int64_t)1})
                        for (int mode : {1, 2, -3}) {
                            const int nth = mode < 0 ? -mode : mode;
                            x.ne[1] = n;
                            Tensor op = tensor_2d(DType::F32, M, n, plain.data()), o4 = tensor_2d(DType::F32, M, n, four.data());
                            std::atomic<int64_t> n1[3] = {{0}, {0}, {0}}, n2[3] = {{0}, {0}, {0}};
                            std::fill(four.begin(), four.end(), NAN);
                            for (int ith = 0; ith < nth; ++ith) {
                                mul_mat(&w, &x, &op, ith, nth, isa, mode < 0 ? n1 : nullptr);
                                mul_mat(&w4, &x, &o4, ith, nth, isa, mode < 0 ? n2 : nullptr);
                            }
                            x4_bad |= std::memcmp(plain.data(), four.data(), (size_t)(M * n) * sizeof(float)) != 0;
                        }
                }
                x.ne[1] = N;
            }
            const bool ok = st.convert_exact && st.worst_ref <= 1.0 && st.worst_gemm <= 1.0 &&
                            st.worst_mm <= 1.0 && st.worst_f64 <= 1.0 && !nan && !nan_gemm && !variant && !x4_bad;
            if (!ok) ++failures;
            char gemm_s[32];
            if (st.has_gemm) std::snprintf(gemm_s, sizeof gemm_s, "%9.3f", st.worst_gemm);
            else std::snprintf(gemm_s, sizeof gemm_s, "%9s", "-");
            std::printf("%-5s %-7s %-9s %-8s %9.3f %s %9.3f %9.3f  %s%s%s\n", tt->name, isa_name(isa),
                        native ? "native" : "fallback", st.convert_exact ? "exact" : "DIFFERS", st.worst_ref,
                        gemm_s, st.worst_mm, st.worst_f64, ok ? "ok" : "FAIL",
                        variant ? " (N=1 differs from batched)" : "", x4_bad ? " (four-row layout differs)" : "");
        }
    }
    std::printf("four-row layout (RowGroups): %d type/level pairs read it, checked bit for bit against the rows "
                "as they are\n", x4_checked);
    std::printf("(columns: worst error / tolerance, pass <= 1; vec_dot/gemm/mul_mat vs scalar at 1e-5 of "
                "sum|w x|, ref/f64 vs float64 of dequantized weights)\n");
    failures += check_attention_kernels(levels);
    failures += check_delta_step(levels);
    failures += check_attention_512();
    failures += check_extreme_sums(levels);
    failures += check_amx();
    failures += check_mxfp4_exponents(levels);
    std::printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
    return failures ? 1 : 0;
}
