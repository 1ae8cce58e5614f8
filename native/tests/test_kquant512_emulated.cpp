// The AVX-512 Q5_K and Q6_K decodes (cpu/kernels_q5k512.h, kernels_q6k512.h) on any
// x86-64 CPU: compiled here against SIMDe's portable AVX-512 (libsimde-dev), whose
// operations follow Intel's definitions, and checked bit for bit against the AVX2 decode of
// the same re-encoded four-row copy, which test_kernels checks against the rows as they
// are. On a CPU with AVX-512, test_kernels runs the kernels natively as well; this test is
// what checks them on one without. Random blocks, then blocks at the extremes (Q6_K: every
// value 0 or 63 under scales of +-127 or -128, where the int16 sums wrap and end on their
// bound; Q5_K: every value 0 or 31 under scales and mins of 0 or 63), activations +-127.
// Also the AVX-512 prefill's Q5_K panels from the copy (unpack_panels_q5_k_x4, AVX2 code)
// against unpack_panel of the blocks as they are.
// Exits 77 (skipped, and says so) where SIMDe or AVX2 is missing.
#if defined(__x86_64__) && defined(__AVX2__) && defined(__has_include)
#  if __has_include(<simde/x86/avx512.h>)
#    define EMBER_KQUANT512_EMULATED 1
#  endif
#endif

#include <cstdio>

#ifdef EMBER_KQUANT512_EMULATED
#  define SIMDE_ENABLE_NATIVE_ALIASES
#  include <simde/x86/avx512.h>

#  include <cmath>
#  include <cstring>
#  include <random>
#  include <vector>

#  include "core/fp16.h"
#  include "core/tensor.h"
#  include "cpu/kernels.h"
#  include "cpu/kernels_q5k512.h"
#  include "cpu/kernels_q6k512.h"

using namespace ember;

