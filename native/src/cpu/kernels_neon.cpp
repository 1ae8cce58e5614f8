// NEON (AArch64 Advanced SIMD) kernels.
//
// Two families live here:
//  - float weights (F32, F16, BF16) x F32 activations, four FMA accumulators;
//  - quantized weights x 8-bit activation blocks (Q8_0, Q8_1, Q8_K): 8x8-bit products
//    summed exactly in int32, one float multiply per block (per super-block for K-quants),
//    so the integer part equals the scalar reference's and only the float summation order
//    differs.
// The 4-bit table types (MXFP4, IQ4_NL, IQ4_XS) decode with one TBL per 16 codes.
// Tile (gemm) kernels for prefill exist for the float and legacy types: they decode each
// weight block once per four activation columns. K-quant tiles are not written yet
// (mul_mat loops vec_dot for them).
// The integer kernels come in two builds of the same source: plain NEON (vmull_s8 + vpadal,
// any ARMv8 CPU) and dotprod (SDOT, ARMv8.2+), picked at run time. The file includes itself
// once per build (see the bottom) because a target attribute cannot vary per template
// instance and the dotprod intrinsics must only be inlined into dotprod-enabled functions.
//
// register_neon_kernels takes each weight type's activation format and converter from the
// scalar table, so a NEON entry always reads exactly what the scalar reference reads and the
// two can be compared (and swapped) one for one.
#if !defined(EMBER_NEON_PASS)

#include "cpu/kernels.h"

#if defined(__aarch64__)

#include <arm_neon.h>

#include <cstddef>
#include <cstring>

#if defined(__linux__)
#  include <sys/auxv.h>
#elif defined(__APPLE__)
#  include <sys/sysctl.h>
#endif

#include "core/fp16.h"
#include "quant/types.h"

namespace ember {

// Also used by native/tests/test_neon_kernels.cpp, which declares them itself (they are not
// part of the engine's interface): whether SDOT is usable, and the vec_dot / tile kernel for
// a weight type reading a given activation format in either build (nullptr when none).
bool neon_has_dotprod();
VecDotFn neon_vec_dot(DType weight, DType act, bool dotprod);
GemmFn neon_gemm(DType weight, DType act, bool dotprod);

namespace neon_common {

// Fifth bits of a Q5 block as 0x10 bytes: lanes 0..15 from qh bits 0..15 (low nibbles),
// lanes 16..31 from bits 16..31 (high nibbles).
inline void q5_high_bits(const uint8_t qh[4], uint8x16_t* lo, uint8x16_t* hi) {
    static const uint8_t kBit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    const uint8x16_t bit = vld1q_u8(kBit), ten = vdupq_n_u8(0x10);
    *lo = vandq_u8(vtstq_u8(vcombine_u8(vdup_n_u8(qh[0]), vdup_n_u8(qh[1])), bit), ten);
    *hi = vandq_u8(vtstq_u8(vcombine_u8(vdup_n_u8(qh[2]), vdup_n_u8(qh[3])), bit), ten);
}

void vec_dot_f32(int64_t n, float* s, const void* wv, const void* av) {
    const float* w = static_cast<const float*>(wv);
    const float* a = static_cast<const float*>(av);
    // four independent accumulators hide the FMA latency
    float32x4_t acc0 = vdupq_n_f32(0), acc1 = acc0, acc2 = acc0, acc3 = acc0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        acc0 = vfmaq_f32(acc0, vld1q_f32(w + i), vld1q_f32(a + i));
        acc1 = vfmaq_f32(acc1, vld1q_f32(w + i + 4), vld1q_f32(a + i + 4));
        acc2 = vfmaq_f32(acc2, vld1q_f32(w + i + 8), vld1q_f32(a + i + 8));
        acc3 = vfmaq_f32(acc3, vld1q_f32(w + i + 12), vld1q_f32(a + i + 12));
    }
    for (; i + 4 <= n; i += 4) acc0 = vfmaq_f32(acc0, vld1q_f32(w + i), vld1q_f32(a + i));
    float sum = vaddvq_f32(vaddq_f32(vaddq_f32(acc0, acc1), vaddq_f32(acc2, acc3)));
    for (; i < n; ++i) sum += w[i] * a[i];
    *s = sum;
}

void vec_dot_bf16(int64_t n, float* s, const void* wv, const void* av) {
    const uint16_t* w = static_cast<const uint16_t*>(wv);
    const float* a = static_cast<const float*>(av);
    float32x4_t acc0 = vdupq_n_f32(0), acc1 = acc0;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        // bf16 is the top half of a binary32: widen by a 16-bit left shift
        const uint16x8_t h = vld1q_u16(w + i);
        acc0 = vfmaq_f32(acc0, vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h), 16)), vld1q_f32(a + i));
        acc1 = vfmaq_f32(acc1, vreinterpretq_f32_u32(vshll_high_n_u16(h, 16)), vld1q_f32(a + i + 4));
    }
    float sum = vaddvq_f32(vaddq_f32(acc0, acc1));
    for (; i < n; ++i) sum += bf16_to_fp32(w[i]) * a[i];
    *s = sum;
}


// Loaders of four weights as floats, for the float tile kernel.
struct LoadF32 {
    static float32x4_t load(const void* p, int64_t i) { return vld1q_f32(static_cast<const float*>(p) + i); }
    static float one(const void* p, int64_t i) { return static_cast<const float*>(p)[i]; }
};
struct LoadF16 {  // FCVTL is exact for every binary16 value, subnormals included
    static float32x4_t load(const void* p, int64_t i) {
        return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(static_cast<const uint16_t*>(p) + i)));
    }
    static float one(const void* p, int64_t i) { return fp16_to_fp32(static_cast<const uint16_t*>(p)[i]); }
};
struct LoadBF16 {
    static float32x4_t load(const void* p, int64_t i) {
        return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(static_cast<const uint16_t*>(p) + i), 16));
    }
    static float one(const void* p, int64_t i) { return bf16_to_fp32(static_cast<const uint16_t*>(p)[i]); }
};

