#include "sample/grammar.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>

#include "core/error.h"

namespace ember {

std::shared_ptr<const GrammarVocab> GrammarVocab::build(std::vector<std::string> pieces,
                                                        const std::vector<bool>& eog) {
    auto v = std::make_shared<GrammarVocab>();
    v->n_tokens = (int32_t)pieces.size();
    v->pieces = std::move(pieces);
    for (int32_t id = 0; id < v->n_tokens; ++id) {
        if ((size_t)id < eog.size() && eog[(size_t)id]) v->eog_tokens.push_back(id);
        else if (!v->pieces[(size_t)id].empty()) v->sorted.push_back(id);
    }
    const auto& p = v->pieces;
    std::sort(v->sorted.begin(), v->sorted.end(), [&](int32_t a, int32_t b) {
        return p[(size_t)a] < p[(size_t)b] || (p[(size_t)a] == p[(size_t)b] && a < b);
    });
    // Depth-first order falls out of the sorted texts: each text opens the nodes of the
    // bytes it does not share with the one before, after closing those the two differ in.
    v->nodes.push_back(Node{0, 0, 0, 0, 0});
    std::vector<uint32_t> path = {0};  // path[d]: the open node of depth d
    const std::string* prev = nullptr;
    for (uint32_t k = 0; k < (uint32_t)v->sorted.size(); ++k) {
        const std::string& text = p[(size_t)v->sorted[k]];
        size_t common = 0;
        if (prev) {
            const size_t n = std::min(prev->size(), text.size());
            while (common < n && (*prev)[common] == text[common]) ++common;
        }
        while (path.size() > common + 1) {
            v->nodes[path.back()].end = (uint32_t)v->nodes.size();
            path.pop_back();
        }
        for (size_t d = common; d < text.size(); ++d) {
            path.push_back((uint32_t)v->nodes.size());
            v->nodes.push_back(Node{0, (uint32_t)(d + 1), k, k, (uint8_t)text[d]});
        }
        Node& at = v->nodes[path.back()];
        if (at.tok_begin == at.tok_end) at.tok_begin = k;  // equal texts are neighbours
        at.tok_end = k + 1;
        v->max_depth = std::max(v->max_depth, (uint32_t)text.size());
        prev = &text;
    }
    while (!path.empty()) {
        v->nodes[path.back()].end = (uint32_t)v->nodes.size();
        path.pop_back();
    }
    return v;
}

namespace {

// Past this many nested expansions a grammar is refused (the C++ stack is finite, and a
// grammar that needs that many is not one a person or a schema converter writes).
constexpr uint32_t kMaxExpandDepth = 2000;

}  // namespace

GrammarMatcher::GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar,
                               std::shared_ptr<const GrammarVocab> vocab)
    : grammar_(std::move(grammar)), vocab_(std::move(vocab)) {
    reset();
}

void GrammarMatcher::reset() {
    frames_.clear();
    tops_.clear();
    done_ = false;
    State start;
    for (uint32_t alt : grammar_->rule_alts[grammar_->root]) expand(alt, kNone, start, 0);
    current_ = start;
}

bool GrammarMatcher::same_stack(uint32_t a, uint32_t b) const {
    while (a != b) {
        if (a == kNone || b == kNone || frames_[a].pos != frames_[b].pos) return false;
        a = frames_[a].below;
        b = frames_[b].below;
    }
    return true;
}

