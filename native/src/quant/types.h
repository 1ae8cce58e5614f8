// The codecs of the element types (core/dtype.h's rows with their reference quantizer
// and dequantizer) and the block layouts of the quantized ones, as GGUF files store them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/dtype.h"

namespace ember {

// Reference kernels operate on n elements, n a multiple of the block size.
using DequantizeRowFn = void (*)(const void* src, float* dst, int64_t n);
using QuantizeRowFn = void (*)(const float* src, void* dst, int64_t n);

struct TypeTraits {
    const char* name = nullptr;   // nullptr: unknown / unsupported id
    int64_t block_size = 0;       // elements per block
    int64_t block_bytes = 0;      // bytes per block
    bool quantized = false;
    DequantizeRowFn dequantize = nullptr;  // to f32 (every supported type has one)
    QuantizeRowFn quantize = nullptr;      // from f32 (reference quantizer, where defined)
};

// nullptr when the id is not a type Ember knows (not a row of core/dtype.h).
const TypeTraits* type_traits(uint32_t type);
inline const char* type_name(uint32_t type) {
    const TypeTraits* t = type_traits(type);
    return t ? t->name : nullptr;
}
// Bytes of a row of n elements (n a multiple of the block size).
inline int64_t row_bytes(const TypeTraits& t, int64_t n) { return n / t.block_size * t.block_bytes; }

// Block layouts (little-endian, packed as in GGUF files); each one's size is its row's
#pragma pack(push, 1)
struct BlockQ4_0 { uint16_t d; uint8_t qs[QK / 2]; };
struct BlockQ4_1 { uint16_t d, m; uint8_t qs[QK / 2]; };
struct BlockQ5_0 { uint16_t d; uint8_t qh[4]; uint8_t qs[QK / 2]; };
struct BlockQ5_1 { uint16_t d, m; uint8_t qh[4]; uint8_t qs[QK / 2]; };
struct BlockQ8_0 { uint16_t d; int8_t qs[QK]; };
struct BlockQ8_1 { uint16_t d, s; int8_t qs[QK]; };
struct BlockQ2_K { uint8_t scales[QK_K / 16]; uint8_t qs[QK_K / 4]; uint16_t d, dmin; };
struct BlockQ3_K { uint8_t hmask[QK_K / 8]; uint8_t qs[QK_K / 4]; uint8_t scales[12]; uint16_t d; };
struct BlockQ4_K { uint16_t d, dmin; uint8_t scales[12]; uint8_t qs[QK_K / 2]; };
struct BlockQ5_K { uint16_t d, dmin; uint8_t scales[12]; uint8_t qh[QK_K / 8]; uint8_t qs[QK_K / 2]; };
struct BlockQ6_K { uint8_t ql[QK_K / 2]; uint8_t qh[QK_K / 4]; int8_t scales[QK_K / 16]; uint16_t d; };
struct BlockQ8_K { float d; int8_t qs[QK_K]; int16_t bsums[QK_K / 16]; };
// MXFP4 (OCP microscaling): an E8M0 exponent e and 4-bit E2M1 codes, w = 2^(e-127) x
// e2m1(code); kept as ggml keeps it, the codes' values doubled (kValuesMXFP4) and the
// scale halved (e8m0_to_fp32_half), so the values are integers.
struct BlockMXFP4 { uint8_t e; uint8_t qs[QK / 2]; };
// IQ4_NL / IQ4_XS: 4-bit indices into one non-linear table (kValuesIQ4NL); IQ4_XS has
// eight 32-groups with 6-bit scales (low 4 bits in scales_l, top 2 in scales_h), ls - 32.
struct BlockIQ4_NL { uint16_t d; uint8_t qs[QK / 2]; };
struct BlockIQ4_XS { uint16_t d; uint16_t scales_h; uint8_t scales_l[QK_K / 64]; uint8_t qs[QK_K / 2]; };
#pragma pack(pop)

static_assert(sizeof(BlockQ4_0) == dtype_info(DType::Q4_0)->block_bytes, "Q4_0 block");
static_assert(sizeof(BlockQ4_1) == dtype_info(DType::Q4_1)->block_bytes, "Q4_1 block");
static_assert(sizeof(BlockQ5_0) == dtype_info(DType::Q5_0)->block_bytes, "Q5_0 block");
static_assert(sizeof(BlockQ5_1) == dtype_info(DType::Q5_1)->block_bytes, "Q5_1 block");
static_assert(sizeof(BlockQ8_0) == dtype_info(DType::Q8_0)->block_bytes, "Q8_0 block");
static_assert(sizeof(BlockQ8_1) == dtype_info(DType::Q8_1)->block_bytes, "Q8_1 block");
static_assert(sizeof(BlockQ2_K) == dtype_info(DType::Q2_K)->block_bytes, "Q2_K block");
static_assert(sizeof(BlockQ3_K) == dtype_info(DType::Q3_K)->block_bytes, "Q3_K block");
static_assert(sizeof(BlockQ4_K) == dtype_info(DType::Q4_K)->block_bytes, "Q4_K block");
static_assert(sizeof(BlockQ5_K) == dtype_info(DType::Q5_K)->block_bytes, "Q5_K block");
static_assert(sizeof(BlockQ6_K) == dtype_info(DType::Q6_K)->block_bytes, "Q6_K block");
static_assert(sizeof(BlockQ8_K) == dtype_info(DType::Q8_K)->block_bytes, "Q8_K block");
static_assert(sizeof(BlockMXFP4) == dtype_info(DType::MXFP4)->block_bytes, "MXFP4 block");
static_assert(sizeof(BlockIQ4_NL) == dtype_info(DType::IQ4_NL)->block_bytes, "IQ4_NL block");
static_assert(sizeof(BlockIQ4_XS) == dtype_info(DType::IQ4_XS)->block_bytes, "IQ4_XS block");

// The 4-bit codes' values: E2M1 doubled (0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives,
// times two), and IQ4_NL's non-linear grid (ggml's kvalues_mxfp4, kvalues_iq4nl).
inline constexpr int8_t kValuesMXFP4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
inline constexpr int8_t kValuesIQ4NL[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

// An E8M0 exponent byte as the float 2^(e - 128): half the scale, since the values are
// doubled. Every byte is a finite power of two (e = 0 and 1 are subnormal; 255 is 2^127,
// not the spec's NaN: ggml and gguf-py read it so).
inline float e8m0_to_fp32_half(uint8_t e) {
    const uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}
// IQ4_XS's scale of 32-group g (0..7), ls - 32 in -32..31
inline int iq4_xs_scale(const BlockIQ4_XS& b, int g) {
    const int lo = (b.scales_l[g / 2] >> (4 * (g % 2))) & 0x0f;
    const int hi = (b.scales_h >> (2 * g)) & 0x03;
    return (lo | (hi << 4)) - 32;
}

}  // namespace ember