// Tile of float dot products: each weight row is loaded (and for F16/BF16 widened) once per
// four activation columns instead of once per column; four accumulators, one per column.
// L loads the weights, A the activations.
template <typename L, typename A = LoadF32>
void gemm_float(int64_t n, int nr, int nc, const void* w, size_t ws, const void* a, size_t as, float* s,
                size_t lds) {
    const uint8_t* wb = static_cast<const uint8_t*>(w);
    const uint8_t* ab = static_cast<const uint8_t*>(a);
    for (int r = 0; r < nr; ++r) {
        const void* wr = wb + (size_t)r * ws;
        int c = 0;
        for (; c + 4 <= nc; c += 4) {
            const void* x[4];
            for (int j = 0; j < 4; ++j) x[j] = ab + (size_t)(c + j) * as;
            float32x4_t acc[4] = {vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0)};
            int64_t i = 0;
            for (; i + 4 <= n; i += 4) {
                const float32x4_t wv = L::load(wr, i);
                for (int j = 0; j < 4; ++j) acc[j] = vfmaq_f32(acc[j], wv, A::load(x[j], i));
            }
            for (int j = 0; j < 4; ++j) {
                float sum = vaddvq_f32(acc[j]);
                for (int64_t k = i; k < n; ++k) sum += L::one(wr, k) * A::one(x[j], k);
                s[(size_t)(c + j) * lds + (size_t)r] = sum;
            }
        }
        for (; c < nc; ++c) {
            const void* x = ab + (size_t)c * as;
            float32x4_t acc = vdupq_n_f32(0);
            int64_t i = 0;
            for (; i + 4 <= n; i += 4) acc = vfmaq_f32(acc, L::load(wr, i), A::load(x, i));
            float sum = vaddvq_f32(acc);
            for (; i < n; ++i) sum += L::one(wr, i) * A::one(x, i);
            s[(size_t)c * lds + (size_t)r] = sum;
        }
    }
}

// F16 weights x F32 activations, one row: the weights widened exactly (FCVTL).
void vec_dot_f16(int64_t n, float* s, const void* wv, const void* av) {
    const uint16_t* w = static_cast<const uint16_t*>(wv);
    const float* a = static_cast<const float*>(av);
    float32x4_t acc0 = vdupq_n_f32(0), acc1 = acc0;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const float16x8_t h = vreinterpretq_f16_u16(vld1q_u16(w + i));
        acc0 = vfmaq_f32(acc0, vcvt_f32_f16(vget_low_f16(h)), vld1q_f32(a + i));
        acc1 = vfmaq_f32(acc1, vcvt_high_f32_f16(h), vld1q_f32(a + i + 4));
    }
    float sum = vaddvq_f32(vaddq_f32(acc0, acc1));
    for (; i < n; ++i) sum += fp16_to_fp32(w[i]) * a[i];
    *s = sum;
}

}  // namespace neon_common
}  // namespace ember

// ---- integer kernels, built twice (plain NEON, then dotprod) --------------------------------

#define EMBER_NEON_PASS 1
#define EMBER_NEON_NS neon_plain
#define EMBER_NEON_TARGET
#define EMBER_NEON_SDOT 0
#include "cpu/kernels_neon.cpp"  // NOLINT(bugprone-suspicious-include)
#undef EMBER_NEON_PASS
#undef EMBER_NEON_NS
#undef EMBER_NEON_TARGET
#undef EMBER_NEON_SDOT

#define EMBER_NEON_PASS 2
#define EMBER_NEON_NS neon_dotprod
#define EMBER_NEON_SDOT 1
#if defined(__ARM_FEATURE_DOTPROD)
#  define EMBER_NEON_TARGET  // the whole build already targets a dotprod CPU
#elif defined(__clang__) && __clang_major__ >= 17
#  define EMBER_NEON_TARGET __attribute__((target("dotprod")))
#elif defined(__clang__)
// Older clang declares vdotq_s32 only when the whole build targets dotprod: this pass
// then repeats the plain kernels (correct everywhere, just without SDOT).
#  define EMBER_NEON_TARGET
#  undef EMBER_NEON_SDOT
#  define EMBER_NEON_SDOT 0
#else
// GCC's arm_neon.h enables SDOT under "arch=armv8.2-a+dotprod"; a plain "+dotprod" is not
// a superset of that and fails to inline the intrinsic.
#  define EMBER_NEON_TARGET __attribute__((target("arch=armv8.2-a+dotprod")))
#endif
#include "cpu/kernels_neon.cpp"  // NOLINT(bugprone-suspicious-include)
#undef EMBER_NEON_PASS
#undef EMBER_NEON_NS
#undef EMBER_NEON_TARGET
#undef EMBER_NEON_SDOT

