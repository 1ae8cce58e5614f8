// Byte-level BPE (GGUF tokenizer.ggml.model "gpt2", and Gemma 4's raw-UTF-8
// variant): pre-tokenize into words, then apply merges by rank inside each word.
#pragma once

#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "text/pretokenize.h"
#include "text/token_table.h"

namespace ember {

class BpeEncoder {
public:
    // Merges are "left right" strings in rank order. Malformed merges, or ones
    // whose parts or result are not tokens, are skipped (counted in skipped_merges()).
    BpeEncoder(const TokenTable& table, const std::vector<std::string_view>& merges,
               const PreTokenizerConfig& config);

    // Appends the tokens of a raw-text fragment.
    void encode(std::string_view text, std::vector<int32_t>& out) const;

    size_t n_merges() const { return merges_.size(); }
    size_t skipped_merges() const { return skipped_; }

private:
    struct Merge {
        int32_t rank;
        int32_t result;
    };
    static uint64_t key(int32_t a, int32_t b) { return ((uint64_t)(uint32_t)a << 32) | (uint32_t)b; }
    void encode_word(const uint32_t* cps, size_t n, std::vector<int32_t>& out) const;

    const TokenTable& table_;
    PreTokenizerConfig config_;
    std::unordered_map<uint64_t, Merge> merges_;
    int32_t byte_symbol_[256];  // token of each byte's GPT-2 stand-in, -1 if missing
    size_t skipped_ = 0;
};

}  // namespace ember
