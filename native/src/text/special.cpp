// Reproduces the reference partitioning exactly: special tokens are applied one
// at a time, longest first, each splitting every remaining raw fragment at its
// leftmost non-overlapping occurrences. A trie pass first finds which tokens
// occur at all, so the per-token passes only run for those few.
#include "text/special.h"

#include <algorithm>

namespace ember {

namespace {

bool ascii_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

}  // namespace

int32_t SpecialMatcher::child(int32_t node, uint8_t b) const {
    for (const auto& k : trie_[(size_t)node].kids)
        if (k.first == b) return k.second;
    return -1;
}

void SpecialMatcher::build(const TokenTable& table) {
    table_ = &table;
    order_.clear();
    for (int32_t id = 0; id < table.size(); ++id)
        if ((table.attr[(size_t)id] & (ATTR_CONTROL | ATTR_USER_DEFINED | ATTR_UNKNOWN)) &&
            !table.text[(size_t)id].empty())
            order_.push_back(id);
    std::stable_sort(order_.begin(), order_.end(), [&table](int32_t a, int32_t b) {
        return table.text[(size_t)a].size() > table.text[(size_t)b].size();
    });

    trie_.assign(1, Node{});
    for (size_t rank = 0; rank < order_.size(); ++rank) {
        int32_t node = 0;
        for (char ch : table.text[(size_t)order_[rank]]) {
            int32_t next = child(node, (uint8_t)ch);
            if (next < 0) {
                next = (int32_t)trie_.size();
                trie_[(size_t)node].kids.emplace_back((uint8_t)ch, next);
                trie_.emplace_back();
            }
            node = next;
        }
        if (trie_[(size_t)node].rank < 0) trie_[(size_t)node].rank = (int32_t)rank;  // duplicate text: first wins
    }
}

void SpecialMatcher::partition(std::string_view text, bool parse_special, std::vector<Fragment>& out) const {
    out.clear();
    if (text.empty()) return;
    out.push_back(Fragment{-1, 0, text.size()});
    if (order_.empty()) return;

    auto eligible = [&](int32_t id) {
        return parse_special || !(table_->attr[(size_t)id] & (ATTR_CONTROL | ATTR_UNKNOWN));
    };

    // which special tokens occur anywhere in the text
    std::vector<int32_t> seen;
    std::vector<char> is_seen(order_.size(), 0);
    for (size_t i = 0; i < text.size(); ++i) {
        int32_t node = 0;
        for (size_t j = i; j < text.size(); ++j) {
            node = child(node, (uint8_t)text[j]);
            if (node < 0) break;
            const int32_t rank = trie_[(size_t)node].rank;
            if (rank >= 0 && !is_seen[(size_t)rank] && eligible(order_[(size_t)rank])) {
                is_seen[(size_t)rank] = 1;
                seen.push_back(rank);
            }
        }
    }
    if (seen.empty()) return;
    std::sort(seen.begin(), seen.end());

    std::vector<Fragment> next;
    for (int32_t rank : seen) {
        const int32_t id = order_[(size_t)rank];
        const std::string& tok = table_->text[(size_t)id];
        const uint32_t attr = table_->attr[(size_t)id];
        next.clear();
        for (const Fragment& f : out) {
            if (f.token >= 0) {
                next.push_back(f);
                continue;
            }
            size_t start = f.off;
            const size_t end = f.off + f.len;
            const std::string_view area = text.substr(0, end);
            while (start < end) {
                const size_t m = area.find(tok, start);
                if (m == std::string_view::npos) break;
                size_t left = m - start;
                if (attr & ATTR_LSTRIP)
                    while (left > 0 && ascii_space(text[start + left - 1])) --left;
                if (left > 0) next.push_back(Fragment{-1, start, left});
                next.push_back(Fragment{id, m, tok.size()});
                start = m + tok.size();
                if (attr & ATTR_RSTRIP)
                    while (start < end && ascii_space(text[start])) ++start;
            }
            if (start < end) next.push_back(Fragment{-1, start, end - start});
        }
        out.swap(next);
    }
}

}  // namespace ember
