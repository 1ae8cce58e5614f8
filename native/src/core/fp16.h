// Half-precision (IEEE binary16) and bfloat16 conversions, exact and portable.
// The SIMD paths (F16C, NEON) must agree bit for bit with these.
#pragma once

#include <cstdint>
#include <cstring>

namespace ember {

inline float bits_to_f32(uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
inline uint32_t f32_to_bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}

// Exact binary16 -> binary32 (handles subnormals, inf, NaN).
inline float fp16_to_fp32_exact(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0x1f) return bits_to_f32(sign | 0x7f800000u | (mant << 13));
    if (exp == 0) {
        if (mant == 0) return bits_to_f32(sign);
        // subnormal: value = mant * 2^-24, exact in float
        float v = (float)mant * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    return bits_to_f32(sign | ((exp + 112) << 23) | (mant << 13));
}

// 64k-entry table filled once at library load: the hot path is a single load.
extern float g_fp16_table[65536];

inline float fp16_to_fp32(uint16_t h) { return g_fp16_table[h]; }

// binary32 -> binary16, round to nearest even (matches numpy astype(float16) and F16C).
inline uint16_t fp32_to_fp16(float f) {
    uint32_t x = f32_to_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t abs = x & 0x7fffffffu;
    if (abs > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));  // NaN
    if (abs >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);  // rounds to inf
    if (abs < 0x38800000u) {
        // subnormal or zero in half: value / 2^-24, rounded to nearest even
        if (abs < 0x33000000u) return (uint16_t)sign;  // below half the smallest subnormal
        uint32_t exp = abs >> 23;
        uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126 - exp;  // 113 - exp + 13
        uint32_t half = mant >> shift;
        uint32_t rem = mant & ((1u << shift) - 1);
        uint32_t mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1))) half++;
        return (uint16_t)(sign | half);
    }
    uint32_t half = ((abs - 0x38000000u) >> 13);
    uint32_t rem = abs & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (half & 1))) half++;
    return (uint16_t)(sign | half);
}

inline float bf16_to_fp32(uint16_t h) { return bits_to_f32((uint32_t)h << 16); }

// Same rounding as ggml/gguf-py: NaN forced quiet, otherwise round to nearest even.
inline uint16_t fp32_to_bf16(float f) {
    uint32_t u = f32_to_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 64);
    return (uint16_t)((u + (0x7fffu + ((u >> 16) & 1))) >> 16);
}

}  // namespace ember
