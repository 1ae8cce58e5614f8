#include "sample/gbnf.h"

#include <algorithm>
#include <unordered_map>

#include "core/error.h"

namespace ember {

void CharSet::finish() {
    ascii[0] = ascii[1] = 0;
    for (uint32_t cp = 0; cp < 128; ++cp) {
        bool in = false;
        for (const auto& r : ranges)
            if (cp >= r.first && cp <= r.second) {
                in = true;
                break;
            }
        if (in != negated) ascii[cp >> 6] |= uint64_t(1) << (cp & 63);
    }
}

bool CharSet::intersects(uint32_t lo, uint32_t hi) const {
    for (const auto& r : ranges) {
        if (!negated && r.first <= hi && r.second >= lo) return true;
        if (negated && r.first <= lo && r.second >= hi) return false;
    }
    return negated;
}

namespace {

struct DraftRule {
    std::string name;
    bool defined = false;
    size_t first_use = 0;  // where an undefined rule was first referenced
    size_t defined_at = 0;  // where its definition starts (a generated rule: its group's)
    std::vector<std::vector<Symbol>> alts;
};

bool is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_';
}

class Parser {
public:
    explicit Parser(std::string_view src) : src_(src) {}

    CompiledGrammar parse(std::string_view root_name) {
        skip_space();
        if (pos_ >= src_.size()) error_at(pos_, "the grammar is empty");
        while (pos_ < src_.size()) {
            parse_rule();
            skip_space();
        }
        for (const DraftRule& r : rules_)
            if (!r.defined) error_at(r.first_use, "rule '" + r.name + "' is used but never defined");
        const auto root = ids_.find(std::string(root_name));
        if (root == ids_.end()) fail(EMBER_ERR_INVALID_ARGUMENT, "the grammar has no rule '" + std::string(root_name) + "'");
        CompiledGrammar g = compile();
        g.root = root->second;
        check_left_recursion(g);
        return g;
    }

private:
    [[noreturn]] void error_at(size_t at, const std::string& what) const {
        size_t line = 1, column = 1;
        for (size_t i = 0; i < at && i < src_.size(); ++i) {
            if (src_[i] == '\n') {
                ++line;
                column = 1;
            } else if (((unsigned char)src_[i] & 0xC0) != 0x80) {
                ++column;  // columns count characters, not bytes
            }
        }
        fail(EMBER_ERR_INVALID_ARGUMENT, "grammar line " + std::to_string(line) + ", column " + std::to_string(column) + ": " + what);
    }

    char peek(size_t ahead = 0) const { return pos_ + ahead < src_.size() ? src_[pos_ + ahead] : '\0'; }
    bool at_end() const { return pos_ >= src_.size(); }

    // Blanks, newlines and # comments. A rule ends where the next `name ::=` starts, so
    // newlines are blanks like any other (alternatives may continue on the next line).
    void skip_space() {
        while (!at_end()) {
            const char c = peek();
            if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
                ++pos_;
            } else if (c == '#') {
                while (!at_end() && peek() != '\n') ++pos_;
            } else {
                break;
            }
        }
    }

    size_t name_length(size_t at) const {
        size_t n = 0;
        while (at + n < src_.size() && is_name_char(src_[at + n])) ++n;
        return n;
    }

    bool at_rule_start() const {
        const size_t n = name_length(pos_);
        if (n == 0) return false;
        size_t i = pos_ + n;
        while (i < src_.size() && (src_[i] == ' ' || src_[i] == '\t' || src_[i] == '\r' || src_[i] == '\n')) ++i;
        return src_.substr(i, 3) == "::=";
    }

    uint32_t rule_id(const std::string& name, size_t used_at) {
        const auto it = ids_.find(name);
        if (it != ids_.end()) return it->second;
        const uint32_t id = (uint32_t)rules_.size();
        rules_.push_back(DraftRule{name, false, used_at, 0, {}});
        ids_.emplace(name, id);
        return id;
    }

    uint32_t new_rule(const std::string& base, std::vector<std::vector<Symbol>> alts) {
        std::string name;
        do {
            name = base + "_" + std::to_string(++generated_);
        } while (ids_.count(name));
        const uint32_t id = rule_id(name, pos_);
        rules_[id].defined = true;
        rules_[id].defined_at = group_at_;
        rules_[id].alts = std::move(alts);
        return id;
    }

