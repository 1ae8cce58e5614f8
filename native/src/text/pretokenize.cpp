// Each pre-tokenizer is a list of split steps applied in order; a step splits
// every current piece into regex matches and the gaps between them (the
// behaviour of HF "Split" pre-tokenizers with "Isolated" matches). Steps are
// matchers written by hand against Unicode categories: a matcher answers "does
// the regex match at exactly this position, and where does the match end",
// following the regex's leftmost-first alternation and greedy backtracking.
//
// Character classes follow the reference implementation (llama.cpp) bit for
// bit where it deviates from a full Unicode regex engine: \p{Lu}/\p{Ll} there
// only distinguish ASCII case, and in patterns with literal code point ranges
// the non-ASCII whitespace characters never match a range.
#include "text/pretokenize.h"

#include <cstddef>
#include <unordered_map>

#include "text/unicode.h"

namespace ember {

namespace {

constexpr uint32_t kEnd = 0xFFFFFFFF;  // reads past the piece (regex end of input)

// One piece of the code point array; positions are absolute indices into c.
struct Span {
    const uint32_t* c;
    size_t e;
    uint32_t at(size_t i) const { return i < e ? c[i] : kEnd; }
};

inline bool ws(uint32_t x) { return x != kEnd && unicode::is_whitespace(x); }
inline bool letter(uint32_t x) { return unicode::is_letter(x); }  // false for kEnd
inline bool number(uint32_t x) { return unicode::is_number(x); }
inline bool punct(uint32_t x) { return unicode::is_punct(x); }
inline bool mark(uint32_t x) { return unicode::is_mark(x); }
inline bool crlf(uint32_t x) { return x == '\r' || x == '\n'; }
inline bool ascii_digit(uint32_t x) { return x >= '0' && x <= '9'; }
// [^\s\p{L}\p{N}]
inline bool other(uint32_t x) { return x != kEnd && !ws(x) && !letter(x) && !number(x); }

// Literal ranges in patterns without \p{..} never see non-ASCII whitespace
// (the reference folds it to \v before matching).
struct CpRange { uint32_t lo, hi; };
template <size_t N>
bool in_ranges(uint32_t x, const CpRange (&r)[N]) {
    if (x == kEnd || (x > 0x7F && ws(x))) return false;
    for (const CpRange& cr : r)
        if (x >= cr.lo && x <= cr.hi) return true;
    return false;
}

// ---------------------------------------------------------------- matchers
// A matcher returns the end of the match that starts at pos, or pos for none.

// 's|'t|'re|'ve|'m|'ll|'d, optionally ASCII case-insensitive
size_t contraction(const Span& s, size_t pos, bool any_case) {
    if (s.at(pos) != '\'') return pos;
    auto lc = [any_case](uint32_t c) { return (any_case && c >= 'A' && c <= 'Z') ? c + 32 : c; };
    const uint32_t a = lc(s.at(pos + 1));
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return pos + 2;
    const uint32_t b = lc(s.at(pos + 2));
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return pos + 3;
    return pos;
}

// \s+(?!\S)|\s+
size_t whitespace_run(const Span& s, size_t pos) {
    size_t n = 0;
    while (ws(s.at(pos + n))) ++n;
    if (n == 0) return pos;
    if (n > 1 && s.at(pos + n) != kEnd) return pos + n - 1;  // leave one for the next word
    return pos + n;
}

// \s*[\r\n]+|\s+(?!\S)|\s+ : a whitespace run up to and including its last
// line break; without one, as whitespace_run.
size_t newline_whitespace(const Span& s, size_t pos) {
    size_t after_nl = 0;
    for (size_t p = pos; ws(s.at(p)); ++p)
        if (crlf(s.at(p))) after_nl = p + 1;
    return after_nl ? after_nl : whitespace_run(s, pos);
}

// \s*[\r\n]+|\s{512}(?!\S)|\s{256}(?!\S)|...|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1}
size_t jais2_whitespace(const Span& s, size_t pos) {
    size_t n = 0, after_nl = 0;
    for (; ws(s.at(pos + n)); ++n)
        if (crlf(s.at(pos + n))) after_nl = pos + n + 1;
    if (after_nl) return after_nl;
    if (n == 0) return pos;
    auto fits = [&](size_t k) { return n > k || (n == k && s.at(pos + k) == kEnd); };
    for (size_t k = 512; k >= 4; k /= 2)
        if (fits(k)) return pos + k;
    return fits(2) ? pos + 2 : pos + 1;
}

template <class Pred>
size_t run(const Span& s, size_t p, Pred pred) {
    while (pred(s.at(p))) ++p;
    return p;
}

// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
size_t m_gpt2(const Span& s, size_t pos) {
    const size_t e = contraction(s, pos, false);
    if (e > pos) return e;
    const size_t p = pos + (s.at(pos) == ' ');
    const uint32_t c2 = s.at(p);
    if (letter(c2)) return run(s, p, letter);
    if (number(c2)) return run(s, p, number);
    if (other(c2)) return run(s, p, other);
    return whitespace_run(s, pos);
}

struct ModernOpts {
    size_t max_digits;         // \p{N}{1,max}
    bool marks;                // letter runs are [\p{L}\p{M}]+ (Qwen 3.5)
    bool punct_eats_newlines;  // ... ?[^\s\p{L}\p{N}]+[\r\n]*
    bool pow2_whitespace;      // \s{512}(?!\S)|...|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1} (Jais 2)
};

// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// and its relatives (see ModernOpts).
size_t m_modern(const Span& s, size_t pos, const ModernOpts& o) {
    const size_t e = contraction(s, pos, true);
    if (e > pos) return e;
    const uint32_t c = s.at(pos);
    auto word = [&o](uint32_t x) { return letter(x) || (o.marks && mark(x)); };
    if (!crlf(c) && !number(c) && (word(c) || word(s.at(pos + 1)))) return run(s, pos + 1, word);
    if (number(c)) {
        size_t p = pos;
        while (p - pos < o.max_digits && number(s.at(p))) ++p;
        return p;
    }
    auto sym = [&o](uint32_t x) { return other(x) && !(o.marks && mark(x)); };
    size_t p = pos + (c == ' ');
    if (sym(s.at(p))) {
        p = run(s, p, sym);
        if (o.punct_eats_newlines) p = run(s, p, crlf);
        return p;
    }
    if (o.pow2_whitespace) return jais2_whitespace(s, pos);
    return newline_whitespace(s, pos);
}

const ModernOpts kLlama3{3, false, true, false};
const ModernOpts kQwen2{1, false, true, false};
const ModernOpts kQwen35{1, true, true, false};
const ModernOpts kSeedCoder{1, false, false, false};
const ModernOpts kJais2{3, false, true, true};

// Case-split words (Tekken, GPT-4o):
//   [^\r\n\p{L}\p{N}]?U*L+(contraction)? | [^\r\n\p{L}\p{N}]?U+L*(contraction)?
// where U = letter but not a-z and L = letter but not A-Z, so every non-ASCII
// letter counts as both (the reference's case test is ASCII only).
inline bool up(uint32_t x) { return letter(x) && !(x >= 'a' && x <= 'z'); }
inline bool lo(uint32_t x) { return letter(x) && !(x >= 'A' && x <= 'Z'); }

size_t cased_word(const Span& s, size_t pos, bool contractions) {
    const uint32_t c = s.at(pos);
    const size_t p = pos + ((!crlf(c) && !letter(c) && !number(c)) ? 1 : 0);
    auto finish = [&](size_t q) { return contractions ? contraction(s, q, true) : q; };
    size_t k = 0;
    while (up(s.at(p + k))) ++k;
    // U* backtracks from its longest run until L+ can match at least once
    for (size_t j = k + 1; j-- > 0;) {
        const size_t q = run(s, p + j, lo);
        if (q > p + j) return finish(q);
    }
    if (k > 0) return finish(run(s, p + k, lo));
    return pos;
}

// shared tail: ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
size_t cased_tail(const Span& s, size_t pos) {
    size_t p = pos + (s.at(pos) == ' ');
    if (other(s.at(p))) {
        p = run(s, p, other);
        return run(s, p, [](uint32_t x) { return crlf(x) || x == '/'; });
    }
    return newline_whitespace(s, pos);
}

size_t m_tekken(const Span& s, size_t pos) {
    size_t e = cased_word(s, pos, false);
    if (e > pos) return e;
    if (number(s.at(pos))) return pos + 1;
    return cased_tail(s, pos);
}

size_t m_gpt4o(const Span& s, size_t pos) {
    size_t e = cased_word(s, pos, true);
    if (e > pos) return e;
    if (number(s.at(pos))) {
        size_t p = pos;
        while (p - pos < 3 && number(s.at(p))) ++p;
        return p;
    }
    return cased_tail(s, pos);
}

// [\p{P}\$\+<=>\^~\|]+ (with_backtick adds `)
size_t punct_run(const Span& s, size_t pos, bool with_backtick) {
    auto cls = [with_backtick](uint32_t x) {
        return punct(x) || x == '$' || x == '+' || x == '<' || x == '=' || x == '>' || x == '^' ||
               x == '~' || x == '|' || (with_backtick && x == '`');
    };
    return run(s, pos, cls);
}

size_t digit_triple(const Span& s, size_t pos) {
    return (ascii_digit(s.at(pos)) && ascii_digit(s.at(pos + 1)) && ascii_digit(s.at(pos + 2))) ? pos + 3 : pos;
}

size_t one_number(const Span& s, size_t pos) { return number(s.at(pos)) ? pos + 1 : pos; }
size_t number_run(const Span& s, size_t pos) { return run(s, pos, number); }
size_t one_crlf(const Span& s, size_t pos) { return crlf(s.at(pos)) ? pos + 1 : pos; }

// DeepSeek's literal classes (from its tokenizer.json), as code point ranges.
const CpRange kDeepseekLetters[] = {
    {0x41, 0x5A}, {0x61, 0x7A}, {0xB5, 0xB5}, {0xC0, 0xD6}, {0xD8, 0xF6}, {0xF8, 0x1BA}, {0x1BC, 0x1BF},
    {0x1C4, 0x293}, {0x295, 0x2AF}, {0x370, 0x373}, {0x376, 0x377}, {0x37B, 0x37D}, {0x37F, 0x37F},
    {0x386, 0x386}, {0x388, 0x38A}, {0x38C, 0x38C}, {0x38E, 0x3A1}, {0x3A3, 0x3F5}, {0x3F7, 0x481},
    {0x48A, 0x52F}, {0x531, 0x556}, {0x10A0, 0x10C5}, {0x13A0, 0x13F5}, {0x13F8, 0x13FD},
    {0x1C90, 0x1CBA}, {0x1CBD, 0x1CBF}, {0x1D00, 0x1D2B}, {0x1D6B, 0x1D77}, {0x1D79, 0x1D9A},
    {0x1E00, 0x1F15}, {0x1F18, 0x1F1D}, {0x1F20, 0x1F45}, {0x1F48, 0x1F4D}, {0x1F50, 0x1F57},
    {0x1F59, 0x1F59}, {0x1F5B, 0x1F5B}, {0x1F5D, 0x1F5D}, {0x1F5F, 0x1F7D}, {0x1F80, 0x1FB4},
    {0x1FB6, 0x1FBC}, {0x1FBE, 0x1FBE}, {0x1FC2, 0x1FC4}, {0x1FC6, 0x1FCC}, {0x1FD0, 0x1FD3},
    {0x1FD6, 0x1FDB}, {0x1FE0, 0x1FEC}, {0x1FF2, 0x1FF4}, {0x1FF6, 0x1FFC}, {0x2102, 0x2102},
    {0x2107, 0x2107}, {0x210A, 0x2113}, {0x2115, 0x2115}, {0x2119, 0x211D}, {0x2124, 0x2124},
    {0x2126, 0x2126}, {0x2128, 0x2128}, {0x212A, 0x212D}, {0x212F, 0x2134}, {0x2139, 0x2139},
    {0x213C, 0x213F}, {0x2145, 0x2149}, {0x214E, 0x214E}, {0x2183, 0x2184}, {0x2C00, 0x2C7B},
    {0x2C7E, 0x2CE4}, {0x2CEB, 0x2CEE}, {0x2CF2, 0x2CF3}, {0xA640, 0xA66D}, {0xA680, 0xA69B},
    {0xA722, 0xA76F}, {0xA771, 0xA787}, {0xA78B, 0xA78E}, {0xAB70, 0xABBF}, {0xFB00, 0xFB06},
    {0xFB13, 0xFB17}, {0xFF21, 0xFF3A}, {0xFF41, 0xFF5A}, {0x10400, 0x1044F}, {0x104B0, 0x104D3},
    {0x104D8, 0x104FB}, {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943},
};
const CpRange kDeepseekPunct[] = {
    {0x21, 0x2F}, {0x3A, 0x7E}, {0xFF01, 0xFF0F}, {0xFF1A, 0xFF5E}, {0x2018, 0x201F}, {0x3000, 0x3002},
};
const CpRange kDeepseekCjk[] = {{0x4E00, 0x9FA5}, {0x800, 0x4E00}, {0xAC00, 0xD7FF}};

// \s?[class]+
template <class Pred>
size_t opt_space_run(const Span& s, size_t pos, Pred cls) {
    const size_t p = pos + (ws(s.at(pos)) ? 1 : 0);
    if (!cls(s.at(p))) return pos;
    return run(s, p, cls);
}

// " ?[^(\s|.,!?…。，、।۔،)]+"
size_t m_poro(const Span& s, size_t pos) {
    auto cls = [](uint32_t x) {
        if (x == kEnd || ws(x)) return false;
        switch (x) {
            case '(': case '|': case ')': case '.': case ',': case '!': case '?':
            case 0x2026: case 0x3002: case 0xFF0C: case 0x3001: case 0x0964: case 0x06D4: case 0x060C:
                return false;
            default:
                return true;
        }
    };
    const size_t p = pos + (s.at(pos) == ' ');
    if (!cls(s.at(p))) return pos;
    return run(s, p, cls);
}

// <sentinel:[0-9]+>
size_t m_sentinel(const Span& s, size_t pos) {
    static const char kPrefix[] = "<sentinel:";
    size_t p = pos;
    for (const char* q = kPrefix; *q; ++q, ++p)
        if (s.at(p) != (uint32_t)*q) return pos;
    const size_t d = run(s, p, ascii_digit);
    return (d > p && s.at(d) == '>') ? d + 1 : pos;
}

// (IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z
size_t m_image(const Span& s, size_t pos) {
    static const char kPrefix[] = "IMGIMG";
    size_t p = pos;
    for (const char* q = kPrefix; *q; ++q, ++p)
        if (s.at(p) != (uint32_t)*q) return pos;
    size_t k = 0;
    while (k < 4 && s.at(p + k) >= 'A' && s.at(p + k) <= 'I') ++k;
    // backtracking to fewer letters only puts another A-I before the Z
    return (k > 0 && s.at(p + k) == 'Z') ? p + k + 1 : pos;
}

// ([\t\n]|    |  )
size_t m_chameleon_space(const Span& s, size_t pos) {
    const uint32_t c = s.at(pos);
    if (c == '\t' || c == '\n') return pos + 1;
    size_t n = 0;
    while (n < 4 && s.at(pos + n) == ' ') ++n;
    if (n == 4) return pos + 4;
    return n >= 2 ? pos + 2 : pos;
}

// [\p{P}!-/:-@\[-`{-~]
size_t m_chameleon_punct(const Span& s, size_t pos) {
    const uint32_t c = s.at(pos);
    const bool ascii = (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
                       (c >= 0x7B && c <= 0x7E);
    return (ascii || punct(c)) ? pos + 1 : pos;
}

// [^\n]+|[\n]+
size_t m_newlines(const Span& s, size_t pos) {
    const bool nl = s.at(pos) == '\n';
    return run(s, pos, [nl](uint32_t x) { return x != kEnd && (x == '\n') == nl; });
}

// ------------------------------------------------------------------ steps

using Matcher = size_t (*)(const Span&, size_t);

// Appends the lengths of matches and of the gaps between them.
void search_split(const Span& s, size_t b, Matcher m, std::vector<uint32_t>& out) {
    size_t gap = b;
    for (size_t pos = b; pos < s.e;) {
        const size_t end = m(s, pos);
        if (end > pos) {
            if (pos > gap) out.push_back((uint32_t)(pos - gap));
            out.push_back((uint32_t)(end - pos));
            pos = gap = end;
        } else {
            ++pos;
        }
    }
    if (s.e > gap) out.push_back((uint32_t)(s.e - gap));
}

// \s+$ : only the trailing whitespace of a piece matches
void split_trailing_space(const Span& s, size_t b, std::vector<uint32_t>& out) {
    size_t t = s.e;
    while (t > b && ws(s.c[t - 1])) --t;
    if (t > b) out.push_back((uint32_t)(t - b));
    if (s.e > t) out.push_back((uint32_t)(s.e - t));
}

struct Step {
    Matcher match = nullptr;                                        // a search-and-split step, or
    void (*whole)(const Span&, size_t, std::vector<uint32_t>&) = nullptr;  // a step over whole pieces
};

Step M(Matcher m) { return Step{m, nullptr}; }

size_t m_llama3(const Span& s, size_t p) { return m_modern(s, p, kLlama3); }
size_t m_qwen2(const Span& s, size_t p) { return m_modern(s, p, kQwen2); }
size_t m_qwen35(const Span& s, size_t p) { return m_modern(s, p, kQwen35); }
size_t m_seed_coder(const Span& s, size_t p) { return m_modern(s, p, kSeedCoder); }
size_t m_jais2(const Span& s, size_t p) { return m_modern(s, p, kJais2); }
size_t m_punct(const Span& s, size_t p) { return punct_run(s, p, false); }
size_t m_punct_bt(const Span& s, size_t p) { return punct_run(s, p, true); }
size_t m_ds_letters(const Span& s, size_t p) {
    return opt_space_run(s, p, [](uint32_t x) { return in_ranges(x, kDeepseekLetters); });
}
size_t m_ds_punct(const Span& s, size_t p) {
    return opt_space_run(s, p, [](uint32_t x) { return in_ranges(x, kDeepseekPunct); });
}
size_t m_ds_cjk(const Span& s, size_t p) {
    return run(s, p, [](uint32_t x) { return in_ranges(x, kDeepseekCjk); });
}
size_t m_space_letters(const Span& s, size_t p) { return opt_space_run(s, p, letter); }
size_t m_space_punct(const Span& s, size_t p) { return opt_space_run(s, p, punct); }

std::vector<Step> steps_for(PreSplit split) {
    switch (split) {
        case PreSplit::GPT2: return {M(m_gpt2)};
        case PreSplit::LLAMA3: return {M(m_llama3)};
        case PreSplit::QWEN2: return {M(m_qwen2)};
        case PreSplit::QWEN35: return {M(m_qwen35)};
        case PreSplit::SEED_CODER: return {M(m_seed_coder)};
        case PreSplit::JAIS2: return {M(m_jais2)};
        case PreSplit::STARCODER: return {M(one_number), M(m_gpt2)};
        case PreSplit::FALCON: return {M(m_punct_bt), M(m_gpt2), M(digit_triple)};
        case PreSplit::DEEPSEEK_LLM:
            return {M(one_crlf), M(m_ds_letters), M(m_ds_punct), Step{nullptr, split_trailing_space},
                    M(m_ds_cjk), M(number_run)};
        case PreSplit::DEEPSEEK_CODER:
            return {M(one_crlf), M(m_space_letters), M(m_space_punct), M(m_ds_cjk), M(one_number)};
        case PreSplit::PORO: return {M(m_poro)};
        case PreSplit::VIKING: return {M(m_poro), M(one_number)};
        case PreSplit::TEKKEN: return {M(m_tekken)};
        case PreSplit::GPT4O: return {M(m_gpt4o)};
        case PreSplit::CHAMELEON:
            return {M(m_sentinel), M(m_image), M(m_chameleon_space), M(one_number), M(m_chameleon_punct),
                    M(m_gpt2)};
        case PreSplit::NEWLINES: return {M(m_newlines)};
        case PreSplit::DEFAULT:
        default: return {M(m_punct), M(m_gpt2), M(number_run), M(digit_triple)};
    }
}

}  // namespace

void pre_tokenize(PreSplit split, const std::vector<uint32_t>& cps, std::vector<uint32_t>& out) {
    if (cps.empty()) return;
    static const std::vector<Step> kSteps[] = {
        steps_for(PreSplit::DEFAULT), steps_for(PreSplit::GPT2), steps_for(PreSplit::LLAMA3),
        steps_for(PreSplit::QWEN2), steps_for(PreSplit::QWEN35), steps_for(PreSplit::SEED_CODER),
        steps_for(PreSplit::JAIS2), steps_for(PreSplit::STARCODER), steps_for(PreSplit::FALCON),
        steps_for(PreSplit::DEEPSEEK_LLM), steps_for(PreSplit::DEEPSEEK_CODER), steps_for(PreSplit::PORO),
        steps_for(PreSplit::VIKING), steps_for(PreSplit::TEKKEN), steps_for(PreSplit::GPT4O),
        steps_for(PreSplit::CHAMELEON), steps_for(PreSplit::NEWLINES),
    };
    const std::vector<Step>& steps = kSteps[(size_t)split];

    std::vector<uint32_t> pieces{(uint32_t)cps.size()}, next;
    for (const Step& step : steps) {
        next.clear();
        size_t off = 0;
        for (uint32_t len : pieces) {
            const Span s{cps.data(), off + len};
            if (step.match)
                search_split(s, off, step.match, next);
            else
                step.whole(s, off, next);
            off += len;
        }
        pieces.swap(next);
    }
    out.insert(out.end(), pieces.begin(), pieces.end());
}

bool pre_tokenizer_from_name(const std::string& name, PreTokenizerConfig& out) {
    struct Entry {
        PreSplit split;
        bool clean_spaces, ignore_merges, force_add_bos, no_bos;
    };
    // Names as written by llama.cpp's convert_hf_to_gguf.py; flags as its loader sets them.
    static const std::unordered_map<std::string, Entry> kNames = [] {
        std::unordered_map<std::string, Entry> m;
        auto add = [&m](std::initializer_list<const char*> names, Entry e) {
            for (const char* n : names) m.emplace(n, e);
        };
        const bool T = true, F = false;
        add({"default"}, {PreSplit::DEFAULT, T, F, F, F});
        add({"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2",
             "jina-v5-nano"},
            {PreSplit::LLAMA3, T, T, T, F});
        add({"dbrx", "smaug-bpe"}, {PreSplit::LLAMA3, T, F, F, F});
        add({"chatglm-bpe"}, {PreSplit::LLAMA3, T, F, F, T});
        add({"glm4", "glm5"}, {PreSplit::LLAMA3, T, T, F, T});
        add({"jais-2"}, {PreSplit::JAIS2, T, F, F, F});
        add({"deepseek-llm"}, {PreSplit::DEEPSEEK_LLM, F, F, F, F});
        add({"deepseek-coder"}, {PreSplit::DEEPSEEK_CODER, F, F, F, F});
        add({"falcon"}, {PreSplit::FALCON, T, F, F, F});
        add({"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum",
             "modern-bert", "jina-v1-en", "jina-v2-code", "roberta-bpe", "mpt", "olmo", "jais", "exaone4"},
            {PreSplit::GPT2, T, F, F, F});
        add({"trillion", "granite-docling"}, {PreSplit::GPT2, F, F, F, F});
        add({"starcoder", "refact", "codeshell", "exaone", "minerva-7b", "mellum2"},
            {PreSplit::STARCODER, T, F, F, F});
        add({"command-r", "smollm"}, {PreSplit::STARCODER, F, F, F, F});
        add({"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "hunyuan", "grok-2", "solar-open", "bailingmoe",
             "bailingmoe2", "llada-moe"},
            {PreSplit::QWEN2, F, F, F, F});
        add({"stablelm2", "megrez"}, {PreSplit::QWEN2, T, F, F, F});
        add({"qwen35"}, {PreSplit::QWEN35, F, F, F, F});
        add({"seed-coder"}, {PreSplit::SEED_CODER, F, F, F, F});
        add({"poro-chat"}, {PreSplit::PORO, F, F, F, F});
        add({"bloom", "gpt3-finnish"}, {PreSplit::PORO, T, F, F, F});
        add({"viking"}, {PreSplit::VIKING, F, F, F, F});
        add({"tekken"}, {PreSplit::TEKKEN, F, T, T, F});
        add({"gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"}, {PreSplit::GPT4O, F, F, F, F});
        add({"chameleon"}, {PreSplit::CHAMELEON, F, F, T, F});
        add({"gemma4", "granite-embed-multi-311m"}, {PreSplit::NEWLINES, T, F, F, F});
        return m;
    }();
    const std::string key = name.empty() ? "default" : name;
    auto it = kNames.find(key);
    if (it == kNames.end()) return false;
    const Entry& e = it->second;
    out = PreTokenizerConfig{};
    out.split = e.split;
    out.clean_spaces = e.clean_spaces;
    out.ignore_merges = e.ignore_merges;
    out.force_add_bos = e.force_add_bos;
    out.no_bos = e.no_bos;
    if (e.split == PreSplit::NEWLINES) {
        out.byte_encode = false;
        out.escape_whitespace = true;
    }
    return true;
}

}  // namespace ember