namespace ember {

bool neon_has_dotprod() {
#if defined(__ARM_FEATURE_DOTPROD)
    return true;
#elif defined(__linux__)
#  ifndef HWCAP_ASIMDDP
#    define HWCAP_ASIMDDP (1UL << 20)  // Linux uapi asm/hwcap.h, stable ABI
#  endif
    return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
#elif defined(__APPLE__)
    int v = 0;
    size_t len = sizeof(v);
    return sysctlbyname("hw.optional.arm.FEAT_DotProd", &v, &len, nullptr, 0) == 0 && v != 0;
#else
    return false;  // unknown OS: the plain NEON build runs everywhere
#endif
}

VecDotFn neon_vec_dot(DType weight, DType act, bool dotprod) {
    if (act == DType::F32) {
        switch (weight) {
            case DType::F32: return neon_common::vec_dot_f32;
            case DType::F16: return neon_common::vec_dot_f16;
            case DType::BF16: return neon_common::vec_dot_bf16;
            default: return nullptr;
        }
    }
    return dotprod ? neon_dotprod::integer_kernel(weight, act) : neon_plain::integer_kernel(weight, act);
}

GemmFn neon_gemm(DType weight, DType act, bool dotprod) {
    if (act == DType::F32) {
        switch (weight) {
            case DType::F32: return neon_common::gemm_float<neon_common::LoadF32>;
            case DType::F16: return neon_common::gemm_float<neon_common::LoadF16>;
            case DType::BF16: return neon_common::gemm_float<neon_common::LoadBF16>;
            default: return nullptr;
        }
    }
    return dotprod ? neon_dotprod::integer_gemm(weight, act) : neon_plain::integer_gemm(weight, act);
}

void register_neon_kernels(KernelTable& t) {
    // The scalar table decides each type's activation format and converter: a NEON entry is
    // only filled where a NEON kernel reads exactly that format.
    KernelTable ref{};
    register_scalar_kernels(ref);
    const bool dotprod = neon_has_dotprod();
    for (uint32_t i = 0; i < kDTypeCount; ++i) {
        if (!ref[i].vec_dot) continue;
        if (VecDotFn f = neon_vec_dot((DType)i, ref[i].act_type, dotprod))
            t[i] = {ref[i].act_type, ref[i].convert, f, neon_gemm((DType)i, ref[i].act_type, dotprod)};
    }
}

}  // namespace ember

#else  // not AArch64: no NEON kernels, every entry falls back to scalar

namespace ember {
void register_neon_kernels(KernelTable&) {}
}  // namespace ember

#endif  // __aarch64__

#else  // EMBER_NEON_PASS: the integer kernels, included twice from above

namespace ember {
namespace EMBER_NEON_NS {

// int32 lanes whose sum is acc's sum plus dot(a, b) over 16 int8 lanes. Plain NEON widens
// each product to int16 (|p| <= 128*128 fits) and pair-adds into int32, so no input can
// overflow; SDOT sums groups of four products directly.
EMBER_NEON_TARGET inline int32x4_t dot16(int32x4_t acc, int8x16_t a, int8x16_t b) {
#if EMBER_NEON_SDOT
    return vdotq_s32(acc, a, b);
#else
    acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(a), vget_low_s8(b)));
    return vpadalq_s16(acc, vmull_high_s8(a, b));
#endif
}

// dot of a 32-lane int8 weight block (two halves) with 32 int8 activations
EMBER_NEON_TARGET inline int32x4_t dot32(int8x16_t w0, int8x16_t w1, const int8_t* a) {
    return dot16(dot16(vdupq_n_s32(0), w0, vld1q_s8(a)), w1, vld1q_s8(a + 16));
}

// Q8_K's packed block leaves bsums 2-byte aligned at best; read it through bytes.
EMBER_NEON_TARGET inline int16x8_t load_bsums(const BlockQ8_K& y, int half) {
    const uint8_t* p = reinterpret_cast<const uint8_t*>(&y) + offsetof(BlockQ8_K, bsums);
    return vreinterpretq_s16_u8(vld1q_u8(p + 16 * half));
}

// -- legacy quants x Q8_0 / Q8_1 (one scale per 32) --
// Per block: d_w * d_a * isum (+ m_w * s_a for the offset types, s_a = d_a * sum(q_a) as
// stored by the Q8_1 converter). The int32 lane sums are exact in float (|x| < 2^24).

EMBER_NEON_TARGET void vec_dot_q4_0_q8_0(int64_t n, float* s, const void* wv, const void* av) {
    const BlockQ4_0* w = static_cast<const BlockQ4_0*>(wv);
    const BlockQ8_0* a = static_cast<const BlockQ8_0*>(av);
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
    const int8x16_t eight = vdupq_n_s8(8);
    float32x4_t acc0 = vdupq_n_f32(0), acc1 = acc0;
    const int64_t nb = n / QK;
    int64_t i = 0;
    // two blocks per step: independent accumulators keep both multiply chains busy
    for (; i + 2 <= nb; i += 2) {
        const uint8x16_t q0 = vld1q_u8(w[i].qs), q1 = vld1q_u8(w[i + 1].qs);
        const int32x4_t p0 = dot32(vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q0, m4)), eight),
                                   vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q0, 4)), eight), a[i].qs);
        const int32x4_t p1 = dot32(vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q1, m4)), eight),
                                   vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q1, 4)), eight), a[i + 1].qs);
        acc0 = vmlaq_n_f32(acc0, vcvtq_f32_s32(p0), fp16_to_fp32(w[i].d) * fp16_to_fp32(a[i].d));
        acc1 = vmlaq_n_f32(acc1, vcvtq_f32_s32(p1), fp16_to_fp32(w[i + 1].d) * fp16_to_fp32(a[i + 1].d));
    }
    for (; i < nb; ++i) {
        const uint8x16_t q = vld1q_u8(w[i].qs);
        const int32x4_t p = dot32(vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, m4)), eight),
                                  vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), eight), a[i].qs);
        acc0 = vmlaq_n_f32(acc0, vcvtq_f32_s32(p), fp16_to_fp32(w[i].d) * fp16_to_fp32(a[i].d));
    }
    *s = vaddvq_f32(vaddq_f32(acc0, acc1));
}

