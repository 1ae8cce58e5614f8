// SentencePiece BPE (GGUF tokenizer.ggml.model "llama"): greedy merging of the
// adjacent pair whose concatenation is the highest-scoring token, with <0xNN>
// byte fallback for characters outside the vocabulary.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "text/token_table.h"

namespace ember {

class SpmEncoder {
public:
    explicit SpmEncoder(const TokenTable& table, int32_t unk) : table_(table), unk_(unk) {}
    // text is already whitespace-escaped (U+2581) and prefixed as the model wants.
    void encode(std::string_view text, std::vector<int32_t>& out) const;

private:
    const TokenTable& table_;
    int32_t unk_;
};

}  // namespace ember
