// The element types Ember reads: one row per GGUF type id (its name and block geometry).
// Every list of types in the engine is made from this table or sized by it: the codecs
// (quant/types.h), the CPU's kernel tables, the backends' support checks and the tests
// that hold them to gguf-py. A new weight type starts as a new row here.
#pragma once

#include <cstdint>

namespace ember {

// X(NAME, GGUF type id, elements per block, bytes per block, quantized)
#define EMBER_DTYPES(X)             \
    X(F32, 0, 1, 4, false)          \
    X(F16, 1, 1, 2, false)          \
    X(Q4_0, 2, 32, 18, true)        \
    X(Q4_1, 3, 32, 20, true)        \
    X(Q5_0, 6, 32, 22, true)        \
    X(Q5_1, 7, 32, 24, true)        \
    X(Q8_0, 8, 32, 34, true)        \
    X(Q8_1, 9, 32, 36, true)        \
    X(Q2_K, 10, 256, 84, true)      \
    X(Q3_K, 11, 256, 110, true)     \
    X(Q4_K, 12, 256, 144, true)     \
    X(Q5_K, 13, 256, 176, true)     \
    X(Q6_K, 14, 256, 210, true)     \
    X(Q8_K, 15, 256, 292, true)     \
    X(IQ4_NL, 20, 32, 18, true)     \
    X(IQ4_XS, 23, 256, 136, true)   \
    X(I32, 26, 1, 4, false)         \
    X(BF16, 30, 1, 2, false)        \
    X(MXFP4, 39, 32, 17, true)

enum class DType : uint32_t {
#define EMBER_DTYPE_ENUM(name, id, block, bytes, quantized) name = id,
    EMBER_DTYPES(EMBER_DTYPE_ENUM)
#undef EMBER_DTYPE_ENUM
};

// One past the largest type id in the table: a table indexed by type id has this many rows.
constexpr uint32_t kDTypeCount = [] {
    uint32_t n = 0;
#define EMBER_DTYPE_MAX(name, id, block, bytes, quantized) n = n > (id) + 1u ? n : (id) + 1u;
    EMBER_DTYPES(EMBER_DTYPE_MAX)
#undef EMBER_DTYPE_MAX
    return n;
}();

constexpr int QK = 32;     // elements per block of the legacy quants
constexpr int QK_K = 256;  // elements per super-block of the K-quants

struct DTypeInfo {
    const char* name = nullptr;  // nullptr: an id Ember does not know
    int64_t block_size = 0;      // elements per block
    int64_t block_bytes = 0;     // bytes per block
    bool quantized = false;
};

struct DTypeTable {
    DTypeInfo rows[kDTypeCount];
    constexpr DTypeTable() : rows{} {
#define EMBER_DTYPE_ROW(name, id, block, bytes, quantized) rows[id] = DTypeInfo{#name, block, bytes, quantized};
        EMBER_DTYPES(EMBER_DTYPE_ROW)
#undef EMBER_DTYPE_ROW
    }
};
inline constexpr DTypeTable kDTypeTable;

// nullptr when the id is not a row of the table.
constexpr const DTypeInfo* dtype_info(uint32_t type) {
    return type < kDTypeCount && kDTypeTable.rows[type].name ? &kDTypeTable.rows[type] : nullptr;
}
constexpr const DTypeInfo* dtype_info(DType type) { return dtype_info((uint32_t)type); }

// Bytes of a row of n elements (n a multiple of the block size).
constexpr int64_t dtype_row_bytes(const DTypeInfo& t, int64_t n) { return n / t.block_size * t.block_bytes; }

}  // namespace ember
