// GBNF grammars (llama.cpp's notation for constrained sampling), parsed and compiled into
// flat symbol sequences that the matcher (grammar.h) walks one code point at a time.
//
//     root  ::= "{" ws pair ("," ws pair)* "}"     # rules, literals, groups, repetition
//     pair  ::= [a-z]+ ws ":" ws ( [0-9]{1,3} | "null" )
//     ws    ::= [ \t\n]*
//
// Repetitions and groups become rules of their own ("pair_3"), so every alternative is a
// plain sequence of character sets and rule references.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ember {

// A set of Unicode code points: inclusive ranges, maybe negated ([^...], and `.` as the
// negation of nothing).
struct CharSet {
    bool negated = false;
    std::vector<std::pair<uint32_t, uint32_t>> ranges;
    uint64_t ascii[2] = {0, 0};  // membership of code points 0..127, negation applied

    void finish();  // fills ascii from ranges and negated
    bool contains(uint32_t cp) const {
        if (cp < 128) return (ascii[cp >> 6] >> (cp & 63)) & 1u;
        bool in = false;
        for (const auto& r : ranges)
            if (cp >= r.first && cp <= r.second) {
                in = true;
                break;
            }
        return in != negated;
    }
    // Whether some code point of [lo, hi] may be in the set (a character whose first bytes
    // are known). For a negated set this says yes unless one range covers all of [lo, hi].
    bool intersects(uint32_t lo, uint32_t hi) const;
};

enum class SymbolKind : uint8_t { End, Char, Rule };

struct Symbol {
    SymbolKind kind;
    uint32_t index;  // Char: into CompiledGrammar::charsets; Rule: a rule id; End: 0
};

struct CompiledGrammar {
    std::vector<Symbol> symbols;                   // every alternative, each closed by an End
    std::vector<CharSet> charsets;
    std::vector<std::vector<uint32_t>> rule_alts;  // per rule: where its alternatives start
    std::vector<std::string> rule_names;
    uint32_t root = 0;
};

// Limits that keep a hostile grammar from taking the process's memory or stack.
constexpr uint32_t kGbnfMaxRepeat = 10000;       // the largest m or n of {m,n}
constexpr size_t kGbnfMaxSymbols = 1u << 22;     // symbols after repetitions are unrolled
constexpr uint32_t kGbnfMaxNesting = 200;        // parentheses inside parentheses

// Throws ember::Error (EMBER_ERR_INVALID_ARGUMENT) with "line L, column C: what" for bad
// syntax, an undefined rule or a left-recursive one (which no stack-based matcher can
// walk), and for a missing root rule.
CompiledGrammar parse_gbnf(std::string_view text, std::string_view root = "root");

}  // namespace ember