EMBER_NEON_TARGET void vec_dot_q4_1_q8_1(int64_t n, float* s, const void* wv, const void* av) {
    const BlockQ4_1* w = static_cast<const BlockQ4_1*>(wv);
    const BlockQ8_1* a = static_cast<const BlockQ8_1*>(av);
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
    float32x4_t acc = vdupq_n_f32(0);
    float summs = 0.0f;
    for (int64_t i = 0; i < n / QK; ++i) {
        const uint8x16_t q = vld1q_u8(w[i].qs);
        // nibbles 0..15 are valid int8 as they are
        const int32x4_t p = dot32(vreinterpretq_s8_u8(vandq_u8(q, m4)), vreinterpretq_s8_u8(vshrq_n_u8(q, 4)),
                                  a[i].qs);
        acc = vmlaq_n_f32(acc, vcvtq_f32_s32(p), fp16_to_fp32(w[i].d) * fp16_to_fp32(a[i].d));
        summs += fp16_to_fp32(w[i].m) * fp16_to_fp32(a[i].s);
    }
    *s = vaddvq_f32(acc) + summs;
}

EMBER_NEON_TARGET void vec_dot_q5_0_q8_0(int64_t n, float* s, const void* wv, const void* av) {
    const BlockQ5_0* w = static_cast<const BlockQ5_0*>(wv);
    const BlockQ8_0* a = static_cast<const BlockQ8_0*>(av);
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
    const int8x16_t sixteen = vdupq_n_s8(16);
    float32x4_t acc = vdupq_n_f32(0);
    for (int64_t i = 0; i < n / QK; ++i) {
        uint8x16_t hb_lo, hb_hi;
        neon_common::q5_high_bits(w[i].qh, &hb_lo, &hb_hi);
        const uint8x16_t q = vld1q_u8(w[i].qs);
        const int8x16_t lo = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(vandq_u8(q, m4), hb_lo)), sixteen);
        const int8x16_t hi = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(q, 4), hb_hi)), sixteen);
        acc = vmlaq_n_f32(acc, vcvtq_f32_s32(dot32(lo, hi, a[i].qs)),
                          fp16_to_fp32(w[i].d) * fp16_to_fp32(a[i].d));
    }
    *s = vaddvq_f32(acc);
}

EMBER_NEON_TARGET void vec_dot_q5_1_q8_1(int64_t n, float* s, const void* wv, const void* av) {
    const BlockQ5_1* w = static_cast<const BlockQ5_1*>(wv);
    const BlockQ8_1* a = static_cast<const BlockQ8_1*>(av);
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
    float32x4_t acc = vdupq_n_f32(0);
    float summs = 0.0f;
    for (int64_t i = 0; i < n / QK; ++i) {
        uint8x16_t hb_lo, hb_hi;
        neon_common::q5_high_bits(w[i].qh, &hb_lo, &hb_hi);
        const uint8x16_t q = vld1q_u8(w[i].qs);
        const int8x16_t lo = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(q, m4), hb_lo));
        const int8x16_t hi = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(q, 4), hb_hi));
        acc = vmlaq_n_f32(acc, vcvtq_f32_s32(dot32(lo, hi, a[i].qs)),
                          fp16_to_fp32(w[i].d) * fp16_to_fp32(a[i].d));
        summs += fp16_to_fp32(w[i].m) * fp16_to_fp32(a[i].s);
    }
    *s = vaddvq_f32(acc) + summs;
}

EMBER_NEON_TARGET void vec_dot_q8_0_q8_0(int64_t n, float* s, const void* wv, const void* av) {
    const BlockQ8_0* w = static_cast<const BlockQ8_0*>(wv);
    const BlockQ8_0* a = static_cast<const BlockQ8_0*>(av);
    float32x4_t acc0 = vdupq_n_f32(0), acc1 = acc0;
    const int64_t nb = n / QK;
    int64_t i = 0;
    for (; i + 2 <= nb; i += 2) {
        const int32x4_t p0 = dot32(vld1q_s8(w[i].qs), vld1q_s8(w[i].qs + 16), a[i].qs);
        const int32x4_t p1 = dot32(vld1q_s8(w[i + 1].qs), vld1q_s8(w[i + 1].qs + 16), a[i + 1].qs);
        acc0 = vmlaq_n_f32(acc0, vcvtq_f32_s32(p0), fp16_to_fp32(w[i].d) * fp16_to_fp32(a[i].d));
        acc1 = vmlaq_n_f32(acc1, vcvtq_f32_s32(p1), fp16_to_fp32(w[i + 1].d) * fp16_to_fp32(a[i + 1].d));
    }
    for (; i < nb; ++i) {
        const int32x4_t p = dot32(vld1q_s8(w[i].qs), vld1q_s8(w[i].qs + 16), a[i].qs);
        acc0 = vmlaq_n_f32(acc0, vcvtq_f32_s32(p), fp16_to_fp32(w[i].d) * fp16_to_fp32(a[i].d));
    }
    *s = vaddvq_f32(vaddq_f32(acc0, acc1));
}

// -- K-quants x Q8_K (super-blocks of 256, float scale d, bsums = sums of 16 activations) --
// The weight offsets (mins, or the constant -32/-4 of the signed types) are applied through
// bsums or folded into the int8 weights; sub-block scales multiply int32 lane sums, and one
// horizontal add per super-block gives the integer total. All partial sums stay far below
// 2^31 (worst case Q5_K: 8 * 63 * 32 * 31 * 128 < 2^27).

