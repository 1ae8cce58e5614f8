// Byte-level BPE (GGUF tokenizer.ggml.model "gpt2", and Gemma 4's raw-UTF-8
// variant): pre-tokenize into words, then apply merges by rank inside each word.
#pragma once

#include <cstdint>
#include <string_view>
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

    size_t n_merges() const { return n_merges_; }
    size_t skipped_merges() const { return skipped_; }

private:
    // (left id, right id) -> (rank, merged id), open addressing: a flat table
    // keeps the hundreds of thousands of merges of large vocabularies cheap to
    // build and to probe.
    struct Merge {
        uint64_t key = kEmpty;
        int32_t rank = 0;
        int32_t result = 0;
    };
    static constexpr uint64_t kEmpty = ~0ull;  // ids are < 2^31, so no real key is all ones
    static uint64_t key(int32_t a, int32_t b) { return ((uint64_t)(uint32_t)a << 32) | (uint32_t)b; }
    const Merge* find_merge(int32_t a, int32_t b) const;
    void encode_word(const uint32_t* cps, size_t n, std::vector<int32_t>& out) const;

    const TokenTable& table_;
    PreTokenizerConfig config_;
    std::vector<Merge> merges_;
    uint64_t mask_ = 0;
    size_t n_merges_ = 0;
    int32_t byte_symbol_[256];  // token of each byte's GPT-2 stand-in, -1 if missing
    size_t skipped_ = 0;
};

}  // namespace ember