    void parse_rule() {
        const size_t start = pos_;
        const size_t n = name_length(pos_);
        if (n == 0) error_at(pos_, "expected a rule name");
        const std::string name(src_.substr(pos_, n));
        pos_ += n;
        skip_space();
        if (src_.substr(pos_, 3) != "::=") error_at(pos_, "expected '::=' after rule name '" + name + "'");
        pos_ += 3;
        const uint32_t id = rule_id(name, start);
        if (rules_[id].defined) error_at(start, "rule '" + name + "' is defined twice");
        current_ = name;
        rules_[id].defined_at = start;
        auto alts = parse_alternatives(0);
        rules_[id].defined = true;
        rules_[id].alts = std::move(alts);
    }

    std::vector<std::vector<Symbol>> parse_alternatives(uint32_t depth) {
        std::vector<std::vector<Symbol>> alts;
        alts.push_back(parse_sequence(depth));
        while (peek() == '|') {
            ++pos_;
            alts.push_back(parse_sequence(depth));
        }
        return alts;
    }

    std::vector<Symbol> parse_sequence(uint32_t depth) {
        std::vector<Symbol> seq;
        for (;;) {
            skip_space();
            const char c = peek();
            if (at_end() || c == '|' || c == ')') break;
            if (depth == 0 && at_rule_start()) break;
            const size_t at = pos_;
            std::vector<Symbol> element = parse_element(depth);
            skip_space();
            group_at_ = at;
            if (peek() == '*' || peek() == '+' || peek() == '?' || peek() == '{') element = parse_repetition(std::move(element));
            seq.insert(seq.end(), element.begin(), element.end());
            n_symbols_ += element.size();
            if (n_symbols_ > kGbnfMaxSymbols) error_at(pos_, "the grammar is too large");
        }
        return seq;
    }

    Symbol char_symbol(CharSet set) {
        set.finish();
        charsets_.push_back(std::move(set));
        return Symbol{SymbolKind::Char, (uint32_t)charsets_.size() - 1};
    }

    std::vector<Symbol> parse_element(uint32_t depth) {
        const size_t start = pos_;
        const char c = peek();
        if (c == '"') {
            ++pos_;
            std::vector<Symbol> seq;
            while (peek() != '"') {
                if (at_end() || peek() == '\n') error_at(start, "string literal is not closed");
                const uint32_t cp = read_char();
                CharSet s;
                s.ranges.push_back({cp, cp});
                seq.push_back(char_symbol(std::move(s)));
            }
            ++pos_;
            return seq;
        }
        if (c == '[') {
            ++pos_;
            CharSet s;
            if (peek() == '^') {
                s.negated = true;
                ++pos_;
            }
            while (peek() != ']') {
                if (at_end() || peek() == '\n') error_at(start, "character class is not closed");
                const uint32_t lo = read_char();
                uint32_t hi = lo;
                if (peek() == '-' && peek(1) != ']' && peek(1) != '\0') {
                    ++pos_;
                    const size_t hi_at = pos_;
                    hi = read_char();
                    if (hi < lo) error_at(hi_at, "range end is below its start");
                }
                s.ranges.push_back({lo, hi});
            }
            ++pos_;
            return {char_symbol(std::move(s))};
        }
        if (c == '.') {
            ++pos_;
            CharSet any;
            any.negated = true;
            return {char_symbol(std::move(any))};
        }
        if (c == '(') {
            if (depth + 1 > kGbnfMaxNesting) error_at(pos_, "parentheses nested too deeply");
            ++pos_;
            auto alts = parse_alternatives(depth + 1);
            if (peek() != ')') error_at(start, "'(' is not closed");
            ++pos_;
            group_at_ = start;
            return {Symbol{SymbolKind::Rule, new_rule(current_, std::move(alts))}};
        }
        if (is_name_char(c)) {
            const size_t n = name_length(pos_);
            const std::string name(src_.substr(pos_, n));
            pos_ += n;
            return {Symbol{SymbolKind::Rule, rule_id(name, start)}};
        }
        if (c == '<') error_at(pos_, "token references (<...>) are not supported");
        error_at(pos_, std::string("unexpected '") + c + "'");
    }