EMBER_NEON_TARGET void vec_dot_q2_k_q8_k(int64_t n, float* s, const void* wv, const void* av) {
    const BlockQ2_K* w = static_cast<const BlockQ2_K*>(wv);
    const BlockQ8_K* a = static_cast<const BlockQ8_K*>(av);
    const uint8x16_t m3 = vdupq_n_u8(3);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; ++i) {
        const float dall = a[i].d * fp16_to_fp32(w[i].d);
        const float dmin = a[i].d * fp16_to_fp32(w[i].dmin);
        // mins (high nibble of each sub-block scale) against the activation sums
        const uint8x16_t sc = vld1q_u8(w[i].scales);
        const int16x8_t mn = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(vshrq_n_u8(sc, 4))));
        const int16x8_t mx = vreinterpretq_s16_u16(vmovl_high_u8(vshrq_n_u8(sc, 4)));
        const int16x8_t b0 = load_bsums(a[i], 0), b1 = load_bsums(a[i], 1);
        int32x4_t m = vmull_s16(vget_low_s16(mn), vget_low_s16(b0));
        m = vmlal_high_s16(m, mn, b0);
        m = vmlal_s16(m, vget_low_s16(mx), vget_low_s16(b1));
        m = vmlal_high_s16(m, mx, b1);
        const int32_t summs = vaddvq_s32(m);

        int32x4_t isum = vdupq_n_s32(0);
        const int8_t* q8 = a[i].qs;
        for (int c = 0; c < 2; ++c) {  // element c*128 + j*32 + l is bits 2j of qs[c*32 + l]
            uint8x16_t q0 = vld1q_u8(w[i].qs + c * 32), q1 = vld1q_u8(w[i].qs + c * 32 + 16);
            for (int j = 0; j < 4; ++j, q8 += 32) {
                const int g = c * 8 + j * 2;  // scale index of elements 0..15 of this run
                const int32x4_t p0 = dot16(vdupq_n_s32(0), vreinterpretq_s8_u8(vandq_u8(q0, m3)), vld1q_s8(q8));
                const int32x4_t p1 =
                    dot16(vdupq_n_s32(0), vreinterpretq_s8_u8(vandq_u8(q1, m3)), vld1q_s8(q8 + 16));
                isum = vmlaq_n_s32(isum, p0, w[i].scales[g] & 0x0f);
                isum = vmlaq_n_s32(isum, p1, w[i].scales[g + 1] & 0x0f);
                q0 = vshrq_n_u8(q0, 2);
                q1 = vshrq_n_u8(q1, 2);
            }
        }
        sum += dall * (float)vaddvq_s32(isum) - dmin * (float)summs;
    }
    *s = sum;
}

EMBER_NEON_TARGET void vec_dot_q3_k_q8_k(int64_t n, float* s, const void* wv, const void* av) {
    const BlockQ3_K* w = static_cast<const BlockQ3_K*>(wv);
    const BlockQ8_K* a = static_cast<const BlockQ8_K*>(av);
    const uint8x16_t m3 = vdupq_n_u8(3), four_u = vdupq_n_u8(4);
    const int8x16_t four = vdupq_n_s8(4);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; ++i) {
        const float d = a[i].d * fp16_to_fp32(w[i].d);
        // 16 signed 6-bit scales: low 4 bits in scales[0..7], high 2 bits in scales[8..11]
        const uint8_t* sp = w[i].scales;
        int32_t scales[16];
        for (int k = 0; k < 16; ++k) {
            const int lo = (sp[k % 8] >> (4 * (k / 8))) & 0x0f;
            const int hi = (sp[8 + k % 4] >> (2 * (k / 4))) & 0x03;
            scales[k] = (lo | (hi << 4)) - 32;
        }
        const uint8x16_t hm0 = vld1q_u8(w[i].hmask), hm1 = vld1q_u8(w[i].hmask + 16);
        int32x4_t isum = vdupq_n_s32(0);
        const int8_t* q8 = a[i].qs;
        for (int c = 0; c < 2; ++c) {
            uint8x16_t q0 = vld1q_u8(w[i].qs + c * 32), q1 = vld1q_u8(w[i].qs + c * 32 + 16);
            for (int j = 0; j < 4; ++j, q8 += 32) {
                // a clear hmask bit means -4: OR in 4 where the bit is set, then subtract 4
                const uint8x16_t bit = vdupq_n_u8((uint8_t)(1u << (c * 4 + j)));
                const int8x16_t w0 = vsubq_s8(
                    vreinterpretq_s8_u8(vorrq_u8(vandq_u8(q0, m3), vandq_u8(vtstq_u8(hm0, bit), four_u))), four);
                const int8x16_t w1 = vsubq_s8(
                    vreinterpretq_s8_u8(vorrq_u8(vandq_u8(q1, m3), vandq_u8(vtstq_u8(hm1, bit), four_u))), four);
                const int g = c * 8 + j * 2;
                isum = vmlaq_n_s32(isum, dot16(vdupq_n_s32(0), w0, vld1q_s8(q8)), scales[g]);
                isum = vmlaq_n_s32(isum, dot16(vdupq_n_s32(0), w1, vld1q_s8(q8 + 16)), scales[g + 1]);
                q0 = vshrq_n_u8(q0, 2);
                q1 = vshrq_n_u8(q1, 2);
            }
        }
        sum += d * (float)vaddvq_s32(isum);
    }
    *s = sum;
}

