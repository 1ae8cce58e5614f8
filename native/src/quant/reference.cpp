// Scalar reference kernels: dequantization of every type and quantization of the
// types with a reference quantizer (the K-quants' quantizers are in kquants.cpp). Bit-exact with gguf-py (same operation order,
// float32 arithmetic, no fused multiply-add).
#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "quant/kquants.h"
#include "quant/types.h"

namespace ember {

namespace {

// ---- dequantize ---------------------------------------------------------------

void dequantize_f32(const void* src, float* dst, int64_t n) {
    std::memcpy(dst, src, (size_t)n * sizeof(float));
}

void dequantize_f16(const void* src, float* dst, int64_t n) {
    const uint16_t* x = static_cast<const uint16_t*>(src);
    for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(x[i]);
}

void dequantize_bf16(const void* src, float* dst, int64_t n) {
    const uint16_t* x = static_cast<const uint16_t*>(src);
    for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(x[i]);
}

void dequantize_q4_0(const void* src, float* dst, int64_t n) {
    const BlockQ4_0* b = static_cast<const BlockQ4_0*>(src);
    for (int64_t i = 0; i < n / QK; ++i, dst += QK) {
        const float d = fp16_to_fp32(b[i].d);
        for (int j = 0; j < QK / 2; ++j) {
            dst[j] = d * (float)((int)(b[i].qs[j] & 0x0f) - 8);
            dst[j + QK / 2] = d * (float)((int)(b[i].qs[j] >> 4) - 8);
        }
    }
}

void dequantize_q4_1(const void* src, float* dst, int64_t n) {
    const BlockQ4_1* b = static_cast<const BlockQ4_1*>(src);
    for (int64_t i = 0; i < n / QK; ++i, dst += QK) {
        const float d = fp16_to_fp32(b[i].d);
        const float m = fp16_to_fp32(b[i].m);
        for (int j = 0; j < QK / 2; ++j) {
            dst[j] = d * (float)(b[i].qs[j] & 0x0f) + m;
            dst[j + QK / 2] = d * (float)(b[i].qs[j] >> 4) + m;
        }
    }
}

inline uint32_t load_u32(const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}

void dequantize_q5_0(const void* src, float* dst, int64_t n) {
    const BlockQ5_0* b = static_cast<const BlockQ5_0*>(src);
    for (int64_t i = 0; i < n / QK; ++i, dst += QK) {
        const float d = fp16_to_fp32(b[i].d);
        const uint32_t qh = load_u32(b[i].qh);
        for (int j = 0; j < QK / 2; ++j) {
            const int lo = (b[i].qs[j] & 0x0f) | (int)(((qh >> j) & 1u) << 4);
            const int hi = (b[i].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1u) << 4);
            dst[j] = d * (float)(lo - 16);
            dst[j + QK / 2] = d * (float)(hi - 16);
        }
    }
}

void dequantize_q5_1(const void* src, float* dst, int64_t n) {
    const BlockQ5_1* b = static_cast<const BlockQ5_1*>(src);
    for (int64_t i = 0; i < n / QK; ++i, dst += QK) {
        const float d = fp16_to_fp32(b[i].d);
        const float m = fp16_to_fp32(b[i].m);
        const uint32_t qh = load_u32(b[i].qh);
        for (int j = 0; j < QK / 2; ++j) {
            const int lo = (b[i].qs[j] & 0x0f) | (int)(((qh >> j) & 1u) << 4);
            const int hi = (b[i].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1u) << 4);
            dst[j] = d * (float)lo + m;
            dst[j + QK / 2] = d * (float)hi + m;
        }
    }
}

void dequantize_q8_0(const void* src, float* dst, int64_t n) {
    const BlockQ8_0* b = static_cast<const BlockQ8_0*>(src);
    for (int64_t i = 0; i < n / QK; ++i, dst += QK) {
        const float d = fp16_to_fp32(b[i].d);
        for (int j = 0; j < QK; ++j) dst[j] = (float)b[i].qs[j] * d;
    }
}

void dequantize_q8_1(const void* src, float* dst, int64_t n) {
    const BlockQ8_1* b = static_cast<const BlockQ8_1*>(src);
    for (int64_t i = 0; i < n / QK; ++i, dst += QK) {
        const float d = fp16_to_fp32(b[i].d);
        for (int j = 0; j < QK; ++j) dst[j] = (float)b[i].qs[j] * d;
    }
}

