// Unicode character properties for the pre-tokenizers and normalizers, backed
// by the generated tables in unicode_tables.cpp (tools/gen_unicode_tables.py).
#pragma once

#include <cstdint>
#include <string>

#include "text/unicode_tables.h"

namespace ember::unicode {

// General-category classes, as \p{..} in tokenizer regexes sees them.
enum Category : uint8_t {
    UNASSIGNED = 0, LETTER = 1, NUMBER = 2, PUNCT = 3, SYMBOL = 4, MARK = 5, SEPARATOR = 6, OTHER = 7,
};
constexpr uint8_t kCategoryMask = 0x07;
constexpr uint8_t kFlagWhitespace = 0x08;
constexpr uint8_t kFlagUpper = 0x10;  // Lu
constexpr uint8_t kFlagLower = 0x20;  // Ll

inline uint8_t flags(uint32_t cp) {
    using namespace unicode_tables;
    if (cp >= 0x110000) return UNASSIGNED;
    return kStage2[(uint32_t)kStage1[cp >> kBlockShift] * kBlockSize + (cp & (kBlockSize - 1))];
}
inline Category category(uint32_t cp) { return (Category)(flags(cp) & kCategoryMask); }
inline bool is_letter(uint32_t cp) { return category(cp) == LETTER; }
inline bool is_number(uint32_t cp) { return category(cp) == NUMBER; }
inline bool is_punct(uint32_t cp) { return category(cp) == PUNCT; }
inline bool is_symbol(uint32_t cp) { return category(cp) == SYMBOL; }
inline bool is_mark(uint32_t cp) { return category(cp) == MARK; }
inline bool is_whitespace(uint32_t cp) { return (flags(cp) & kFlagWhitespace) != 0; }

// Simple (one-to-one) lowercase mapping; identity when there is none.
uint32_t to_lower(uint32_t cp);
// First code point of the canonical decomposition (NFD), identity when none:
// enough for BERT-style accent stripping, which then drops the marks.
uint32_t nfd_first(uint32_t cp);

// GPT-2's reversible byte <-> printable code point mapping used by byte-level BPE.
uint32_t byte_to_cp(uint8_t b);
// -1 when cp is not the image of any byte.
int cp_to_byte(uint32_t cp);

}  // namespace ember::unicode
