// UTF-8 decoding and encoding shared by the tokenizers. Decoding never fails:
// tokenizers must accept arbitrary bytes, so each byte that does not start a
// well-formed sequence becomes U+FFFD and decoding resumes at the next byte.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ember::utf8 {

constexpr uint32_t kReplacement = 0xFFFD;

// Decodes one code point at s[i]; advances i by the bytes consumed (>= 1).
// Rejects overlong forms, surrogates and values past U+10FFFF.
inline uint32_t decode(std::string_view s, size_t& i) {
    const uint8_t b0 = (uint8_t)s[i];
    if (b0 < 0x80) { i += 1; return b0; }
    size_t n;
    uint32_t cp, min;
    if (b0 >= 0xC2 && b0 < 0xE0) { n = 2; cp = b0 & 0x1F; min = 0x80; }
    else if (b0 >= 0xE0 && b0 < 0xF0) { n = 3; cp = b0 & 0x0F; min = 0x800; }
    else if (b0 >= 0xF0 && b0 < 0xF5) { n = 4; cp = b0 & 0x07; min = 0x10000; }
    else { i += 1; return kReplacement; }
    if (i + n > s.size()) { i += 1; return kReplacement; }
    for (size_t k = 1; k < n; ++k) {
        const uint8_t b = (uint8_t)s[i + k];
        if ((b & 0xC0) != 0x80) { i += 1; return kReplacement; }
        cp = (cp << 6) | (b & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) { i += 1; return kReplacement; }
    i += n;
    return cp;
}

inline void append(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
        out.push_back((char)cp);
    } else if (cp < 0x800) {
        out.push_back((char)(0xC0 | (cp >> 6)));
        out.push_back((char)(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        out.push_back((char)(0xE0 | (cp >> 12)));
        out.push_back((char)(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back((char)(0x80 | (cp & 0x3F)));
    } else if (cp <= 0x10FFFF) {
        out.push_back((char)(0xF0 | (cp >> 18)));
        out.push_back((char)(0x80 | ((cp >> 12) & 0x3F)));
        out.push_back((char)(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back((char)(0x80 | (cp & 0x3F)));
    } else {
        append(out, kReplacement);
    }
}

inline std::string encode(uint32_t cp) {
    std::string s;
    append(s, cp);
    return s;
}

inline std::vector<uint32_t> decode_all(std::string_view s) {
    std::vector<uint32_t> cps;
    cps.reserve(s.size());
    for (size_t i = 0; i < s.size();) cps.push_back(decode(s, i));
    return cps;
}

inline bool is_valid(std::string_view s) {
    for (size_t i = 0; i < s.size();) {
        const size_t before = i;
        if (decode(s, i) == kReplacement) {
            // a literal U+FFFD (EF BF BD) is valid; a replacement for a bad byte consumed 1 byte
            if (i - before == 1) return false;
        }
    }
    return true;
}

}  // namespace ember::utf8