void dequantize_q2_k(const void* src, float* dst, int64_t n) {
    const BlockQ2_K* b = static_cast<const BlockQ2_K*>(src);
    for (int64_t i = 0; i < n / QK_K; ++i, dst += QK_K) {
        const float d = fp16_to_fp32(b[i].d);
        const float dmin = fp16_to_fp32(b[i].dmin);
        // element e = c*128 + s*32 + l reads qs[c*32 + l] >> 2s; scale index e / 16
        for (int e = 0; e < QK_K; ++e) {
            const int c = e / 128, s = (e / 32) % 4, l = e % 32;
            const int q = (b[i].qs[c * 32 + l] >> (2 * s)) & 3;
            const uint8_t sc = b[i].scales[e / 16];
            const float dl = d * (float)(sc & 0x0f);
            const float ml = dmin * (float)(sc >> 4);
            dst[e] = dl * (float)q - ml;
        }
    }
}

void dequantize_q3_k(const void* src, float* dst, int64_t n) {
    const BlockQ3_K* b = static_cast<const BlockQ3_K*>(src);
    for (int64_t i = 0; i < n / QK_K; ++i, dst += QK_K) {
        const float d = fp16_to_fp32(b[i].d);
        int8_t scales[16];
        for (int k = 0; k < 16; ++k) {
            const int lo = (b[i].scales[k % 8] >> (4 * (k / 8))) & 0x0f;
            const int hi = (b[i].scales[8 + k % 4] >> (2 * (k / 4))) & 0x03;
            scales[k] = (int8_t)((lo | (hi << 4)) - 32);
        }
        for (int e = 0; e < QK_K; ++e) {
            const int c = e / 128, s = (e / 32) % 4, l = e % 32;
            const int ql = (b[i].qs[c * 32 + l] >> (2 * s)) & 3;
            const int hbit = (b[i].hmask[l] >> (e / 32)) & 1;
            const int q = ql - (hbit ? 0 : 4);
            const float dl = d * (float)scales[e / 16];
            dst[e] = dl * (float)q;
        }
    }
}

