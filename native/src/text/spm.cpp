// Symbols are byte ranges of the input, so a candidate pair's text is a view
// into it and is looked up without allocating. A queued pair is stale once
// either side has changed; since symbols only grow rightwards, comparing the
// combined length is enough to detect that.
#include "text/spm.h"

#include <queue>

#include "text/utf8.h"

namespace ember {

void SpmEncoder::encode(std::string_view text, std::vector<int32_t>& out) const {
    struct Symbol {
        uint32_t off, len;
        int32_t prev, next;
    };
    struct Candidate {
        float score;
        int32_t left, right;
        uint32_t len;
        bool operator<(const Candidate& o) const {  // highest score first, then leftmost
            return score != o.score ? score < o.score : left > o.left;
        }
    };

    std::vector<Symbol> syms;
    syms.reserve(text.size());
    for (size_t off = 0; off < text.size();) {
        // one symbol per character; a byte that does not start a valid sequence
        // stands alone, so it cannot swallow the next character's bytes
        size_t end = off;
        utf8::decode(text, end);
        const size_t len = end - off;
        syms.push_back(Symbol{(uint32_t)off, (uint32_t)len, (int32_t)syms.size() - 1, (int32_t)syms.size() + 1});
        off += len;
    }
    if (syms.empty()) return;
    syms.back().next = -1;

    std::priority_queue<Candidate> queue;
    auto consider = [&](int32_t l, int32_t r) {
        if (l < 0 || r < 0) return;
        const Symbol& a = syms[(size_t)l];
        const Symbol& b = syms[(size_t)r];
        const int32_t id = table_.find(text.substr(a.off, a.len + b.len));
        if (id < 0) return;
        queue.push(Candidate{table_.score[(size_t)id], l, r, a.len + b.len});
    };
    for (int32_t i = 0; i + 1 < (int32_t)syms.size(); ++i) consider(i, i + 1);

    while (!queue.empty()) {
        const Candidate c = queue.top();
        queue.pop();
        Symbol& l = syms[(size_t)c.left];
        Symbol& r = syms[(size_t)c.right];
        if (l.len == 0 || r.len == 0 || l.len + r.len != c.len) continue;
        l.len += r.len;
        r.len = 0;
        l.next = r.next;
        if (r.next >= 0) syms[(size_t)r.next].prev = c.left;
        consider(l.prev, c.left);
        consider(c.left, l.next);
    }

    for (int32_t i = 0; i >= 0; i = syms[(size_t)i].next) {
        const Symbol& s = syms[(size_t)i];
        const std::string_view piece = text.substr(s.off, s.len);
        const int32_t id = table_.find(piece);
        if (id >= 0) {
            out.push_back(id);
            continue;
        }
        for (unsigned char b : piece) {
            int32_t t = table_.byte_token(b);
            if (t < 0) t = table_.find(std::string_view((const char*)&b, 1));
            if (t < 0) t = unk_;
            if (t >= 0) out.push_back(t);
        }
    }
}

}  // namespace ember