namespace {

std::mt19937 rng(1234);

// M rows of K values of Q6_K: random blocks (d in [0.01, 0.1]), or every value byte
// `fill` under sub-block scales `scale`
std::vector<uint8_t> q6_rows(int64_t K, int64_t M, int mode, uint8_t fill, int8_t scale) {
    const int64_t nb = K / QK_K;
    std::vector<uint8_t> w((size_t)(M * nb) * sizeof(BlockQ6_K));
    auto* b = reinterpret_cast<BlockQ6_K*>(w.data());
    for (int64_t i = 0; i < M * nb; ++i) {
        if (mode == 0) {
            for (auto& x : b[i].ql) x = (uint8_t)rng();
            for (auto& x : b[i].qh) x = (uint8_t)rng();
            for (auto& x : b[i].scales) x = (int8_t)rng();
            b[i].d = fp32_to_fp16(0.01f + 0.09f * (float)(rng() % 1000) / 1000.0f);
        } else {
            std::memset(b[i].ql, fill, sizeof b[i].ql);
            std::memset(b[i].qh, fill, sizeof b[i].qh);
            std::memset(b[i].scales, (uint8_t)scale, sizeof b[i].scales);
            b[i].d = fp32_to_fp16(1.0f);
        }
    }
    return w;
}

// M rows of K values of Q5_K: random blocks (d, dmin in [0.01, 0.1]), or every value
// 0 (fill 0) or 31 (fill 0xff) under scales and mins 0 (sfill 0) or 63 (sfill 0xff)
std::vector<uint8_t> q5_rows(int64_t K, int64_t M, int mode, uint8_t fill, uint8_t sfill) {
    const int64_t nb = K / QK_K;
    std::vector<uint8_t> w((size_t)(M * nb) * sizeof(BlockQ5_K));
    auto* b = reinterpret_cast<BlockQ5_K*>(w.data());
    for (int64_t i = 0; i < M * nb; ++i) {
        if (mode == 0) {
            for (auto& x : b[i].qs) x = (uint8_t)rng();
            for (auto& x : b[i].qh) x = (uint8_t)rng();
            for (auto& x : b[i].scales) x = (uint8_t)rng();
            b[i].d = fp32_to_fp16(0.01f + 0.09f * (float)(rng() % 1000) / 1000.0f);
            b[i].dmin = fp32_to_fp16(0.01f + 0.09f * (float)(rng() % 1000) / 1000.0f);
        } else {
            std::memset(b[i].qs, fill, sizeof b[i].qs);
            std::memset(b[i].qh, fill, sizeof b[i].qh);
            std::memset(b[i].scales, sfill, sizeof b[i].scales);
            b[i].d = b[i].dmin = fp32_to_fp16(1.0f);
        }
    }
    return w;
}

// The four rows' panels of every super-block of the copy against unpack_panel of the rows
int check_q5_panels(const std::vector<uint8_t>& w, const std::vector<uint8_t>& x4, int64_t K, int64_t M) {
    const int64_t nb = K / QK_K;
    const size_t row = w.size() / (size_t)M;
    for (int64_t g = 0; g < M / 4; ++g)
        for (int64_t i = 0; i < nb; ++i) {
            KPanel got[4], want[4];
            std::memset(got, 0, sizeof got);
            std::memset(want, 0, sizeof want);
            KPanel* const p[4] = {&got[0], &got[1], &got[2], &got[3]};
            unpack_panels_q5_k_x4(x4.data() + (size_t)(4 * g) * row + (size_t)i * 4 * sizeof(BlockQ5_K), p);
            for (int r = 0; r < 4; ++r)
                unpack_panel(reinterpret_cast<const BlockQ5_K*>(w.data() + (size_t)(4 * g + r) * row)[i], want[r]);
            if (std::memcmp(got, want, sizeof got) != 0) {
                std::printf("Q5_K panels from the four-row copy, group %lld block %lld differ from the rows'  FAIL\n",
                            (long long)g, (long long)i);
                return 1;
            }
        }
    return 0;
}

int check(DType t, int64_t K, int64_t M, int mode, uint8_t fill, int8_t scale, float act) {
    std::vector<uint8_t> w = t == DType::Q6_K ? q6_rows(K, M, mode, fill, scale) : q5_rows(K, M, mode, fill, (uint8_t)scale);
    std::vector<uint8_t> x4(w.size());
    Tensor wt = tensor_2d(t, K, M, w.data());
    four_row_layout(wt, x4.data(), 0, M);
    const RowGroups groups{x4.data(), nullptr};
    wt.extra = &groups;
    const DotKernels& k = dot_kernels(t, Isa::AVX2);
    std::vector<float> xs((size_t)K);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (auto& v : xs) v = act != 0.0f ? act : nd(rng);
    std::vector<uint8_t> a((size_t)(K / QK_K) * sizeof(BlockQ8_K));
    k.convert(xs.data(), a.data(), K);
    Tensor xt = tensor_2d(DType::Q8_K, K, 1, a.data());
    std::vector<float> want((size_t)M), got((size_t)M, NAN);
    Tensor ot = tensor_2d(DType::F32, M, 1, want.data());
    mul_mat(&wt, &xt, &ot, 0, 1, Isa::AVX2);  // the AVX2 decode on the copy

    const int64_t nbk = K / QK_K;
    const size_t row = w.size() / (size_t)M;
    // the groups through the kernel's three streams side by side, then one at a time
    const auto group = [&](int g) { return static_cast<const uint8_t*>(x4.data()) + (size_t)(4 * g) * row; };
    if (t == DType::Q6_K) {
        std::vector<Q6KPre> pre((size_t)nbk);
        q6_k_prepare(nbk, reinterpret_cast<const BlockQ8_K*>(a.data()), pre.data());
        decode_groups<3>((int)(M / 4), group, got.data(), [&](auto streams, auto x, float* const* o) {
            q6_k_decode512<decltype(streams)::value>(nbk, x, reinterpret_cast<const BlockQ8_K*>(a.data()), pre.data(), o);
        });
    } else {
        std::vector<Q4KPre> pre((size_t)nbk);
        q4_k_prepare(nbk, reinterpret_cast<const BlockQ8_K*>(a.data()), pre.data());
        decode_groups<3>((int)(M / 4), group, got.data(), [&](auto streams, auto x, float* const* o) {
            q5_k_decode512<decltype(streams)::value>(nbk, x, reinterpret_cast<const BlockQ8_K*>(a.data()), pre.data(), o);
        });
    }
    int bad = t == DType::Q5_K ? check_q5_panels(w, x4, K, M) : 0;
    if (std::memcmp(want.data(), got.data(), (size_t)M * sizeof(float)) != 0) {
        for (int64_t r = 0; r < M; ++r)
            if (std::memcmp(&want[(size_t)r], &got[(size_t)r], sizeof(float)) != 0) {
                std::printf("%s avx512 decode (emulated) K=%lld M=%lld mode %d fill %02x scale %d act %g: row %lld "
                            "%.9g != avx2 %.9g  FAIL\n",
                            t == DType::Q6_K ? "Q6_K" : "Q5_K", (long long)K, (long long)M, mode, fill, scale, act, (long long)r, got[(size_t)r],
                            want[(size_t)r]);
                break;
            }
        return 1;
    }
    return bad;
}

}  // namespace

int main() {
    if (!isa_supported(Isa::AVX2)) {
        std::printf("SKIPPED: this CPU has no AVX2, the reference the emulated AVX-512 Q5_K / Q6_K decodes are checked against\n");
        return 77;
    }
    int failures = 0, checks = 0;
    for (DType t : {DType::Q5_K, DType::Q6_K}) {
        // 28 rows: seven groups, two runs of three streams and one group alone
        for (int64_t K : {256, 768, 2048})
            for (int rep = 0; rep < 4; ++rep, ++checks) failures += check(t, K, 28, 0, 0, 0, 0.0f);
        for (uint8_t fill : {(uint8_t)0x00, (uint8_t)0xff})
            for (int8_t scale : t == DType::Q6_K ? std::vector<int8_t>{127, -128, -1} : std::vector<int8_t>{0, -1})
                for (float act : {127.0f, -127.0f}) {
                    ++checks;
                    failures += check(t, 512, 12, 1, fill, scale, act);
                }
    }
    std::printf("Q5_K and Q6_K AVX-512 decodes under SIMDe emulation: %d checks against the AVX2 decode, %s\n", checks,
                failures ? "FAIL" : "bit for bit");
    return failures ? 1 : 0;
}

#else

int main() {
    std::printf("SKIPPED: the AVX-512 Q5_K / Q6_K decodes were NOT checked by emulation here (needs an x86-64 build with "
                "AVX2 and SIMDe's headers: apt-get install libsimde-dev)\n");
    return 77;
}

#endif