// 6-bit scales and mins of Q4_K/Q5_K, for sub-block j in 0..7
inline void k_scale_min(const uint8_t* s, int j, uint8_t* sc, uint8_t* m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (uint8_t)((s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4));
        *m = (uint8_t)((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
    }
}

void dequantize_q4_k(const void* src, float* dst, int64_t n) {
    const BlockQ4_K* b = static_cast<const BlockQ4_K*>(src);
    for (int64_t i = 0; i < n / QK_K; ++i, dst += QK_K) {
        const float d = fp16_to_fp32(b[i].d);
        const float dmin = fp16_to_fp32(b[i].dmin);
        for (int g = 0; g < 8; ++g) {  // sub-block of 32: chunk g/2, nibble g%2
            uint8_t sc, m;
            k_scale_min(b[i].scales, g, &sc, &m);
            const float d1 = d * (float)sc;
            const float m1 = dmin * (float)m;
            const uint8_t* q = b[i].qs + (g / 2) * 32;
            const int shift = 4 * (g % 2);
            for (int l = 0; l < 32; ++l) dst[g * 32 + l] = d1 * (float)((q[l] >> shift) & 0x0f) - m1;
        }
    }
}

void dequantize_q5_k(const void* src, float* dst, int64_t n) {
    const BlockQ5_K* b = static_cast<const BlockQ5_K*>(src);
    for (int64_t i = 0; i < n / QK_K; ++i, dst += QK_K) {
        const float d = fp16_to_fp32(b[i].d);
        const float dmin = fp16_to_fp32(b[i].dmin);
        for (int g = 0; g < 8; ++g) {
            uint8_t sc, m;
            k_scale_min(b[i].scales, g, &sc, &m);
            const float d1 = d * (float)sc;
            const float m1 = dmin * (float)m;
            const uint8_t* q = b[i].qs + (g / 2) * 32;
            const int shift = 4 * (g % 2);
            for (int l = 0; l < 32; ++l) {
                const int v = ((q[l] >> shift) & 0x0f) | (((b[i].qh[l] >> g) & 1) << 4);
                dst[g * 32 + l] = d1 * (float)v - m1;
            }
        }
    }
}

void dequantize_q6_k(const void* src, float* dst, int64_t n) {
    const BlockQ6_K* b = static_cast<const BlockQ6_K*>(src);
    for (int64_t i = 0; i < n / QK_K; ++i, dst += QK_K) {
        const float d = fp16_to_fp32(b[i].d);
        for (int e = 0; e < QK_K; ++e) {
            const int c = e / 128, k = (e / 32) % 4, l = e % 32;
            const int lo = (b[i].ql[c * 64 + (k % 2) * 32 + l] >> (4 * (k / 2))) & 0x0f;
            const int hi = (b[i].qh[c * 32 + l] >> (2 * k)) & 0x03;
            const int q = (lo | (hi << 4)) - 32;
            const float dl = d * (float)b[i].scales[e / 16];
            dst[e] = dl * (float)q;
        }
    }
}

void dequantize_q8_k(const void* src, float* dst, int64_t n) {
    const BlockQ8_K* b = static_cast<const BlockQ8_K*>(src);
    for (int64_t i = 0; i < n / QK_K; ++i, dst += QK_K)
        for (int j = 0; j < QK_K; ++j) dst[j] = b[i].d * (float)b[i].qs[j];
}

// The 4-bit table types: the codes' values times the block scale. Every product is
// exact (MXFP4's scale is a power of two, its values at most 12; IQ4's are float32
// products of an f16 and a small integer rounded once), so any order gives gguf-py's bits.
void dequantize_mxfp4(const void* src, float* dst, int64_t n) {
    const BlockMXFP4* b = static_cast<const BlockMXFP4*>(src);
    for (int64_t i = 0; i < n / QK; ++i, dst += QK) {
        const float d = e8m0_to_fp32_half(b[i].e);
        for (int j = 0; j < QK / 2; ++j) {
            dst[j] = d * (float)kValuesMXFP4[b[i].qs[j] & 0x0f];
            dst[j + QK / 2] = d * (float)kValuesMXFP4[b[i].qs[j] >> 4];
        }
    }
}

void dequantize_iq4_nl(const void* src, float* dst, int64_t n) {
    const BlockIQ4_NL* b = static_cast<const BlockIQ4_NL*>(src);
    for (int64_t i = 0; i < n / QK; ++i, dst += QK) {
        const float d = fp16_to_fp32(b[i].d);
        for (int j = 0; j < QK / 2; ++j) {
            dst[j] = d * (float)kValuesIQ4NL[b[i].qs[j] & 0x0f];
            dst[j + QK / 2] = d * (float)kValuesIQ4NL[b[i].qs[j] >> 4];
        }
    }
}

void dequantize_iq4_xs(const void* src, float* dst, int64_t n) {
    const BlockIQ4_XS* b = static_cast<const BlockIQ4_XS*>(src);
    for (int64_t i = 0; i < n / QK_K; ++i) {
        const float d = fp16_to_fp32(b[i].d);
        for (int g = 0; g < QK_K / 32; ++g, dst += 32) {
            const float dl = d * (float)iq4_xs_scale(b[i], g);  // rounded once, as gguf-py
            const uint8_t* qs = b[i].qs + 16 * g;
            for (int j = 0; j < 16; ++j) {
                dst[j] = dl * (float)kValuesIQ4NL[qs[j] & 0x0f];
                dst[j + 16] = dl * (float)kValuesIQ4NL[qs[j] >> 4];
            }
        }
    }
}

// ---- quantize (reference, as ggml's *_ref and gguf-py) -----------------------

void quantize_f32(const float* src, void* dst, int64_t n) {
    std::memcpy(dst, src, (size_t)n * sizeof(float));
}

void quantize_f16(const float* src, void* dst, int64_t n) {
    uint16_t* y = static_cast<uint16_t*>(dst);
    for (int64_t i = 0; i < n; ++i) y[i] = fp32_to_fp16(src[i]);
}

void quantize_bf16(const float* src, void* dst, int64_t n) {
    uint16_t* y = static_cast<uint16_t*>(dst);
    for (int64_t i = 0; i < n; ++i) y[i] = fp32_to_bf16(src[i]);
}

// value of largest magnitude (first one on ties), sign kept
inline float signed_absmax(const float* x, int n) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; ++j) {
        if (std::fabs(x[j]) > amax) {
            amax = std::fabs(x[j]);
            max = x[j];
        }
    }
    return max;
}

inline void min_max(const float* x, int n, float* mn, float* mx) {
    float lo = x[0], hi = x[0];
    for (int j = 1; j < n; ++j) {
        if (x[j] < lo) lo = x[j];
        if (x[j] > hi) hi = x[j];
    }
    *mn = lo;
    *mx = hi;
}