// Adds to out the parses that continue at pos with the stack `below` under it, expanded
// until each top is a character set (or the parse has matched the whole grammar).
void GrammarMatcher::expand(uint32_t pos, uint32_t below, State& out, uint32_t depth) {
    if (depth > kMaxExpandDepth)
        fail(EMBER_ERR_INVALID_ARGUMENT, "the grammar nests rules more than " + std::to_string(kMaxExpandDepth) +
                                             " deep before matching a character");
    const Symbol sym = grammar_->symbols[pos];
    if (sym.kind == SymbolKind::End) {
        if (below == kNone) {
            out.accepting = true;
            return;
        }
        const Frame f = frames_[below];
        expand(f.pos, f.below, out, depth + 1);
        return;
    }
    if (sym.kind == SymbolKind::Char) {
        for (uint32_t i = out.begin; i < out.end; ++i) {
            const Frame& t = frames_[tops_[i]];
            if (t.pos == pos && same_stack(t.below, below)) return;  // a parse already followed
        }
        if (out.end - out.begin >= kMaxStacks) {
            if (in_walk_) {  // the mask: that token is masked, the others still count
                overflow_ = true;
                return;
            }
            fail(EMBER_ERR_INVALID_ARGUMENT, "the grammar is too ambiguous: more than " + std::to_string(kMaxStacks) +
                                                 " parses of the text at once");
        }
        frames_.push_back(Frame{pos, below});
        tops_.push_back((uint32_t)frames_.size() - 1);
        out.end = (uint32_t)tops_.size();
        return;
    }
    // a rule: what follows it goes under its alternatives (nothing when the rule ends the
    // alternative, so right recursion does not grow the stack)
    uint32_t rest = below;
    if (grammar_->symbols[pos + 1].kind != SymbolKind::End) {
        frames_.push_back(Frame{pos + 1, below});
        rest = (uint32_t)frames_.size() - 1;
    }
    for (uint32_t alt : grammar_->rule_alts[sym.index]) expand(alt, rest, out, depth + 1);
}

void GrammarMatcher::advance(const State& in, uint32_t cp, State& out) {
    out = State{};
    out.begin = out.end = (uint32_t)tops_.size();
    for (uint32_t i = in.begin; i < in.end; ++i) {
        const Frame f = frames_[tops_[i]];
        if (grammar_->charsets[grammar_->symbols[f.pos].index].contains(cp)) expand(f.pos + 1, f.below, out, 0);
    }
}

bool GrammarMatcher::partial_possible(const State& s) const {
    const uint32_t shift = 6u * s.utf8.need;
    // the smallest character of each length: a shorter one written longer is invalid
    static constexpr uint32_t kMinOfLength[5] = {0, 0, 0x80, 0x800, 0x10000};
    const uint32_t lo = std::max(s.utf8.cp << shift, kMinOfLength[std::min<uint32_t>(s.utf8.len, 4u)]);
    const uint32_t hi = std::min((s.utf8.cp << shift) | ((1u << shift) - 1u), 0x10FFFFu);
    if (lo > hi) return false;
    for (uint32_t i = s.begin; i < s.end; ++i)
        if (grammar_->charsets[grammar_->symbols[frames_[tops_[i]].pos].index].intersects(lo, hi)) return true;
    return false;
}

bool GrammarMatcher::same_parses(const State& a, const State& b) const {
    if (a.accepting != b.accepting || a.end - a.begin != b.end - b.begin) return false;
    for (uint32_t i = b.begin; i < b.end; ++i) {
        const Frame& t = frames_[tops_[i]];
        bool found = false;
        for (uint32_t j = a.begin; j < a.end && !found; ++j) {
            const Frame& s = frames_[tops_[j]];
            found = s.pos == t.pos && same_stack(s.below, t.below);
        }
        if (!found) return false;
    }
    return true;  // as many parses, each of b's among a's (both sets hold no duplicates)
}

// Advances in by cp as advance() does; within the mask's walk a character that left the
// same parses as they were (the same tops, the same stacks under them) is remembered per
// state, and the next time the state itself is the answer: no expansion, no new frames.
bool GrammarMatcher::advance_remembered(const State& in, uint32_t cp, State& out) {
    Loops* slot = nullptr;
    for (size_t i = 0; i < n_loops_ && !slot; ++i)
        if (loops_[i].begin == in.begin && loops_[i].end == in.end) slot = &loops_[i];
    const size_t wide = (size_t)((cp * 2654435761u) >> (32 - kWideBits));
    if (slot) {
        const bool same = cp < 128 ? (slot->same[cp >> 6] >> (cp & 63)) & 1u : slot->wide[wide] == cp;
        if (same) {
            out = in;
            out.utf8 = Utf8{};
            return true;
        }
    }
    const size_t frames_before = frames_.size();
    advance(in, cp, out);
    if (in.begin == in.end) return out.begin != out.end || out.accepting;
    if (!same_parses(in, out)) return out.begin != out.end || out.accepting;
    if (!slot) {
        slot = &loops_[n_loops_ < kLoopSlots ? n_loops_++ : (size_t)(cp % kLoopSlots)];
        slot->begin = in.begin;
        slot->end = in.end;
        slot->same[0] = slot->same[1] = 0;
        std::fill(std::begin(slot->wide), std::end(slot->wide), 0u);  // 0: no character is ASCII here
    }
    if (cp < 128) slot->same[cp >> 6] |= uint64_t(1) << (cp & 63);
    else slot->wide[wide] = cp;
    frames_.resize(frames_before);
    tops_.resize(out.begin);
    out = in;
    out.utf8 = Utf8{};
    return true;
}

