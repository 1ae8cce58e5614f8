// The codecs of the element types (core/dtype.h's rows with their reference quantizer
// and dequantizer) and the block layouts of the quantized ones, as GGUF files store them.
#pragma once

#include <cstddef>
#include <cstdint>

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

}  // namespace ember