    uint32_t parse_count() {
        const size_t start = pos_;
        uint64_t v = 0;
        if (!(peek() >= '0' && peek() <= '9')) error_at(pos_, "expected a number in {m,n}");
        while (peek() >= '0' && peek() <= '9') {
            v = v * 10 + (uint64_t)(peek() - '0');
            if (v > kGbnfMaxRepeat) error_at(start, "repetition count above " + std::to_string(kGbnfMaxRepeat));
            ++pos_;
        }
        return (uint32_t)v;
    }

    // x* -> R ::= x R | ""   x+ -> x R   x? -> R ::= x | ""   x{m,n} -> x..x (m) then n-m
    // nested optionals, so every rule stays right-recursive and the matcher's stacks flat.
    std::vector<Symbol> parse_repetition(std::vector<Symbol> element) {
        if (element.size() != 1) element = {Symbol{SymbolKind::Rule, new_rule(current_, {element})}};
        const Symbol x = element[0];
        const size_t start = pos_;
        uint32_t min = 0, max = 0;
        bool unbounded = false;
        const char op = peek();
        ++pos_;
        if (op == '*') {
            unbounded = true;
        } else if (op == '+') {
            min = 1;
            unbounded = true;
        } else if (op == '?') {
            max = 1;
        } else {  // {m}, {m,}, {m,n}
            skip_space();
            min = max = parse_count();
            skip_space();
            if (peek() == ',') {
                ++pos_;
                skip_space();
                if (peek() == '}') {
                    unbounded = true;
                } else {
                    max = parse_count();
                    if (max < min) error_at(start, "{m,n} with n below m");
                }
                skip_space();
            }
            if (peek() != '}') error_at(start, "'{' is not closed");
            ++pos_;
        }
        std::vector<Symbol> out(min, x);
        if (unbounded) {
            const uint32_t r = new_rule(current_, {});
            rules_[r].alts = {{x, Symbol{SymbolKind::Rule, r}}, {}};
            out.push_back(Symbol{SymbolKind::Rule, r});
        } else if (max > min) {
            uint32_t tail = new_rule(current_, {{x}, {}});
            for (uint32_t i = min + 1; i < max; ++i) tail = new_rule(current_, {{x, Symbol{SymbolKind::Rule, tail}}, {}});
            out.push_back(Symbol{SymbolKind::Rule, tail});
        }
        if (out.empty()) out = {Symbol{SymbolKind::Rule, new_rule(current_, {{}})}};  // x{0}
        return out;
    }

    uint32_t read_hex(size_t digits, size_t start) {
        uint32_t v = 0;
        for (size_t i = 0; i < digits; ++i) {
            const char c = peek();
            uint32_t d;
            if (c >= '0' && c <= '9') d = (uint32_t)(c - '0');
            else if (c >= 'a' && c <= 'f') d = (uint32_t)(c - 'a' + 10);
            else if (c >= 'A' && c <= 'F') d = (uint32_t)(c - 'A' + 10);
            else error_at(start, "escape needs " + std::to_string(digits) + " hex digits");
            v = v * 16 + d;
            ++pos_;
        }
        if (v > 0x10FFFF) error_at(start, "code point above U+10FFFF");
        return v;
    }