// 6-bit scale and min of sub-block j (0..7) of Q4_K/Q5_K
inline void k_scale_min(const uint8_t* s, int j, int32_t* sc, int32_t* m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
        *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

EMBER_NEON_TARGET void vec_dot_q4_k_q8_k(int64_t n, float* s, const void* wv, const void* av) {
    const BlockQ4_K* w = static_cast<const BlockQ4_K*>(wv);
    const BlockQ8_K* a = static_cast<const BlockQ8_K*>(av);
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; ++i) {
        const float d = a[i].d * fp16_to_fp32(w[i].d);
        const float dmin = a[i].d * fp16_to_fp32(w[i].dmin);
        int32_t sc[8], mn[8];
        for (int j = 0; j < 8; ++j) k_scale_min(w[i].scales, j, &sc[j], &mn[j]);
        // each min covers 32 activations = two bsums
        const int16x8_t b0 = load_bsums(a[i], 0), b1 = load_bsums(a[i], 1);
        const int32x4_t bs0 = vpaddlq_s16(b0), bs1 = vpaddlq_s16(b1);  // per-32 sums
        const int32x4_t summs = vaddq_s32(vmulq_s32(bs0, vld1q_s32(mn)), vmulq_s32(bs1, vld1q_s32(mn + 4)));

        int32x4_t isum = vdupq_n_s32(0);
        for (int c = 0; c < 4; ++c) {  // 32 bytes = sub-blocks 2c (low nibbles) and 2c+1 (high)
            const uint8x16_t q0 = vld1q_u8(w[i].qs + c * 32), q1 = vld1q_u8(w[i].qs + c * 32 + 16);
            const int8_t* q8 = a[i].qs + c * 64;
            const int32x4_t plo = dot32(vreinterpretq_s8_u8(vandq_u8(q0, m4)), vreinterpretq_s8_u8(vandq_u8(q1, m4)), q8);
            const int32x4_t phi =
                dot32(vreinterpretq_s8_u8(vshrq_n_u8(q0, 4)), vreinterpretq_s8_u8(vshrq_n_u8(q1, 4)), q8 + 32);
            isum = vmlaq_n_s32(isum, plo, sc[2 * c]);
            isum = vmlaq_n_s32(isum, phi, sc[2 * c + 1]);
        }
        sum += d * (float)vaddvq_s32(isum) - dmin * (float)vaddvq_s32(summs);
    }
    *s = sum;
}

EMBER_NEON_TARGET void vec_dot_q5_k_q8_k(int64_t n, float* s, const void* wv, const void* av) {
    const BlockQ5_K* w = static_cast<const BlockQ5_K*>(wv);
    const BlockQ8_K* a = static_cast<const BlockQ8_K*>(av);
    const uint8x16_t m4 = vdupq_n_u8(0x0f), ten = vdupq_n_u8(0x10);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; ++i) {
        const float d = a[i].d * fp16_to_fp32(w[i].d);
        const float dmin = a[i].d * fp16_to_fp32(w[i].dmin);
        int32_t sc[8], mn[8];
        for (int j = 0; j < 8; ++j) k_scale_min(w[i].scales, j, &sc[j], &mn[j]);
        const int32x4_t bs0 = vpaddlq_s16(load_bsums(a[i], 0)), bs1 = vpaddlq_s16(load_bsums(a[i], 1));
        const int32x4_t summs = vaddq_s32(vmulq_s32(bs0, vld1q_s32(mn)), vmulq_s32(bs1, vld1q_s32(mn + 4)));

        // the fifth bit of element g*32 + l is bit g of qh[l]
        const uint8x16_t h0 = vld1q_u8(w[i].qh), h1 = vld1q_u8(w[i].qh + 16);
        int32x4_t isum = vdupq_n_s32(0);
        for (int c = 0; c < 4; ++c) {
            const uint8x16_t q0 = vld1q_u8(w[i].qs + c * 32), q1 = vld1q_u8(w[i].qs + c * 32 + 16);
            const uint8x16_t blo = vdupq_n_u8((uint8_t)(1u << (2 * c))), bhi = vdupq_n_u8((uint8_t)(2u << (2 * c)));
            const int8x16_t l0 = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(q0, m4), vandq_u8(vtstq_u8(h0, blo), ten)));
            const int8x16_t l1 = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(q1, m4), vandq_u8(vtstq_u8(h1, blo), ten)));
            const int8x16_t u0 = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(q0, 4), vandq_u8(vtstq_u8(h0, bhi), ten)));
            const int8x16_t u1 = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(q1, 4), vandq_u8(vtstq_u8(h1, bhi), ten)));
            const int8_t* q8 = a[i].qs + c * 64;
            isum = vmlaq_n_s32(isum, dot32(l0, l1, q8), sc[2 * c]);
            isum = vmlaq_n_s32(isum, dot32(u0, u1, q8 + 32), sc[2 * c + 1]);
        }
        sum += d * (float)vaddvq_s32(isum) - dmin * (float)vaddvq_s32(summs);
    }
    *s = sum;
}

EMBER_NEON_TARGET void vec_dot_q6_k_q8_k(int64_t n, float* s, const void* wv, const void* av) {
    const BlockQ6_K* w = static_cast<const BlockQ6_K*>(wv);
    const BlockQ8_K* a = static_cast<const BlockQ8_K*>(av);
    const uint8x16_t m4 = vdupq_n_u8(0x0f), m3 = vdupq_n_u8(3);
    const int8x16_t off = vdupq_n_s8(32);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; ++i) {
        const float d = a[i].d * fp16_to_fp32(w[i].d);
        const int8_t* sc = w[i].scales;
        int32x4_t isum = vdupq_n_s32(0);
        for (int c = 0; c < 2; ++c) {
            // element c*128 + k*32 + l: low 4 bits from ql[c*64 + (k%2)*32 + l] (nibble k/2),
            // high 2 bits from qh[c*32 + l] (bits 2k)
            const uint8_t* ql = w[i].ql + c * 64;
            const uint8_t* qh = w[i].qh + c * 32;
            const uint8x16_t la0 = vld1q_u8(ql), la1 = vld1q_u8(ql + 16);
            const uint8x16_t lb0 = vld1q_u8(ql + 32), lb1 = vld1q_u8(ql + 48);
            uint8x16_t h0 = vld1q_u8(qh), h1 = vld1q_u8(qh + 16);
            const uint8x16_t lo[4][2] = {{vandq_u8(la0, m4), vandq_u8(la1, m4)},
                                         {vandq_u8(lb0, m4), vandq_u8(lb1, m4)},
                                         {vshrq_n_u8(la0, 4), vshrq_n_u8(la1, 4)},
                                         {vshrq_n_u8(lb0, 4), vshrq_n_u8(lb1, 4)}};
            const int8_t* q8 = a[i].qs + c * 128;
            for (int k = 0; k < 4; ++k, q8 += 32) {
                const int8x16_t w0 =
                    vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(lo[k][0], vshlq_n_u8(vandq_u8(h0, m3), 4))), off);
                const int8x16_t w1 =
                    vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(lo[k][1], vshlq_n_u8(vandq_u8(h1, m3), 4))), off);
                const int g = c * 8 + k * 2;
                isum = vmlaq_n_s32(isum, dot16(vdupq_n_s32(0), w0, vld1q_s8(q8)), sc[g]);
                isum = vmlaq_n_s32(isum, dot16(vdupq_n_s32(0), w1, vld1q_s8(q8 + 16)), sc[g + 1]);
                h0 = vshrq_n_u8(h0, 2);
                h1 = vshrq_n_u8(h1, 2);
            }
        }
        sum += d * (float)vaddvq_s32(isum);
    }
    *s = sum;
}