void quantize_q4_0(const float* src, void* dst, int64_t n) {
    BlockQ4_0* y = static_cast<BlockQ4_0*>(dst);
    for (int64_t i = 0; i < n / QK; ++i, src += QK) {
        const float d = signed_absmax(src, QK) / -8.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16(d);
        for (int j = 0; j < QK / 2; ++j) {
            const float x0 = src[j] * id;
            const float x1 = src[j + QK / 2] * id;
            int q0 = (int)(int8_t)(x0 + 8.5f), q1 = (int)(int8_t)(x1 + 8.5f);
            q0 = q0 > 15 ? 15 : q0;
            q1 = q1 > 15 ? 15 : q1;
            y[i].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

void quantize_q4_1(const float* src, void* dst, int64_t n) {
    BlockQ4_1* y = static_cast<BlockQ4_1*>(dst);
    for (int64_t i = 0; i < n / QK; ++i, src += QK) {
        float mn, mx;
        min_max(src, QK, &mn, &mx);
        const float d = (mx - mn) / 15.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16(d);
        y[i].m = fp32_to_fp16(mn);
        for (int j = 0; j < QK / 2; ++j) {
            const float x0 = (src[j] - mn) * id;
            const float x1 = (src[j + QK / 2] - mn) * id;
            int q0 = (int)(int8_t)(x0 + 0.5f), q1 = (int)(int8_t)(x1 + 0.5f);
            q0 = q0 > 15 ? 15 : q0;
            q1 = q1 > 15 ? 15 : q1;
            y[i].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

void quantize_q5_0(const float* src, void* dst, int64_t n) {
    BlockQ5_0* y = static_cast<BlockQ5_0*>(dst);
    for (int64_t i = 0; i < n / QK; ++i, src += QK) {
        const float d = signed_absmax(src, QK) / -16.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16(d);
        uint32_t qh = 0;
        for (int j = 0; j < QK / 2; ++j) {
            const float x0 = src[j] * id;
            const float x1 = src[j + QK / 2] * id;
            int q0 = (int)(int8_t)(x0 + 16.5f), q1 = (int)(int8_t)(x1 + 16.5f);
            q0 = q0 > 31 ? 31 : q0;
            q1 = q1 > 31 ? 31 : q1;
            y[i].qs[j] = (uint8_t)((q0 & 0x0f) | ((q1 & 0x0f) << 4));
            qh |= ((uint32_t)(q0 & 0x10) >> 4) << j;
            qh |= ((uint32_t)(q1 & 0x10) >> 4) << (j + QK / 2);
        }
        std::memcpy(y[i].qh, &qh, 4);
    }
}

void quantize_q5_1(const float* src, void* dst, int64_t n) {
    BlockQ5_1* y = static_cast<BlockQ5_1*>(dst);
    for (int64_t i = 0; i < n / QK; ++i, src += QK) {
        float mn, mx;
        min_max(src, QK, &mn, &mx);
        const float d = (mx - mn) / 31.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16(d);
        y[i].m = fp32_to_fp16(mn);
        uint32_t qh = 0;
        for (int j = 0; j < QK / 2; ++j) {
            const float x0 = (src[j] - mn) * id;
            const float x1 = (src[j + QK / 2] - mn) * id;
            int q0 = (int)(int8_t)(x0 + 0.5f), q1 = (int)(int8_t)(x1 + 0.5f);
            q0 = q0 > 31 ? 31 : q0;
            q1 = q1 > 31 ? 31 : q1;
            y[i].qs[j] = (uint8_t)((q0 & 0x0f) | ((q1 & 0x0f) << 4));
            qh |= ((uint32_t)(q0 & 0x10) >> 4) << j;
            qh |= ((uint32_t)(q1 & 0x10) >> 4) << (j + QK / 2);
        }
        std::memcpy(y[i].qh, &qh, 4);
    }
}

void quantize_q8_0(const float* src, void* dst, int64_t n) {
    BlockQ8_0* y = static_cast<BlockQ8_0*>(dst);
    for (int64_t i = 0; i < n / QK; ++i, src += QK) {
        float amax = 0.0f;
        for (int j = 0; j < QK; ++j) amax = std::fmax(amax, std::fabs(src[j]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16(d);
        for (int j = 0; j < QK; ++j) y[i].qs[j] = (int8_t)std::roundf(src[j] * id);
    }
}

// MXFP4 as ggml's quantize_row_mxfp4_ref (and gguf-py): the exponent puts the block's
// largest magnitude in [4, 8) x the half scale, i.e. in the top binade of E2M1 (6 is its
// largest value, so values above 6 x scale saturate to +-6), then each value takes the
// nearest code, the first on ties (+0 before -0).
void quantize_mxfp4(const float* src, void* dst, int64_t n) {
    BlockMXFP4* y = static_cast<BlockMXFP4*>(dst);
    for (int64_t i = 0; i < n / QK; ++i, src += QK) {
        float amax = 0.0f;
        for (int j = 0; j < QK; ++j)
            if (amax < std::fabs(src[j])) amax = std::fabs(src[j]);
        // int first: below 2^-25 the exponent is negative, and gguf-py's uint8 cast wraps it
        const uint8_t e = amax > 0.0f ? (uint8_t)(int)(std::floor(std::log2(amax)) - 2 + 127) : 0;
        const float d = e8m0_to_fp32_half(e);
        y[i].e = e;
        auto best = [d](float x) {
            int bi = 0;
            float be = std::fabs((float)kValuesMXFP4[0] * d - x);
            for (int k = 1; k < 16; ++k) {
                const float err = std::fabs((float)kValuesMXFP4[k] * d - x);
                if (err < be) {
                    bi = k;
                    be = err;
                }
            }
            return bi;
        };
        for (int j = 0; j < QK / 2; ++j)
            y[i].qs[j] = (uint8_t)(best(src[j]) | (best(src[j + QK / 2]) << 4));
    }
}

void dequantize_i32(const void* src, float* dst, int64_t n) {
    const int32_t* x = static_cast<const int32_t*>(src);
    for (int64_t i = 0; i < n; ++i) dst[i] = (float)x[i];
}

// The codecs of core/dtype.h's rows; a row without a dequantizer does not compile.
struct Codec {
    DType type;
    DequantizeRowFn dequantize;
    QuantizeRowFn quantize;  // nullptr: Ember writes no files of this type
};
constexpr Codec kCodecs[] = {
    {DType::F32, dequantize_f32, quantize_f32},
    {DType::F16, dequantize_f16, quantize_f16},
    {DType::Q4_0, dequantize_q4_0, quantize_q4_0},
    {DType::Q4_1, dequantize_q4_1, quantize_q4_1},
    {DType::Q5_0, dequantize_q5_0, quantize_q5_0},
    {DType::Q5_1, dequantize_q5_1, quantize_q5_1},
    {DType::Q8_0, dequantize_q8_0, quantize_q8_0},
    {DType::Q8_1, dequantize_q8_1, nullptr},
    {DType::Q2_K, dequantize_q2_k, quantize_q2_k},
    {DType::Q3_K, dequantize_q3_k, quantize_q3_k},
    {DType::Q4_K, dequantize_q4_k, quantize_q4_k},
    {DType::Q5_K, dequantize_q5_k, quantize_q5_k},
    {DType::Q6_K, dequantize_q6_k, quantize_q6_k},
    {DType::Q8_K, dequantize_q8_k, nullptr},
    {DType::IQ4_NL, dequantize_iq4_nl, quantize_iq4_nl},
    {DType::IQ4_XS, dequantize_iq4_xs, quantize_iq4_xs},
    {DType::I32, dequantize_i32, nullptr},
    {DType::BF16, dequantize_bf16, quantize_bf16},
    {DType::MXFP4, dequantize_mxfp4, quantize_mxfp4},
};

constexpr const Codec* codec_of(uint32_t id) {
    for (const Codec& c : kCodecs)
        if ((uint32_t)c.type == id) return &c;
    return nullptr;
}
#define EMBER_DTYPE_HAS_CODEC(name, id, block, bytes, quantized) \
    static_assert(codec_of(id) && codec_of(id)->dequantize, "type " #name " has no dequantizer");
EMBER_DTYPES(EMBER_DTYPE_HAS_CODEC)
#undef EMBER_DTYPE_HAS_CODEC

struct TraitsTable {
    TypeTraits rows[kDTypeCount];
    TraitsTable() : rows{} {
        for (uint32_t id = 0; id < kDTypeCount; ++id) {
            const DTypeInfo* info = dtype_info(id);
            if (!info) continue;
            const Codec* c = codec_of(id);
            rows[id] = TypeTraits{info->name, info->block_size, info->block_bytes, info->quantized,
                                  c->dequantize, c->quantize};
        }
    }
};

const TraitsTable& traits_table() {
    static const TraitsTable table;
    return table;
}

}  // namespace

const TypeTraits* type_traits(uint32_t type) {
    if (type >= kDTypeCount || !traits_table().rows[type].name) return nullptr;
    return &traits_table().rows[type];
}

}  // namespace ember
