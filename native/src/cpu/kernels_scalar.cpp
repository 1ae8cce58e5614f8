// Scalar reference kernels: the definition every SIMD level is tested against.
//
// Float weights (F32/F16/BF16) take F32 activations. Quantized weights take 8-bit
// activations and do the block dot products in exact integer arithmetic, so a SIMD
// kernel must produce the same integer per block and may only differ in the order of
// the float accumulation:
//   Q4_0, Q5_0, Q8_0  x Q8_0  (32-blocks, fp16 scale)
//   Q4_1, Q5_1        x Q8_1  (32-blocks, fp16 scale and fp16 d*sum for the min term)
//   Q2_K..Q6_K        x Q8_K  (256-blocks, f32 scale, int16 sums of each 16)
//   MXFP4, IQ4_NL     x Q8_0  (32-blocks of 4-bit codes into a table of int8 values;
//                              MXFP4's scale a power of two, E8M0)
//   IQ4_XS            x Q8_K  (256-blocks, the IQ4_NL table, eight 6-bit group scales)
// The activation converters round to nearest even (as the SIMD converters do) and
// are bit-exact across levels.
#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "cpu/kernels.h"
#include "cpu/kernels_ref.h"
#include "quant/types.h"

namespace ember {

// ---- activation converters ----------------------------------------------------

void convert_row_f16_ref(const float* x, void* y, int64_t n) {
    uint16_t* h = static_cast<uint16_t*>(y);
    for (int64_t i = 0; i < n; ++i) h[i] = fp32_to_fp16(x[i]);
}

void quantize_row_q8_0_ref(const float* x, void* y, int64_t n) {
    BlockQ8_0* b = static_cast<BlockQ8_0*>(y);
    for (int64_t i = 0; i < n / QK; ++i, x += QK) {
        float amax = 0.0f;
        for (int j = 0; j < QK; ++j) amax = std::fmax(amax, std::fabs(x[j]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = fp32_to_fp16(d);
        for (int j = 0; j < QK; ++j) b[i].qs[j] = (int8_t)std::nearbyint(x[j] * id);
    }
}

void quantize_row_q8_1_ref(const float* x, void* y, int64_t n) {
    BlockQ8_1* b = static_cast<BlockQ8_1*>(y);
    for (int64_t i = 0; i < n / QK; ++i, x += QK) {
        float amax = 0.0f;
        for (int j = 0; j < QK; ++j) amax = std::fmax(amax, std::fabs(x[j]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = fp32_to_fp16(d);
        int sum = 0;
        for (int j = 0; j < QK; ++j) {
            b[i].qs[j] = (int8_t)std::nearbyint(x[j] * id);
            sum += b[i].qs[j];
        }
        // the min term of Q4_1/Q5_1 needs d * sum(q): of the quantized values, so the
        // dot stays consistent with the integer part
        b[i].s = fp32_to_fp16(d * (float)sum);
    }
}

void quantize_row_q8_k_ref(const float* x, void* y, int64_t n) {
    BlockQ8_K* b = static_cast<BlockQ8_K*>(y);
    for (int64_t i = 0; i < n / QK_K; ++i, x += QK_K) {
        float amax = 0.0f;
        for (int j = 0; j < QK_K; ++j) amax = std::fmax(amax, std::fabs(x[j]));
        // +-127 (not -128): keeps |q| <= 127 so u8*s8 pair sums cannot saturate int16
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = d;
        for (int j = 0; j < QK_K; ++j) b[i].qs[j] = (int8_t)std::nearbyint(x[j] * id);
        for (int g = 0; g < QK_K / 16; ++g) {
            int s = 0;
            for (int j = 0; j < 16; ++j) s += b[i].qs[g * 16 + j];
            b[i].bsums[g] = (int16_t)s;
        }
    }
}

// ---- integer unpacking of weight blocks (shared with the tests) --------------

void unpack_q4_0(const void* blk, int8_t q[32]) {
    const BlockQ4_0* b = static_cast<const BlockQ4_0*>(blk);
    for (int j = 0; j < 16; ++j) {
        q[j] = (int8_t)((b->qs[j] & 0x0f) - 8);
        q[j + 16] = (int8_t)((b->qs[j] >> 4) - 8);
    }
}
void unpack_q4_1(const void* blk, int8_t q[32]) {
    const BlockQ4_1* b = static_cast<const BlockQ4_1*>(blk);
    for (int j = 0; j < 16; ++j) {
        q[j] = (int8_t)(b->qs[j] & 0x0f);
        q[j + 16] = (int8_t)(b->qs[j] >> 4);
    }
}
void unpack_q5_0(const void* blk, int8_t q[32]) {
    const BlockQ5_0* b = static_cast<const BlockQ5_0*>(blk);
    uint32_t qh;
    std::memcpy(&qh, b->qh, 4);
    for (int j = 0; j < 16; ++j) {
        q[j] = (int8_t)(((b->qs[j] & 0x0f) | (((qh >> j) & 1u) << 4)) - 16);
        q[j + 16] = (int8_t)(((b->qs[j] >> 4) | (((qh >> (j + 16)) & 1u) << 4)) - 16);
    }
}
void unpack_q5_1(const void* blk, int8_t q[32]) {
    const BlockQ5_1* b = static_cast<const BlockQ5_1*>(blk);
    uint32_t qh;
    std::memcpy(&qh, b->qh, 4);
    for (int j = 0; j < 16; ++j) {
        q[j] = (int8_t)((b->qs[j] & 0x0f) | (((qh >> j) & 1u) << 4));
        q[j + 16] = (int8_t)((b->qs[j] >> 4) | (((qh >> (j + 16)) & 1u) << 4));
    }
}

void unpack_mxfp4(const void* blk, int8_t q[32]) {
    const BlockMXFP4* b = static_cast<const BlockMXFP4*>(blk);
    for (int j = 0; j < 16; ++j) {
        q[j] = kValuesMXFP4[b->qs[j] & 0x0f];
        q[j + 16] = kValuesMXFP4[b->qs[j] >> 4];
    }
}
void unpack_iq4_nl(const void* blk, int8_t q[32]) {
    const BlockIQ4_NL* b = static_cast<const BlockIQ4_NL*>(blk);
    for (int j = 0; j < 16; ++j) {
        q[j] = kValuesIQ4NL[b->qs[j] & 0x0f];
        q[j + 16] = kValuesIQ4NL[b->qs[j] >> 4];
    }
}
void unpack_iq4_xs(const void* blk, int8_t q[256], int sc[8]) {
    const BlockIQ4_XS* b = static_cast<const BlockIQ4_XS*>(blk);
    for (int g = 0; g < 8; ++g) {
        sc[g] = iq4_xs_scale(*b, g);
        for (int j = 0; j < 16; ++j) {
            q[32 * g + j] = kValuesIQ4NL[b->qs[16 * g + j] & 0x0f];
            q[32 * g + j + 16] = kValuesIQ4NL[b->qs[16 * g + j] >> 4];
        }
    }
}

// K-quants: the 256 integer values and the integer scale (and min) of each group
// (16 groups of 16 for Q2_K/Q3_K/Q6_K, 8 groups of 32 for Q4_K/Q5_K), such that
// w[e] = d * sc[g] * q[e] - dmin * mn[g].
void unpack_q2_k(const void* blk, int8_t q[256], int sc[16], int mn[16]) {
    const BlockQ2_K* b = static_cast<const BlockQ2_K*>(blk);
    for (int e = 0; e < QK_K; ++e) {
        const int c = e / 128, s = (e / 32) % 4, l = e % 32;
        q[e] = (int8_t)((b->qs[c * 32 + l] >> (2 * s)) & 3);
    }
    for (int g = 0; g < 16; ++g) {
        sc[g] = b->scales[g] & 0x0f;
        mn[g] = b->scales[g] >> 4;
    }
}
void unpack_q3_k(const void* blk, int8_t q[256], int sc[16]) {
    const BlockQ3_K* b = static_cast<const BlockQ3_K*>(blk);
    for (int k = 0; k < 16; ++k) {
        const int lo = (b->scales[k % 8] >> (4 * (k / 8))) & 0x0f;
        const int hi = (b->scales[8 + k % 4] >> (2 * (k / 4))) & 0x03;
        sc[k] = (lo | (hi << 4)) - 32;
    }
    for (int e = 0; e < QK_K; ++e) {
        const int c = e / 128, s = (e / 32) % 4, l = e % 32;
        const int ql = (b->qs[c * 32 + l] >> (2 * s)) & 3;
        const int hbit = (b->hmask[l] >> (e / 32)) & 1;
        q[e] = (int8_t)(ql - (hbit ? 0 : 4));
    }
}
void k_scale_min_ref(const uint8_t* s, int j, int* sc, int* m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
        *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}
void unpack_q4_k(const void* blk, int8_t q[256], int sc[8], int mn[8]) {
    const BlockQ4_K* b = static_cast<const BlockQ4_K*>(blk);
    for (int g = 0; g < 8; ++g) {
        k_scale_min_ref(b->scales, g, &sc[g], &mn[g]);
        const uint8_t* qs = b->qs + (g / 2) * 32;
        const int shift = 4 * (g % 2);
        for (int l = 0; l < 32; ++l) q[g * 32 + l] = (int8_t)((qs[l] >> shift) & 0x0f);
    }
}
void unpack_q5_k(const void* blk, int8_t q[256], int sc[8], int mn[8]) {
    const BlockQ5_K* b = static_cast<const BlockQ5_K*>(blk);
    for (int g = 0; g < 8; ++g) {
        k_scale_min_ref(b->scales, g, &sc[g], &mn[g]);
        const uint8_t* qs = b->qs + (g / 2) * 32;
        const int shift = 4 * (g % 2);
        for (int l = 0; l < 32; ++l)
            q[g * 32 + l] = (int8_t)(((qs[l] >> shift) & 0x0f) | (((b->qh[l] >> g) & 1) << 4));
    }
}
void unpack_q6_k(const void* blk, int8_t q[256], int sc[16]) {
    const BlockQ6_K* b = static_cast<const BlockQ6_K*>(blk);
    for (int e = 0; e < QK_K; ++e) {
        const int c = e / 128, k = (e / 32) % 4, l = e % 32;
        const int lo = (b->ql[c * 64 + (k % 2) * 32 + l] >> (4 * (k / 2))) & 0x0f;
        const int hi = (b->qh[c * 32 + l] >> (2 * k)) & 0x03;
        q[e] = (int8_t)((lo | (hi << 4)) - 32);
    }
    for (int g = 0; g < 16; ++g) sc[g] = b->scales[g];
}

namespace {

// ---- float weights --------------------------------------------------------------

void vec_dot_f32(int64_t n, float* s, const void* w, const void* a) {
    *s = dot_f32(static_cast<const float*>(w), static_cast<const float*>(a), n);
}

// One element as float: weights and activations of the 16-bit formats.
inline float elem_f16(const void* p, int64_t i) { return fp16_to_fp32(static_cast<const uint16_t*>(p)[i]); }
inline float elem_bf16(const void* p, int64_t i) { return bf16_to_fp32(static_cast<const uint16_t*>(p)[i]); }
inline float elem_f32(const void* p, int64_t i) { return static_cast<const float*>(p)[i]; }

// Eight interleaved partial sums folded in a fixed tree, like dot_f32.
template <float (*W)(const void*, int64_t), float (*A)(const void*, int64_t)>
void vec_dot_16(int64_t n, float* s, const void* w, const void* a) {
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; ++j) acc[j] += W(w, i + j) * A(a, i + j);
    float r = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for (; i < n; ++i) r += W(w, i) * A(a, i);
    *s = r;
}

// ---- legacy 32-blocks -------------------------------------------------------------

inline int dot32(const int8_t* q, const int8_t* a) {
    int s = 0;
    for (int j = 0; j < QK; ++j) s += q[j] * a[j];
    return s;
}

// symmetric weights (w = d * q) x Q8_0
template <typename Block, void (*Unpack)(const void*, int8_t*)>
void vec_dot_sym(int64_t n, float* s, const void* w, const void* a) {
    const Block* x = static_cast<const Block*>(w);
    const BlockQ8_0* y = static_cast<const BlockQ8_0*>(a);
    float sum = 0.0f;
    int8_t q[QK];
    for (int64_t i = 0; i < n / QK; ++i) {
        Unpack(&x[i], q);
        sum += fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d) * (float)dot32(q, y[i].qs);
    }
    *s = sum;
}

// MXFP4 x Q8_0: vec_dot_sym with the E8M0 half scale for the weights' f16 d (a power of
// two, so the product of the two scales is exact in either order)
void vec_dot_mxfp4(int64_t n, float* s, const void* w, const void* a) {
    const BlockMXFP4* x = static_cast<const BlockMXFP4*>(w);
    const BlockQ8_0* y = static_cast<const BlockQ8_0*>(a);
    float sum = 0.0f;
    int8_t q[QK];
    for (int64_t i = 0; i < n / QK; ++i) {
        unpack_mxfp4(&x[i], q);
        sum += e8m0_to_fp32_half(x[i].e) * fp16_to_fp32(y[i].d) * (float)dot32(q, y[i].qs);
    }
    *s = sum;
}

void unpack_q8_0(const void* blk, int8_t q[32]) {
    std::memcpy(q, static_cast<const BlockQ8_0*>(blk)->qs, QK);
}

// weights with a min (w = d * q + m) x Q8_1: sum(w a) = d da sum(q qa) + m (da sum(qa))
template <typename Block, void (*Unpack)(const void*, int8_t*)>
void vec_dot_min(int64_t n, float* s, const void* w, const void* a) {
    const Block* x = static_cast<const Block*>(w);
    const BlockQ8_1* y = static_cast<const BlockQ8_1*>(a);
    float sum = 0.0f;
    int8_t q[QK];
    for (int64_t i = 0; i < n / QK; ++i) {
        Unpack(&x[i], q);
        sum += fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d) * (float)dot32(q, y[i].qs) +
               fp16_to_fp32(x[i].m) * fp16_to_fp32(y[i].s);
    }
    *s = sum;
}

// ---- K-quants x Q8_K ------------------------------------------------------------

inline int group_dot(const int8_t* q, const int8_t* a, int len) {
    int s = 0;
    for (int j = 0; j < len; ++j) s += q[j] * a[j];
    return s;
}

void vec_dot_q2_k(int64_t n, float* s, const void* w, const void* a) {
    const BlockQ2_K* x = static_cast<const BlockQ2_K*>(w);
    const BlockQ8_K* y = static_cast<const BlockQ8_K*>(a);
    float sum = 0.0f;
    int8_t q[QK_K];
    int sc[16], mn[16];
    for (int64_t i = 0; i < n / QK_K; ++i) {
        unpack_q2_k(&x[i], q, sc, mn);
        int isum = 0, imin = 0;
        for (int g = 0; g < 16; ++g) {
            isum += sc[g] * group_dot(q + g * 16, y[i].qs + g * 16, 16);
            imin += mn[g] * y[i].bsums[g];
        }
        sum += y[i].d * (fp16_to_fp32(x[i].d) * (float)isum - fp16_to_fp32(x[i].dmin) * (float)imin);
    }
    *s = sum;
}

void vec_dot_q3_k(int64_t n, float* s, const void* w, const void* a) {
    const BlockQ3_K* x = static_cast<const BlockQ3_K*>(w);
    const BlockQ8_K* y = static_cast<const BlockQ8_K*>(a);
    float sum = 0.0f;
    int8_t q[QK_K];
    int sc[16];
    for (int64_t i = 0; i < n / QK_K; ++i) {
        unpack_q3_k(&x[i], q, sc);
        int isum = 0;
        for (int g = 0; g < 16; ++g) isum += sc[g] * group_dot(q + g * 16, y[i].qs + g * 16, 16);
        sum += y[i].d * fp16_to_fp32(x[i].d) * (float)isum;
    }
    *s = sum;
}

template <typename Block, void (*Unpack)(const void*, int8_t*, int*, int*)>
void vec_dot_q45_k(int64_t n, float* s, const void* w, const void* a) {
    const Block* x = static_cast<const Block*>(w);
    const BlockQ8_K* y = static_cast<const BlockQ8_K*>(a);
    float sum = 0.0f;
    int8_t q[QK_K];
    int sc[8], mn[8];
    for (int64_t i = 0; i < n / QK_K; ++i) {
        Unpack(&x[i], q, sc, mn);
        int isum = 0, imin = 0;
        for (int g = 0; g < 8; ++g) {
            isum += sc[g] * group_dot(q + g * 32, y[i].qs + g * 32, 32);
            imin += mn[g] * (y[i].bsums[2 * g] + y[i].bsums[2 * g + 1]);
        }
        sum += y[i].d * (fp16_to_fp32(x[i].d) * (float)isum - fp16_to_fp32(x[i].dmin) * (float)imin);
    }
    *s = sum;
}

void vec_dot_q6_k(int64_t n, float* s, const void* w, const void* a) {
    const BlockQ6_K* x = static_cast<const BlockQ6_K*>(w);
    const BlockQ8_K* y = static_cast<const BlockQ8_K*>(a);
    float sum = 0.0f;
    int8_t q[QK_K];
    int sc[16];
    for (int64_t i = 0; i < n / QK_K; ++i) {
        unpack_q6_k(&x[i], q, sc);
        int isum = 0;
        for (int g = 0; g < 16; ++g) isum += sc[g] * group_dot(q + g * 16, y[i].qs + g * 16, 16);
        sum += y[i].d * fp16_to_fp32(x[i].d) * (float)isum;
    }
    *s = sum;
}

// IQ4_XS x Q8_K: one integer per super-block (|sc| <= 32, |q a| <= 127 * 127: the
// sum stays below 2^28), then the two scales, as the K-quants
void vec_dot_iq4_xs(int64_t n, float* s, const void* w, const void* a) {
    const BlockIQ4_XS* x = static_cast<const BlockIQ4_XS*>(w);
    const BlockQ8_K* y = static_cast<const BlockQ8_K*>(a);
    float sum = 0.0f;
    int8_t q[QK_K];
    int sc[8];
    for (int64_t i = 0; i < n / QK_K; ++i) {
        unpack_iq4_xs(&x[i], q, sc);
        int isum = 0;
        for (int g = 0; g < 8; ++g) isum += sc[g] * group_dot(q + g * 32, y[i].qs + g * 32, 32);
        sum += y[i].d * fp16_to_fp32(x[i].d) * (float)isum;
    }
    *s = sum;
}

}  // namespace

void register_scalar_kernels(KernelTable& t) {
    t[(int)DType::F32] = {DType::F32, nullptr, vec_dot_f32, nullptr};
    t[(int)DType::F16] = {DType::F32, nullptr, vec_dot_16<elem_f16, elem_f32>, nullptr};
    t[(int)DType::BF16] = {DType::F32, nullptr, vec_dot_16<elem_bf16, elem_f32>, nullptr};
    t[(int)DType::Q4_0] = {DType::Q8_0, quantize_row_q8_0_ref, vec_dot_sym<BlockQ4_0, unpack_q4_0>, nullptr};
    t[(int)DType::Q5_0] = {DType::Q8_0, quantize_row_q8_0_ref, vec_dot_sym<BlockQ5_0, unpack_q5_0>, nullptr};
    t[(int)DType::Q8_0] = {DType::Q8_0, quantize_row_q8_0_ref, vec_dot_sym<BlockQ8_0, unpack_q8_0>, nullptr};
    t[(int)DType::Q4_1] = {DType::Q8_1, quantize_row_q8_1_ref, vec_dot_min<BlockQ4_1, unpack_q4_1>, nullptr};
    t[(int)DType::Q5_1] = {DType::Q8_1, quantize_row_q8_1_ref, vec_dot_min<BlockQ5_1, unpack_q5_1>, nullptr};
    t[(int)DType::Q2_K] = {DType::Q8_K, quantize_row_q8_k_ref, vec_dot_q2_k, nullptr};
    t[(int)DType::Q3_K] = {DType::Q8_K, quantize_row_q8_k_ref, vec_dot_q3_k, nullptr};
    t[(int)DType::Q4_K] = {DType::Q8_K, quantize_row_q8_k_ref, vec_dot_q45_k<BlockQ4_K, unpack_q4_k>, nullptr};
    t[(int)DType::Q5_K] = {DType::Q8_K, quantize_row_q8_k_ref, vec_dot_q45_k<BlockQ5_K, unpack_q5_k>, nullptr};
    t[(int)DType::Q6_K] = {DType::Q8_K, quantize_row_q8_k_ref, vec_dot_q6_k, nullptr};
    t[(int)DType::MXFP4] = {DType::Q8_0, quantize_row_q8_0_ref, vec_dot_mxfp4, nullptr};
    t[(int)DType::IQ4_NL] = {DType::Q8_0, quantize_row_q8_0_ref, vec_dot_sym<BlockIQ4_NL, unpack_iq4_nl>, nullptr};
    t[(int)DType::IQ4_XS] = {DType::Q8_K, quantize_row_q8_k_ref, vec_dot_iq4_xs, nullptr};
}

}  // namespace ember