// -- tiles of legacy-quant dot products (prefill) --
// Block decoders: the 32 weights of a block as two int8x16 halves (elements 0..15 from the
// low nibbles, 16..31 from the high ones), plus the block's min for the offset types.
struct DecQ4_0 {
    using Block = BlockQ4_0;
    using Act = BlockQ8_0;
    static constexpr bool kMin = false;
    static void dec(const Block& b, int8x16_t* lo, int8x16_t* hi) {
        const uint8x16_t q = vld1q_u8(b.qs);
        *lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(0x0f))), vdupq_n_s8(8));
        *hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), vdupq_n_s8(8));
    }
};
struct DecQ5_0 {
    using Block = BlockQ5_0;
    using Act = BlockQ8_0;
    static constexpr bool kMin = false;
    static void dec(const Block& b, int8x16_t* lo, int8x16_t* hi) {
        uint8x16_t hb_lo, hb_hi;
        neon_common::q5_high_bits(b.qh, &hb_lo, &hb_hi);
        const uint8x16_t q = vld1q_u8(b.qs);
        *lo = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(vandq_u8(q, vdupq_n_u8(0x0f)), hb_lo)), vdupq_n_s8(16));
        *hi = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(q, 4), hb_hi)), vdupq_n_s8(16));
    }
};
struct DecQ8_0 {
    using Block = BlockQ8_0;
    using Act = BlockQ8_0;
    static constexpr bool kMin = false;
    static void dec(const Block& b, int8x16_t* lo, int8x16_t* hi) {
        *lo = vld1q_s8(b.qs);
        *hi = vld1q_s8(b.qs + 16);
    }
};
struct DecQ4_1 {
    using Block = BlockQ4_1;
    using Act = BlockQ8_1;
    static constexpr bool kMin = true;
    static void dec(const Block& b, int8x16_t* lo, int8x16_t* hi) {
        const uint8x16_t q = vld1q_u8(b.qs);
        *lo = vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(0x0f)));
        *hi = vreinterpretq_s8_u8(vshrq_n_u8(q, 4));
    }
};
struct DecQ5_1 {
    using Block = BlockQ5_1;
    using Act = BlockQ8_1;
    static constexpr bool kMin = true;
    static void dec(const Block& b, int8x16_t* lo, int8x16_t* hi) {
        uint8x16_t hb_lo, hb_hi;
        neon_common::q5_high_bits(b.qh, &hb_lo, &hb_hi);
        const uint8x16_t q = vld1q_u8(b.qs);
        *lo = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(q, vdupq_n_u8(0x0f)), hb_lo));
        *hi = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(q, 4), hb_hi));
    }
};

// The 4-bit table types: the nibbles as indices into the 16 int8 values (one TBL per half)
template <const int8_t (&kValues)[16]>
inline void table_dec(const uint8_t* qs, int8x16_t* lo, int8x16_t* hi) {
    const int8x16_t t = vld1q_s8(kValues);
    const uint8x16_t q = vld1q_u8(qs);
    *lo = vqtbl1q_s8(t, vandq_u8(q, vdupq_n_u8(0x0f)));
    *hi = vqtbl1q_s8(t, vshrq_n_u8(q, 4));
}
struct DecMXFP4 {
    using Block = BlockMXFP4;
    using Act = BlockQ8_0;
    static constexpr bool kMin = false;
    static void dec(const Block& b, int8x16_t* lo, int8x16_t* hi) { table_dec<kValuesMXFP4>(b.qs, lo, hi); }
};
struct DecIQ4_NL {
    using Block = BlockIQ4_NL;
    using Act = BlockQ8_0;
    static constexpr bool kMin = false;
    static void dec(const Block& b, int8x16_t* lo, int8x16_t* hi) { table_dec<kValuesIQ4NL>(b.qs, lo, hi); }
};

// a block's weight scale: its f16 d, or MXFP4's E8M0 half scale
template <typename B>
inline float block_scale(const B& b) { return fp16_to_fp32(b.d); }
inline float block_scale(const BlockMXFP4& b) { return e8m0_to_fp32_half(b.e); }

template <typename D>
inline float block_min(const typename D::Block& b) {
    if constexpr (D::kMin) return fp16_to_fp32(b.m);
    return 0.0f;
}
template <typename D>
inline float act_sum(const typename D::Act& a) {
    if constexpr (D::kMin) return fp16_to_fp32(a.s);
    return 0.0f;
}