// One byte of text: a character's last byte advances the parses, an earlier one only
// checks that some parse may take a character that starts so. False: the text is dead.
// remember: the mask's walk (advance_remembered).
bool GrammarMatcher::step_byte(const State& in, uint8_t b, State& out, bool remember) {
    Utf8 u = in.utf8;
    uint32_t cp;
    if (u.need == 0) {
        if (b < 0x80) {
            cp = b;
        } else {
            if (b >= 0xC2 && b <= 0xDF) u = Utf8{b & 0x1Fu, 1, 2};
            else if (b >= 0xE0 && b <= 0xEF) u = Utf8{b & 0x0Fu, 2, 3};
            else if (b >= 0xF0 && b <= 0xF4) u = Utf8{b & 0x07u, 3, 4};
            else return false;
            out = in;
            out.accepting = false;
            out.utf8 = u;
            return partial_possible(out);
        }
    } else {
        if ((b & 0xC0) != 0x80) return false;
        u.cp = (u.cp << 6) | (b & 0x3Fu);
        if (--u.need > 0) {
            out = in;
            out.utf8 = u;
            return partial_possible(out);
        }
        cp = u.cp;
        const bool valid = u.len == 2 || (u.len == 3 && cp >= 0x800 && (cp < 0xD800 || cp > 0xDFFF)) ||
                           (u.len == 4 && cp >= 0x10000 && cp <= 0x10FFFF);
        if (!valid) return false;
    }
    if (remember) return advance_remembered(in, cp, out);
    advance(in, cp, out);
    return out.begin != out.end || out.accepting;
}

size_t GrammarMatcher::apply(float* logits, int32_t n_vocab) {
    if (!vocab_) fail(EMBER_ERR_INVALID_ARGUMENT, "the grammar was made without a model: it has no vocabulary to mask");
    const GrammarVocab& v = *vocab_;
    allowed_.assign((size_t)v.n_tokens, 0);
    if (!done_) {
        const size_t base_frames = frames_.size(), base_tops = tops_.size();
        walk_.resize((size_t)v.max_depth + 1);
        marks_.resize((size_t)v.max_depth + 1);
        walk_[0] = current_;
        marks_[0] = {(uint32_t)base_frames, (uint32_t)base_tops};
        n_loops_ = 0;
        in_walk_ = true;
        try {
            const size_t n_nodes = v.nodes.size();
            for (size_t i = 1; i < n_nodes;) {
                const GrammarVocab::Node& node = v.nodes[i];
                const uint32_t d = node.depth;
                frames_.resize(marks_[d - 1].first);  // the scratch of the parent's siblings goes
                tops_.resize(marks_[d - 1].second);
                for (size_t k = 0; k < n_loops_;) {  // states whose parses were just dropped
                    if (loops_[k].end > tops_.size()) loops_[k] = loops_[--n_loops_];
                    else ++k;
                }
                State& s = walk_[d];
                overflow_ = false;
                if (!step_byte(walk_[d - 1], node.byte, s, true) || overflow_) {
                    i = node.end;  // no text that starts so can continue
                    continue;
                }
                marks_[d] = {(uint32_t)frames_.size(), (uint32_t)tops_.size()};
                if (node.tok_begin < node.tok_end)
                    for (uint32_t k = node.tok_begin; k < node.tok_end; ++k) allowed_[(size_t)v.sorted[k]] = 1;
                i = s.begin != s.end ? i + 1 : (size_t)node.end;  // complete and nothing may follow: no longer text
            }
        } catch (...) {
            in_walk_ = false;
            frames_.resize(base_frames);
            tops_.resize(base_tops);
            throw;
        }
        in_walk_ = false;
        frames_.resize(base_frames);
        tops_.resize(base_tops);
    }
    if (can_end() || done_)
        for (int32_t id : v.eog_tokens) allowed_[(size_t)id] = 1;
    size_t n_allowed = 0;
    const float minus_inf = -std::numeric_limits<float>::infinity();
    for (int32_t id = 0; id < n_vocab; ++id) {
        if (id < v.n_tokens && allowed_[(size_t)id]) ++n_allowed;
        else logits[id] = minus_inf;
    }
    if (n_allowed == 0)
        fail(EMBER_ERR_INVALID_ARGUMENT, "no token of the vocabulary can continue the grammar here");
    return n_allowed;
}

