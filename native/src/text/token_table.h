// The token strings of a vocabulary with their scores and attributes, shared by
// the tokenizer algorithms.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "text/vocab.h"

namespace ember {

// Attribute bits (a token can be e.g. NORMAL and forced CONTROL by its text).
enum TokenAttr : uint32_t {
    ATTR_UNDEFINED = 0,
    ATTR_UNKNOWN = 1u << 0,
    ATTR_UNUSED = 1u << 1,
    ATTR_NORMAL = 1u << 2,
    ATTR_CONTROL = 1u << 3,
    ATTR_USER_DEFINED = 1u << 4,
    ATTR_BYTE = 1u << 5,
    ATTR_LSTRIP = 1u << 7,  // a special-token match swallows whitespace on its left
    ATTR_RSTRIP = 1u << 8,  // ... and on its right
};

struct TokenTable {
    std::vector<std::string> text;
    std::vector<float> score;
    std::vector<uint32_t> attr;
    std::vector<TokenType> type;  // as stored in the file
    size_t max_len = 0;

    int32_t size() const { return (int32_t)text.size(); }
    // Call once `text` is final. With duplicate strings the highest id wins.
    void build_index();
    // Token id of a string, -1 when none.
    int32_t find(std::string_view s) const;
    // find() for many strings at once, overlapping their memory accesses
    // (loading a vocabulary resolves a million merge strings).
    void find_many(const std::string_view* keys, size_t n, int32_t* ids) const;
    // <0xNN> byte-fallback token, -1 when absent
    int32_t byte_token(uint8_t b) const {
        static const char* hex = "0123456789ABCDEF";
        const char buf[6] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>'};
        return find(std::string_view(buf, 6));
    }

private:
    int32_t find_hashed(std::string_view s, uint64_t hash) const;
    // Open addressing, linear probing. Each slot holds the upper hash bits and
    // id + 1 (0 = empty), so a probe rarely touches a string it does not match:
    // vocabulary lookups dominate both loading and tokenizing.
    std::vector<uint64_t> slots_;
    uint64_t mask_ = 0;
};

}  // namespace ember
