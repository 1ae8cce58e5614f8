// Splits text around special tokens before the subword tokenizer runs. Control
// and unknown tokens are matched only with parse_special; user-defined tokens
// always are (HF "added tokens" semantics). Longer tokens take precedence.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "text/token_table.h"

namespace ember {

struct Fragment {
    int32_t token;  // >= 0: a special token; -1: raw text [off, off + len)
    size_t off;
    size_t len;
};

class SpecialMatcher {
public:
    void build(const TokenTable& table);
    void partition(std::string_view text, bool parse_special, std::vector<Fragment>& out) const;

private:
    struct Node {
        int32_t rank = -1;  // index into order_ of the token ending here
        std::vector<std::pair<uint8_t, int32_t>> kids;
    };
    int32_t child(int32_t node, uint8_t b) const;

    const TokenTable* table_ = nullptr;
    std::vector<int32_t> order_;  // special token ids, longest first
    std::vector<Node> trie_;
};

}  // namespace ember
