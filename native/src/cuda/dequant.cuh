// Dequantization for the CUDA kernels: n consecutive elements of 32-element sub-block
// `sub` of a row, from element l0 of it, for every weight type (quant/reference.cpp's
// formulas). Host and device: test_cuda_dequant checks them against the reference on the
// CPU, so they are verified on machines without a GPU.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>

#include "quant/types.h"

#define EMBER_HD __host__ __device__ __forceinline__

namespace ember {
namespace cuda {

EMBER_HD float h2f(uint16_t h) { return __half2float(__ushort_as_half(h)); }
EMBER_HD uint16_t f2h(float f) { return __half_as_ushort(__float2half_rn(f)); }
EMBER_HD float bf16_bits(uint16_t h) {
#ifdef __CUDA_ARCH__
    return __uint_as_float((uint32_t)h << 16);
#else
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
#endif
}
EMBER_HD uint16_t ld16(const uint8_t* p) { return (uint16_t)(p[0] | (p[1] << 8)); }
EMBER_HD uint32_t ld32(const uint8_t* p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

// ---- dequantization: n elements of sub-block `sub` (32 elements), from element l0 --------

constexpr int kQK = 32, kQKK = 256;

template <int T>
EMBER_HD void dq(const uint8_t* row, int64_t sub, int l0, int n, float* out);

template <>
EMBER_HD void dq<(int)DType::F32>(const uint8_t* row, int64_t sub, int l0, int n, float* out) {
    const float* f = reinterpret_cast<const float*>(row) + sub * 32 + l0;
    for (int l = 0; l < n; ++l) out[l] = f[l];
}
template <>
EMBER_HD void dq<(int)DType::F16>(const uint8_t* row, int64_t sub, int l0, int n, float* out) {
    const uint16_t* h = reinterpret_cast<const uint16_t*>(row) + sub * 32 + l0;
    for (int l = 0; l < n; ++l) out[l] = h2f(h[l]);
}
template <>
EMBER_HD void dq<(int)DType::BF16>(const uint8_t* row, int64_t sub, int l0, int n, float* out) {
    const uint16_t* h = reinterpret_cast<const uint16_t*>(row) + sub * 32 + l0;
    for (int l = 0; l < n; ++l) out[l] = bf16_bits(h[l]);
}
template <>
EMBER_HD void dq<(int)DType::Q4_0>(const uint8_t* row, int64_t sub, int l0, int n, float* out) {
    const uint8_t* b = row + sub * 18;
    const float d = h2f(ld16(b));
    const uint8_t* qs = b + 2;
    for (int l = l0; l < l0 + n; ++l) {
        const int q = l < 16 ? (qs[l] & 15) : (qs[l - 16] >> 4);
        out[l - l0] = d * (float)(q - 8);
    }
}
template <>
EMBER_HD void dq<(int)DType::Q4_1>(const uint8_t* row, int64_t sub, int l0, int n, float* out) {
    const uint8_t* b = row + sub * 20;
    const float d = h2f(ld16(b)), m = h2f(ld16(b + 2));
    const uint8_t* qs = b + 4;
    for (int l = l0; l < l0 + n; ++l) {
        const int q = l < 16 ? (qs[l] & 15) : (qs[l - 16] >> 4);
        out[l - l0] = d * (float)q + m;
    }
}
template <>
EMBER_HD void dq<(int)DType::Q5_0>(const uint8_t* row, int64_t sub, int l0, int n, float* out) {
    const uint8_t* b = row + sub * 22;
    const float d = h2f(ld16(b));
    const uint32_t qh = ld32(b + 2);
    const uint8_t* qs = b + 6;
    for (int l = l0; l < l0 + n; ++l) {
        const int lo = l < 16 ? (qs[l] & 15) : (qs[l - 16] >> 4);
        const int q = lo | (int)(((qh >> l) & 1u) << 4);
        out[l - l0] = d * (float)(q - 16);
    }
}
template <>
EMBER_HD void dq<(int)DType::Q5_1>(const uint8_t* row, int64_t sub, int l0, int n, float* out) {
    const uint8_t* b = row + sub * 24;
    const float d = h2f(ld16(b)), m = h2f(ld16(b + 2));
    const uint32_t qh = ld32(b + 4);
    const uint8_t* qs = b + 8;
    for (int l = l0; l < l0 + n; ++l) {
        const int lo = l < 16 ? (qs[l] & 15) : (qs[l - 16] >> 4);
        const int q = lo | (int)(((qh >> l) & 1u) << 4);
        out[l - l0] = d * (float)q + m;
    }
}
template <>
EMBER_HD void dq<(int)DType::Q8_0>(const uint8_t* row, int64_t sub, int l0, int n, float* out) {
    const uint8_t* b = row + sub * 34;
    const float d = h2f(ld16(b));
    const int8_t* qs = reinterpret_cast<const int8_t*>(b + 2);
    for (int l = l0; l < l0 + n; ++l) out[l - l0] = (float)qs[l] * d;
}
template <>
EMBER_HD void dq<(int)DType::Q2_K>(const uint8_t* row, int64_t sub, int l0, int n, float* out) {
    const uint8_t* b = row + (sub / 8) * 84;
    const int g = (int)(sub % 8);
    const uint8_t* scales = b;
    const uint8_t* qs = b + 16;
    const float d = h2f(ld16(b + 80)), dmin = h2f(ld16(b + 82));
    const int c = g / 4, s = g % 4;
    for (int l = l0; l < l0 + n; ++l) {
        const int q = (qs[c * 32 + l] >> (2 * s)) & 3;
        const uint8_t sc = scales[g * 2 + l / 16];
        out[l - l0] = d * (float)(sc & 15) * (float)q - dmin * (float)(sc >> 4);
    }
}
template <>
EMBER_HD void dq<(int)DType::Q3_K>(const uint8_t* row, int64_t sub, int l0, int n, float* out) {
    const uint8_t* b = row + (sub / 8) * 110;
    const int g = (int)(sub % 8);
    const uint8_t* hmask = b;
    const uint8_t* qs = b + 32;
    const uint8_t* sc = b + 96;
    const float d = h2f(ld16(b + 108));
    const int c = g / 4, s = g % 4;
    for (int l = l0; l < l0 + n; ++l) {
        const int k = g * 2 + l / 16;
        const int lo = (sc[k % 8] >> (4 * (k / 8))) & 15;
        const int hi = (sc[8 + k % 4] >> (2 * (k / 4))) & 3;
        const int scale = (lo | (hi << 4)) - 32;
        const int ql = (qs[c * 32 + l] >> (2 * s)) & 3;
        const int q = ql - (((hmask[l] >> g) & 1) ? 0 : 4);
        out[l - l0] = d * (float)scale * (float)q;
    }
}
EMBER_HD void k_scale_min(const uint8_t* s, int j, int* sc, int* m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
        *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}
template <>
EMBER_HD void dq<(int)DType::Q4_K>(const uint8_t* row, int64_t sub, int l0, int n, float* out) {
    const uint8_t* b = row + (sub / 8) * 144;
    const int g = (int)(sub % 8);
    const float d = h2f(ld16(b)), dmin = h2f(ld16(b + 2));
    int sc, m;
    k_scale_min(b + 4, g, &sc, &m);
    const float d1 = d * (float)sc, m1 = dmin * (float)m;
    const uint8_t* q = b + 16 + (g / 2) * 32;
    const int shift = 4 * (g % 2);
    for (int l = l0; l < l0 + n; ++l) out[l - l0] = d1 * (float)((q[l] >> shift) & 15) - m1;
}
template <>
EMBER_HD void dq<(int)DType::Q5_K>(const uint8_t* row, int64_t sub, int l0, int n, float* out) {
    const uint8_t* b = row + (sub / 8) * 176;
    const int g = (int)(sub % 8);
    const float d = h2f(ld16(b)), dmin = h2f(ld16(b + 2));
    int sc, m;
    k_scale_min(b + 4, g, &sc, &m);
    const float d1 = d * (float)sc, m1 = dmin * (float)m;
    const uint8_t* qh = b + 16;
    const uint8_t* q = b + 48 + (g / 2) * 32;
    const int shift = 4 * (g % 2);
    for (int l = l0; l < l0 + n; ++l) {
        const int v = ((q[l] >> shift) & 15) | (((qh[l] >> g) & 1) << 4);
        out[l - l0] = d1 * (float)v - m1;
    }
}
template <>
EMBER_HD void dq<(int)DType::Q6_K>(const uint8_t* row, int64_t sub, int l0, int n, float* out) {
    const uint8_t* b = row + (sub / 8) * 210;
    const int g = (int)(sub % 8);
    const uint8_t* ql = b;
    const uint8_t* qh = b + 128;
    const int8_t* scales = reinterpret_cast<const int8_t*>(b + 192);
    const float d = h2f(ld16(b + 208));
    const int c = g / 4, k = g % 4;
    for (int l = l0; l < l0 + n; ++l) {
        const int lo = (ql[c * 64 + (k % 2) * 32 + l] >> (4 * (k / 2))) & 15;
        const int hi = (qh[c * 32 + l] >> (2 * k)) & 3;
        const int q = (lo | (hi << 4)) - 32;
        out[l - l0] = d * (float)scales[g * 2 + l / 16] * (float)q;
    }
}

// The 4-bit table types' values, code c's byte of two 64-bit words (no table in device
// memory: quant/types.h's kValuesMXFP4 and kValuesIQ4NL, which test_cuda_dequant checks)
EMBER_HD int table_value(uint64_t lo, uint64_t hi, int c) {
    return (int)(int8_t)(uint8_t)(((c < 8 ? lo : hi) >> (8 * (c & 7))) & 0xff);
}
EMBER_HD int mxfp4_value(int c) { return table_value(0x0C08060403020100ull, 0xF4F8FAFCFDFEFF00ull, c); }
EMBER_HD int iq4nl_value(int c) { return table_value(0xF6EADDCFBFAD9881ull, 0x7159453526190D01ull, c); }
EMBER_HD float e8m0_half(uint8_t e) {  // quant/types.h's e8m0_to_fp32_half
    const uint32_t u = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    float f;
    memcpy(&f, &u, 4);
    return f;
#endif
}
template <>
EMBER_HD void dq<(int)DType::MXFP4>(const uint8_t* row, int64_t sub, int l0, int n, float* out) {
    const uint8_t* b = row + sub * 17;
    const float d = e8m0_half(b[0]);
    const uint8_t* qs = b + 1;
    for (int l = l0; l < l0 + n; ++l) {
        const int c = l < 16 ? (qs[l] & 15) : (qs[l - 16] >> 4);
        out[l - l0] = d * (float)mxfp4_value(c);
    }
}
template <>
EMBER_HD void dq<(int)DType::IQ4_NL>(const uint8_t* row, int64_t sub, int l0, int n, float* out) {
    const uint8_t* b = row + sub * 18;
    const float d = h2f(ld16(b));
    const uint8_t* qs = b + 2;
    for (int l = l0; l < l0 + n; ++l) {
        const int c = l < 16 ? (qs[l] & 15) : (qs[l - 16] >> 4);
        out[l - l0] = d * (float)iq4nl_value(c);
    }
}
template <>
EMBER_HD void dq<(int)DType::IQ4_XS>(const uint8_t* row, int64_t sub, int l0, int n, float* out) {
    const uint8_t* b = row + (sub / 8) * 136;
    const int g = (int)(sub % 8);
    const int ls = ((b[4 + g / 2] >> (4 * (g % 2))) & 15) | (((ld16(b + 2) >> (2 * g)) & 3) << 4);
    const float dl = h2f(ld16(b)) * (float)(ls - 32);
    const uint8_t* qs = b + 8 + 16 * g;
    for (int l = l0; l < l0 + n; ++l) {
        const int c = l < 16 ? (qs[l] & 15) : (qs[l - 16] >> 4);
        out[l - l0] = dl * (float)iq4nl_value(c);
    }
}

}  // namespace cuda
}  // namespace ember