void GrammarMatcher::keep(const State& s) {
    std::vector<Frame> frames;
    std::vector<uint32_t> tops;
    std::vector<uint32_t> chain;
    remap_.assign(frames_.size(), kNone);
    for (uint32_t i = s.begin; i < s.end; ++i) {
        uint32_t idx = tops_[i];
        chain.clear();
        while (idx != kNone && remap_[idx] == kNone) {
            chain.push_back(idx);
            idx = frames_[idx].below;
        }
        uint32_t below = idx == kNone ? kNone : remap_[idx];
        for (size_t c = chain.size(); c-- > 0;) {
            frames.push_back(Frame{frames_[chain[c]].pos, below});
            below = remap_[chain[c]] = (uint32_t)frames.size() - 1;
        }
        tops.push_back(below);
    }
    current_ = State{0, (uint32_t)tops.size(), s.accepting, s.utf8};
    frames_ = std::move(frames);
    tops_ = std::move(tops);
}

void GrammarMatcher::accept_bytes(std::string_view bytes) {
    if (done_) fail(EMBER_ERR_INVALID_ARGUMENT, "the grammar has already ended");
    const size_t base_frames = frames_.size(), base_tops = tops_.size();
    State s = current_, next;
    for (size_t i = 0; i < bytes.size(); ++i) {
        bool ok = false;
        try {
            ok = step_byte(s, (uint8_t)bytes[i], next);
        } catch (...) {
            frames_.resize(base_frames);
            tops_.resize(base_tops);
            throw;
        }
        if (!ok) {
            frames_.resize(base_frames);
            tops_.resize(base_tops);
            fail(EMBER_ERR_INVALID_ARGUMENT, "the text cannot continue the grammar (at byte " + std::to_string(i) + ")");
        }
        s = next;
    }
    keep(s);
}

void GrammarMatcher::accept_token(int32_t token) {
    if (!vocab_) fail(EMBER_ERR_INVALID_ARGUMENT, "the grammar was made without a model: it takes text, not tokens");
    if (token < 0 || token >= vocab_->n_tokens) fail(EMBER_ERR_INVALID_ARGUMENT, "token id out of range");
    if (std::find(vocab_->eog_tokens.begin(), vocab_->eog_tokens.end(), token) != vocab_->eog_tokens.end()) {
        if (!can_end() && !done_)
            fail(EMBER_ERR_INVALID_ARGUMENT, "the generation cannot end here: the grammar is not complete");
        done_ = true;
        return;
    }
    const std::string& piece = vocab_->pieces[(size_t)token];
    if (piece.empty()) fail(EMBER_ERR_INVALID_ARGUMENT, "token " + std::to_string(token) + " has no text a grammar can match");
    accept_bytes(piece);
}

bool GrammarMatcher::can_end() const { return current_.accepting && current_.utf8.need == 0; }

bool GrammarMatcher::is_done() const { return done_ || (can_end() && current_.begin == current_.end); }

}  // namespace ember
