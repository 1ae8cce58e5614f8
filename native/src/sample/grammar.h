// Grammar-constrained sampling: a matcher that follows every parse of the text so far (a
// set of parse stacks), and the mask that sets to -inf each token whose text cannot
// continue it. The vocabulary is walked as a byte trie, so tokens sharing a prefix share
// the work of matching it and a dead prefix drops its whole subtree at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sample/gbnf.h"

namespace ember {

// The token texts of one vocabulary, built once per model and shared by its grammars.
struct GrammarVocab {
    // pieces[id]: the bytes a token adds to the output; eog[id]: it ends the generation.
    // Tokens with no text (control tokens) are never allowed by a grammar.
    static std::shared_ptr<const GrammarVocab> build(std::vector<std::string> pieces,
                                                     const std::vector<bool>& eog);

    struct Node {             // one byte prefix; nodes are stored in depth-first order
        uint32_t end;         // index past this node's subtree
        uint32_t depth;       // bytes in the prefix (the root: 0)
        uint32_t tok_begin;   // tokens whose text is exactly this prefix: sorted[tok_begin..tok_end)
        uint32_t tok_end;
        uint8_t byte;         // the prefix's last byte
    };
    int32_t n_tokens = 0;
    std::vector<std::string> pieces;
    std::vector<int32_t> eog_tokens;
    std::vector<int32_t> sorted;  // ids with text, in byte order of their texts
    std::vector<Node> nodes;
    uint32_t max_depth = 0;
};

class GrammarMatcher {
public:
    // The number of parses followed at once; a text that needs more (a very ambiguous
    // grammar) is an error rather than unbounded memory, and the mask masks a token whose
    // text would need more.
    static constexpr size_t kMaxStacks = 1024;

    GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar, std::shared_ptr<const GrammarVocab> vocab);

    void reset();
    // Sets logits[id] to -inf for every token that cannot continue the text (ids past the
    // vocabulary too); end-of-generation tokens stay only where the grammar may end.
    // Returns how many tokens stay. Throws when none does.
    size_t apply(float* logits, int32_t n_vocab);
    // Advances past a token (an end-of-generation token: where the grammar may end).
    // Throws, leaving the state as it was, when the token cannot continue the text.
    void accept_token(int32_t token);
    void accept_bytes(std::string_view bytes);
    // The text so far is a complete match (no partial UTF-8 character pending).
    bool can_end() const;
    // It is complete and nothing may follow, or an end-of-generation token was accepted.
    bool is_done() const;
    bool has_vocab() const { return vocab_ != nullptr; }

private:
    static constexpr uint32_t kNone = UINT32_MAX;
    struct Frame {             // one entry of a parse stack, linked to the entry below it
        uint32_t pos;          // a position in grammar_->symbols
        uint32_t below;        // frames_ index, kNone at the bottom
    };
    struct Utf8 {              // a character whose first bytes have been seen
        uint32_t cp = 0;
        uint8_t need = 0;      // continuation bytes still to come
        uint8_t len = 0;       // bytes of the whole character
    };
    struct State {             // the parses after some text: tops_[begin, end) are their tops
        uint32_t begin = 0, end = 0;
        bool accepting = false;  // one parse has matched the whole grammar
        Utf8 utf8;
    };

    // Within one apply(): the characters that leave a state's parses as they were (in a
    // JSON string, nearly all do), so the walk reuses the state instead of expanding it
    // again at every node below. Keyed by the state's range of tops_, dropped when the walk
    // truncates that range. Non-ASCII characters sit in a small table, one per slot.
    static constexpr uint32_t kWideBits = 8;
    struct Loops {
        uint32_t begin = 0, end = 0;
        uint64_t same[2] = {0, 0};
        uint32_t wide[1u << kWideBits] = {};
    };
    static constexpr size_t kLoopSlots = 8;

    bool step_byte(const State& in, uint8_t byte, State& out, bool remember = false);
    bool advance_remembered(const State& in, uint32_t cp, State& out);
    bool same_parses(const State& a, const State& b) const;
    void advance(const State& in, uint32_t cp, State& out);
    void expand(uint32_t pos, uint32_t below, State& out, uint32_t depth);
    bool same_stack(uint32_t a, uint32_t b) const;
    bool partial_possible(const State& s) const;
    void keep(const State& s);  // makes s the current state, its frames copied compactly

    std::shared_ptr<const CompiledGrammar> grammar_;
    std::shared_ptr<const GrammarVocab> vocab_;
    std::vector<Frame> frames_;   // the current state's frames first, scratch above them
    std::vector<uint32_t> tops_;  // likewise
    State current_;
    bool done_ = false;
    // scratch of apply(), kept to spare allocations per token
    std::vector<State> walk_;
    std::vector<std::pair<uint32_t, uint32_t>> marks_;  // frames_/tops_ sizes per depth
    std::vector<uint8_t> allowed_;
    std::vector<uint32_t> remap_;
    Loops loops_[kLoopSlots];
    size_t n_loops_ = 0;
    bool in_walk_ = false;   // apply() is walking: too many parses masks a token, no error
    bool overflow_ = false;  // the step just taken needed too many parses
};

}  // namespace ember