    // One character of a literal or a class: an escape or a UTF-8 encoded code point.
    uint32_t read_char() {
        const size_t start = pos_;
        const unsigned char c = (unsigned char)peek();
        if (c == '\\') {
            ++pos_;
            if (at_end()) error_at(start, "a backslash ends the grammar");
            const char e = peek();
            ++pos_;
            switch (e) {
                case 'n': return '\n';
                case 'r': return '\r';
                case 't': return '\t';
                case '0': return 0;
                case '\\': case '"': case '\'': case '[': case ']': case '-': case '^': case '/': case '.':
                    return (uint32_t)(unsigned char)e;
                case 'x': return read_hex(2, start);
                case 'u': return read_hex(4, start);
                case 'U': return read_hex(8, start);
                default: error_at(start, std::string("unknown escape '\\") + e + "'");
            }
        }
        size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
        if (len == 0 || pos_ + len > src_.size()) error_at(start, "invalid UTF-8 in the grammar");
        uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1Fu) : len == 3 ? (c & 0x0Fu) : (c & 0x07u);
        for (size_t i = 1; i < len; ++i) {
            const unsigned char b = (unsigned char)src_[pos_ + i];
            if ((b & 0xC0) != 0x80) error_at(start, "invalid UTF-8 in the grammar");
            cp = (cp << 6) | (b & 0x3Fu);
        }
        pos_ += len;
        return cp;
    }

    CompiledGrammar compile() {
        CompiledGrammar g;
        g.charsets = std::move(charsets_);
        g.rule_alts.resize(rules_.size());
        for (size_t r = 0; r < rules_.size(); ++r) {
            g.rule_names.push_back(rules_[r].name);
            for (const auto& alt : rules_[r].alts) {
                g.rule_alts[r].push_back((uint32_t)g.symbols.size());
                g.symbols.insert(g.symbols.end(), alt.begin(), alt.end());
                g.symbols.push_back(Symbol{SymbolKind::End, 0});
            }
        }
        return g;
    }

    // A rule that can reach itself before matching any character (directly, through other
    // rules, or past rules that can match nothing) would make the matcher expand forever.
    void check_left_recursion(const CompiledGrammar& g) {
        const size_t n = g.rule_alts.size();
        std::vector<char> nullable(n, 0);
        for (bool changed = true; changed;) {
            changed = false;
            for (size_t r = 0; r < n; ++r) {
                if (nullable[r]) continue;
                for (uint32_t a : g.rule_alts[r]) {
                    bool all = true;
                    for (uint32_t p = a; g.symbols[p].kind != SymbolKind::End; ++p)
                        if (g.symbols[p].kind == SymbolKind::Char || !nullable[g.symbols[p].index]) {
                            all = false;
                            break;
                        }
                    if (all) {
                        nullable[r] = 1;
                        changed = true;
                        break;
                    }
                }
            }
        }
        std::vector<std::vector<uint32_t>> leftmost(n);  // rules reachable before a character
        for (size_t r = 0; r < n; ++r)
            for (uint32_t a : g.rule_alts[r])
                for (uint32_t p = a; g.symbols[p].kind == SymbolKind::Rule; ++p) {
                    leftmost[r].push_back(g.symbols[p].index);
                    if (!nullable[g.symbols[p].index]) break;
                }
        // iterative depth-first search, 0 unvisited, 1 on the path, 2 done
        std::vector<char> color(n, 0);
        std::vector<std::pair<uint32_t, size_t>> path;
        for (uint32_t start = 0; start < n; ++start) {
            if (color[start]) continue;
            path.push_back({start, 0});
            color[start] = 1;
            while (!path.empty()) {
                auto& [r, next] = path.back();
                if (next == leftmost[r].size()) {
                    color[r] = 2;
                    path.pop_back();
                    continue;
                }
                const uint32_t s = leftmost[r][next++];
                if (color[s] == 1) {
                    std::string cycle;
                    bool on = false;
                    for (const auto& step : path) {
                        if (step.first == s) on = true;
                        if (on) cycle += g.rule_names[step.first] + " -> ";
                    }
                    cycle += g.rule_names[s];
                    error_at(rules_[s].defined_at,
                         "rule '" + g.rule_names[s] + "' is left-recursive (" + cycle +
                             ", before any character is matched); rewrite it with repetition, "
                             "e.g. list ::= item (\",\" item)*, and make sure no repeated group "
                             "can match the empty string");
                }
                if (color[s] == 0) {
                    color[s] = 1;
                    path.push_back({s, 0});
                }
            }
        }
    }

    std::string_view src_;
    size_t pos_ = 0;
    std::vector<DraftRule> rules_;
    std::unordered_map<std::string, uint32_t> ids_;
    std::vector<CharSet> charsets_;
    std::string current_ = "rule";  // the rule being parsed: generated rules are named after it
    uint32_t generated_ = 0;
    size_t n_symbols_ = 0;
    size_t group_at_ = 0;  // where the element being parsed starts
};

}  // namespace

CompiledGrammar parse_gbnf(std::string_view text, std::string_view root) {
    return Parser(text).parse(root.empty() ? std::string_view("root") : root);
}

}  // namespace ember
