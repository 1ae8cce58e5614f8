// WordPiece (GGUF tokenizer.ggml.model "bert"): BERT normalization (lowercase,
// accent stripping, punctuation and CJK isolation), then greedy longest-match
// pieces per word. Word-initial pieces carry a U+2581 prefix in GGUF vocabularies.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "text/token_table.h"

namespace ember {

class WpmEncoder {
public:
    WpmEncoder(const TokenTable& table, int32_t unk, bool lowercase, bool strip_accents)
        : table_(table), unk_(unk), lowercase_(lowercase), strip_accents_(strip_accents) {}
    void encode(std::string_view text, std::vector<int32_t>& out) const;

private:
    const TokenTable& table_;
    int32_t unk_;
    bool lowercase_, strip_accents_;
};

}  // namespace ember