// nr weight rows x nc columns: each weight block is decoded once per four columns (the
// vec_dot kernels decode it once per column); per column the arithmetic is vec_dot's.
template <typename D, int kCols>
EMBER_NEON_TARGET void gemm_cols(int64_t nb, const typename D::Block* w, const typename D::Act* const* a,
                                 float* out) {
    float32x4_t acc[kCols];
    float summs[kCols];
    for (int j = 0; j < kCols; ++j) {
        acc[j] = vdupq_n_f32(0);
        summs[j] = 0.0f;
    }
    for (int64_t i = 0; i < nb; ++i) {
        int8x16_t lo, hi;
        D::dec(w[i], &lo, &hi);
        const float dw = block_scale(w[i]), mw = block_min<D>(w[i]);
        for (int j = 0; j < kCols; ++j) {
            const int32x4_t p = dot32(lo, hi, a[j][i].qs);
            acc[j] = vmlaq_n_f32(acc[j], vcvtq_f32_s32(p), dw * fp16_to_fp32(a[j][i].d));
            if constexpr (D::kMin) summs[j] += mw * act_sum<D>(a[j][i]);
        }
    }
    for (int j = 0; j < kCols; ++j) out[j] = vaddvq_f32(acc[j]) + summs[j];
}

template <typename D>
EMBER_NEON_TARGET void gemm_legacy(int64_t n, int nr, int nc, const void* w, size_t ws, const void* a,
                                   size_t as, float* s, size_t lds) {
    const uint8_t* wb = static_cast<const uint8_t*>(w);
    const uint8_t* ab = static_cast<const uint8_t*>(a);
    const int64_t nb = n / QK;
    for (int r = 0; r < nr; ++r) {
        const typename D::Block* wr = reinterpret_cast<const typename D::Block*>(wb + (size_t)r * ws);
        const typename D::Act* cols[4];
        float out[4];
        int c = 0;
        for (; c + 4 <= nc; c += 4) {
            for (int j = 0; j < 4; ++j) cols[j] = reinterpret_cast<const typename D::Act*>(ab + (size_t)(c + j) * as);
            gemm_cols<D, 4>(nb, wr, cols, out);
            for (int j = 0; j < 4; ++j) s[(size_t)(c + j) * lds + (size_t)r] = out[j];
        }
        for (; c < nc; ++c) {
            cols[0] = reinterpret_cast<const typename D::Act*>(ab + (size_t)c * as);
            gemm_cols<D, 1>(nb, wr, cols, out);
            s[(size_t)c * lds + (size_t)r] = out[0];
        }
    }
}

// IQ4_XS x Q8_K: the IQ4_NL table per 32-group, one integer per super-block (as the
// K-quants: each group's int32 lanes times its scale, -32..31)
EMBER_NEON_TARGET void vec_dot_iq4_xs_q8_k(int64_t n, float* s, const void* wv, const void* av) {
    const BlockIQ4_XS* w = static_cast<const BlockIQ4_XS*>(wv);
    const BlockQ8_K* a = static_cast<const BlockQ8_K*>(av);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; ++i) {
        int32x4_t isum = vdupq_n_s32(0);
        for (int g = 0; g < 8; ++g) {
            int8x16_t lo, hi;
            table_dec<kValuesIQ4NL>(w[i].qs + 16 * g, &lo, &hi);
            isum = vmlaq_n_s32(isum, dot32(lo, hi, a[i].qs + 32 * g), iq4_xs_scale(w[i], g));
        }
        sum += a[i].d * fp16_to_fp32(w[i].d) * (float)vaddvq_s32(isum);
    }
    *s = sum;
}

// one column of gemm_cols: the table types' dot product (the same operations as their tiles)
template <typename D>
EMBER_NEON_TARGET void vec_dot_cols(int64_t n, float* s, const void* wv, const void* av) {
    const typename D::Act* cols[1] = {static_cast<const typename D::Act*>(av)};
    gemm_cols<D, 1>(n / QK, static_cast<const typename D::Block*>(wv), cols, s);
}

GemmFn integer_gemm(DType weight, DType act) {
    if (act == DType::Q8_0) {
        if (weight == DType::Q4_0) return gemm_legacy<DecQ4_0>;
        if (weight == DType::Q5_0) return gemm_legacy<DecQ5_0>;
        if (weight == DType::Q8_0) return gemm_legacy<DecQ8_0>;
        if (weight == DType::MXFP4) return gemm_legacy<DecMXFP4>;
        if (weight == DType::IQ4_NL) return gemm_legacy<DecIQ4_NL>;
    } else if (act == DType::Q8_1) {
        if (weight == DType::Q4_1) return gemm_legacy<DecQ4_1>;
        if (weight == DType::Q5_1) return gemm_legacy<DecQ5_1>;
    }
    return nullptr;  // K-quants: mul_mat loops vec_dot
}

VecDotFn integer_kernel(DType weight, DType act) {
    if (act == DType::Q8_0) {
        if (weight == DType::Q4_0) return vec_dot_q4_0_q8_0;
        if (weight == DType::Q5_0) return vec_dot_q5_0_q8_0;
        if (weight == DType::Q8_0) return vec_dot_q8_0_q8_0;
        if (weight == DType::MXFP4) return vec_dot_cols<DecMXFP4>;
        if (weight == DType::IQ4_NL) return vec_dot_cols<DecIQ4_NL>;
    } else if (act == DType::Q8_1) {
        if (weight == DType::Q4_1) return vec_dot_q4_1_q8_1;
        if (weight == DType::Q5_1) return vec_dot_q5_1_q8_1;
    } else if (act == DType::Q8_K) {
        switch (weight) {
            case DType::Q2_K: return vec_dot_q2_k_q8_k;
            case DType::Q3_K: return vec_dot_q3_k_q8_k;
            case DType::Q4_K: return vec_dot_q4_k_q8_k;
            case DType::Q5_K: return vec_dot_q5_k_q8_k;
            case DType::Q6_K: return vec_dot_q6_k_q8_k;
            case DType::IQ4_XS: return vec_dot_iq4_xs_q8_k;
            default: break;
        }
    }
    return nullptr;
}

}  // namespace EMBER_NEON_NS
}  // namespace ember

#endif  // EMBER_NEON_PASS
