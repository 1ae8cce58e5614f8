// Merging works on token ids: a (left id, right id) -> (rank, merged id) hash
// map and a priority queue of candidate pairs ordered by rank then position,
// with stale candidates discarded on pop. Each merge costs O(log n), so long
// words (a 100 KB run of letters) stay fast.
#include "text/bpe.h"

#include <algorithm>
#include <queue>
#include <string>

#include "text/unicode.h"
#include "text/utf8.h"

namespace ember {

namespace {

uint64_t mix(uint64_t x) {  // splitmix64 finalizer
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

}  // namespace

const BpeEncoder::Merge* BpeEncoder::find_merge(int32_t a, int32_t b) const {
    const uint64_t k = key(a, b);
    for (uint64_t i = mix(k) & mask_;; i = (i + 1) & mask_) {
        const Merge& m = merges_[i];
        if (m.key == k) return &m;
        if (m.key == kEmpty) return nullptr;
    }
}

BpeEncoder::BpeEncoder(const TokenTable& table, const std::vector<std::string_view>& merges,
                       const PreTokenizerConfig& config)
    : table_(table), config_(config) {
    for (int b = 0; b < 256; ++b) byte_symbol_[b] = table.find(utf8::encode(unicode::byte_to_cp((uint8_t)b)));

    size_t cap = 16;
    while (cap < merges.size() * 2) cap *= 2;  // load factor <= 0.5
    merges_.assign(cap, Merge{});
    mask_ = cap - 1;
    // resolve merges in chunks so the vocabulary lookups of a chunk overlap
    constexpr size_t kChunk = 1024;
    std::vector<std::string> joined(kChunk);
    std::vector<std::string_view> keys;
    std::vector<int32_t> ids;
    std::vector<char> ok;
    for (size_t base = 0; base < merges.size(); base += kChunk) {
        const size_t n = std::min(kChunk, merges.size() - base);
        keys.assign(3 * n, std::string_view());
        ok.assign(n, 0);
        for (size_t k = 0; k < n; ++k) {
            const std::string_view line = merges[base + k];
            const size_t sp = line.size() > 1 ? line.find(' ', 1) : std::string_view::npos;
            if (sp == std::string_view::npos) continue;  // malformed
            const std::string_view left = line.substr(0, sp), right = line.substr(sp + 1);
            joined[k].assign(left).append(right);
            keys[3 * k] = left;
            keys[3 * k + 1] = right;
            keys[3 * k + 2] = joined[k];
            ok[k] = 1;
        }
        ids.resize(keys.size());
        table.find_many(keys.data(), keys.size(), ids.data());
        for (size_t k = 0; k < n; ++k) {
            const int32_t a = ids[3 * k], b = ids[3 * k + 1], r = ids[3 * k + 2];
            if (!ok[k] || a < 0 || b < 0 || r < 0) {
                ++skipped_;  // malformed, or its parts or result are not tokens
                continue;
            }
            const uint64_t kk = key(a, b);
            for (uint64_t i = mix(kk) & mask_;; i = (i + 1) & mask_) {
                Merge& m = merges_[i];
                if (m.key == kk) break;  // a repeated pair keeps its best rank
                if (m.key == kEmpty) {
                    m = Merge{kk, (int32_t)(base + k), r};
                    ++n_merges_;
                    break;
                }
            }
        }
    }
}

void BpeEncoder::encode(std::string_view text, std::vector<int32_t>& out) const {
    std::string escaped;
    if (config_.escape_whitespace) {
        escaped.reserve(text.size() + text.size() / 2);
        for (char c : text) {
            if (c == ' ')
                escaped += "\xE2\x96\x81";
            else
                escaped += c;
        }
        text = escaped;
    }
    const std::vector<uint32_t> cps = utf8::decode_all(text);
    std::vector<uint32_t> words;
    pre_tokenize(config_.split, cps, words);
    size_t off = 0;
    for (uint32_t len : words) {
        encode_word(cps.data() + off, len, out);
        off += len;
    }
}

void BpeEncoder::encode_word(const uint32_t* cps, size_t n, std::vector<int32_t>& out) const {
    struct Symbol {
        int32_t id;
        int32_t prev, next;
        uint32_t cp;  // source code point (raw mode fallback)
        bool alive;
    };
    struct Candidate {
        int32_t rank, left, right, left_id, right_id, result;
        bool operator<(const Candidate& o) const {  // inverted: std::priority_queue pops the largest
            return rank != o.rank ? rank > o.rank : left > o.left;
        }
    };

    // symbol text: the word's UTF-8 bytes through the GPT-2 byte map, or its raw characters
    std::string word;
    for (size_t i = 0; i < n; ++i) utf8::append(word, cps[i]);

    std::vector<Symbol> syms;
    if (config_.byte_encode) {
        if (config_.ignore_merges) {
            std::string encoded;
            for (unsigned char b : word) utf8::append(encoded, unicode::byte_to_cp(b));
            const int32_t whole = table_.find(encoded);
            if (whole >= 0) {
                out.push_back(whole);
                return;
            }
        }
        syms.reserve(word.size());
        for (unsigned char b : word) syms.push_back(Symbol{byte_symbol_[b], 0, 0, b, true});
    } else {
        // Gemma 4 keeps newline runs whole when the vocabulary has them
        if (word.find_first_not_of('\n') == std::string::npos || config_.ignore_merges) {
            const int32_t whole = table_.find(word);
            if (whole >= 0) {
                out.push_back(whole);
                return;
            }
        }
        syms.reserve(n);
        std::string ch;
        for (size_t i = 0; i < n; ++i) {
            ch.clear();
            utf8::append(ch, cps[i]);
            syms.push_back(Symbol{table_.find(ch), 0, 0, cps[i], true});
        }
    }
    const int32_t count = (int32_t)syms.size();
    for (int32_t i = 0; i < count; ++i) {
        syms[(size_t)i].prev = i - 1;
        syms[(size_t)i].next = i + 1 < count ? i + 1 : -1;
    }

    std::priority_queue<Candidate> queue;
    auto consider = [&](int32_t l, int32_t r) {
        if (l < 0 || r < 0) return;
        const int32_t a = syms[(size_t)l].id, b = syms[(size_t)r].id;
        if (a < 0 || b < 0) return;
        const Merge* m = find_merge(a, b);
        if (!m) return;
        queue.push(Candidate{m->rank, l, r, a, b, m->result});
    };
    for (int32_t i = 0; i + 1 < count; ++i) consider(i, i + 1);

    while (!queue.empty()) {
        const Candidate c = queue.top();
        queue.pop();
        Symbol& l = syms[(size_t)c.left];
        Symbol& r = syms[(size_t)c.right];
        if (!l.alive || !r.alive || l.next != c.right || l.id != c.left_id || r.id != c.right_id) continue;
        l.id = c.result;
        l.next = r.next;
        if (r.next >= 0) syms[(size_t)r.next].prev = c.left;
        r.alive = false;
        consider(l.prev, c.left);
        consider(c.left, l.next);
    }

    for (int32_t i = 0; i >= 0 && i < count; i = syms[(size_t)i].next) {
        const Symbol& s = syms[(size_t)i];
        if (s.id >= 0) {
            out.push_back(s.id);
        } else if (!config_.byte_encode) {
            // a character outside the vocabulary: <0xNN> byte fallback
            std::string bytes;
            utf8::append(bytes, s.cp);
            for (unsigned char b : bytes) {
                const int32_t t = table_.byte_token(b);
                if (t >= 0) out.push_back(t);
            }
        }
        // byte-level vocabularies normally hold all 256 byte symbols; a missing one is dropped
    }
}

}  // namespace ember
