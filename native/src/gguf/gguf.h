// GGUF v2/v3 reader over a read-only file mapping. Every count, length, dimension
// product and offset is checked against the bytes that remain before it is used;
// a bad file throws ember::Error(EMBER_ERR_FORMAT / EMBER_ERR_UNSUPPORTED, reason).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gguf/mapped_file.h"

namespace ember {

enum class GGUFType : uint32_t {
    UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6,
    BOOL = 7, STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};

// One metadata value. Scalars are widened; arrays keep their element type and
// point into the mapping (strings as views), so a 150k-entry vocab costs no copies.
struct GGUFValue {
    GGUFType type = GGUFType::UINT8;
    // scalar payloads
    uint64_t u = 0;
    int64_t i = 0;
    double f = 0.0;
    bool b = false;
    std::string_view str;
    // arrays
    GGUFType elem_type = GGUFType::UINT8;
    uint64_t n_elems = 0;
    const uint8_t* array_data = nullptr;         // first element (numeric arrays)
    std::vector<std::string_view> strings;       // string arrays
    std::vector<GGUFValue> nested;               // arrays of arrays

    bool is_integer() const;
    bool is_number() const;
};

struct GGUFTensorInfo {
    std::string name;
    uint32_t n_dims = 0;
    int64_t ne[4] = {1, 1, 1, 1};
    uint32_t type = 0;        // GGUF type id, validated against the type table
    uint64_t offset = 0;      // relative to the data section
    uint64_t n_bytes = 0;
    const uint8_t* data = nullptr;  // into the mapping
};

class GGUFFile {
public:
    // Opens, maps and validates the header, metadata and tensor infos.
    static std::unique_ptr<GGUFFile> open(const std::string& path);
    // Same over bytes owned by the caller (tests, fuzzing); they must outlive the reader.
    static std::unique_ptr<GGUFFile> from_memory(const uint8_t* data, uint64_t size);

    uint32_t version() const { return version_; }
    uint64_t file_size() const { return size_; }
    // Drops this process's mapping of the file's whole pages within [p, p + length), p a
    // pointer into the mapping (MappedFile::release)
    void release_pages(const void* p, uint64_t length) const {
        if (file_) file_->release((uint64_t)(static_cast<const uint8_t*>(p) - base_), length);
    }
    // The same for the whole tensor data section
    void release_tensor_data() const {
        if (file_ && data_offset_ < size_) file_->release(data_offset_, size_ - data_offset_);
    }
    uint64_t alignment() const { return alignment_; }
    uint64_t data_offset() const { return data_offset_; }

    const std::vector<std::pair<std::string, GGUFValue>>& metadata() const { return kv_; }
    const GGUFValue* find(std::string_view key) const;  // nullptr when absent

    // Typed getters: throw EMBER_ERR_FORMAT when the key exists with a wrong type;
    // the *_or variants return the fallback when the key is absent.
    std::string get_string(std::string_view key) const;
    std::string get_string_or(std::string_view key, const std::string& fallback) const;
    int64_t get_int(std::string_view key) const;  // any integer type (u32 or u64 alike)
    int64_t get_int_or(std::string_view key, int64_t fallback) const;
    double get_float(std::string_view key) const;  // any numeric type
    double get_float_or(std::string_view key, double fallback) const;
    bool get_bool_or(std::string_view key, bool fallback) const;
    // Array accessors (throw when absent or of another element type)
    const std::vector<std::string_view>& get_string_array(std::string_view key) const;
    std::vector<float> get_float_array(std::string_view key) const;   // f32/f64 arrays
    std::vector<int64_t> get_int_array(std::string_view key) const;   // any integer array

    const std::vector<GGUFTensorInfo>& tensors() const { return tensors_; }
    const GGUFTensorInfo* find_tensor(std::string_view name) const;

    // JSON rendering of a value (for the metadata API and `ember info`).
    static std::string to_json(const GGUFValue& v);
    static const char* type_name(GGUFType t);

private:
    GGUFFile() = default;
    void parse();

    std::unique_ptr<MappedFile> file_;
    const uint8_t* base_ = nullptr;
    uint64_t size_ = 0;
    uint32_t version_ = 0;
    uint64_t alignment_ = 32;
    uint64_t data_offset_ = 0;
    std::vector<std::pair<std::string, GGUFValue>> kv_;
    std::unordered_map<std::string, size_t> kv_index_;
    std::vector<GGUFTensorInfo> tensors_;
    std::unordered_map<std::string, size_t> tensor_index_;
};

}  // namespace ember
