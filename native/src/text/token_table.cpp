#include "text/token_table.h"

#include <algorithm>
#include <functional>

namespace ember {

namespace {

uint64_t hash_of(std::string_view s) { return (uint64_t)std::hash<std::string_view>{}(s); }

#if defined(__GNUC__) || defined(__clang__)
#define EMBER_PREFETCH(p) __builtin_prefetch(p)
#else
#define EMBER_PREFETCH(p) ((void)(p))
#endif

}  // namespace

void TokenTable::build_index() {
    size_t cap = 16;
    while (cap < text.size() * 2) cap *= 2;  // load factor <= 0.5
    slots_.assign(cap, 0);
    mask_ = cap - 1;
    for (size_t id = 0; id < text.size(); ++id) {
        const uint64_t h = hash_of(text[id]);
        const uint64_t tag = h & 0xFFFFFFFF00000000ull;
        for (uint64_t i = h & mask_;; i = (i + 1) & mask_) {
            uint64_t& slot = slots_[i];
            if (slot == 0) {
                slot = tag | (uint64_t)(id + 1);
                break;
            }
            const size_t other = (size_t)(slot & 0xFFFFFFFFu) - 1;
            if ((slot & 0xFFFFFFFF00000000ull) == tag && text[other] == text[id]) {
                slot = tag | (uint64_t)(id + 1);  // duplicate text: the later id wins
                break;
            }
        }
    }
}

int32_t TokenTable::find(std::string_view s) const { return find_hashed(s, hash_of(s)); }

int32_t TokenTable::find_hashed(std::string_view s, uint64_t h) const {
    if (slots_.empty()) return -1;
    const uint64_t tag = h & 0xFFFFFFFF00000000ull;
    for (uint64_t i = h & mask_;; i = (i + 1) & mask_) {
        const uint64_t slot = slots_[i];
        if (slot == 0) return -1;
        if ((slot & 0xFFFFFFFF00000000ull) == tag) {
            const size_t id = (size_t)(slot & 0xFFFFFFFFu) - 1;
            if (text[id] == s) return (int32_t)id;
        }
    }
}

void TokenTable::find_many(const std::string_view* keys, size_t n, int32_t* ids) const {
    constexpr size_t kBatch = 32;
    uint64_t hashes[kBatch];
    for (size_t base = 0; base < n; base += kBatch) {
        const size_t m = std::min(kBatch, n - base);
        for (size_t k = 0; k < m; ++k) {
            hashes[k] = hash_of(keys[base + k]);
            if (!slots_.empty()) EMBER_PREFETCH(&slots_[hashes[k] & mask_]);
        }
        for (size_t k = 0; k < m; ++k) {
            // the first candidate's string is the likely match: fetch it early too
            if (slots_.empty()) break;
            const uint64_t slot = slots_[hashes[k] & mask_];
            if (slot != 0) EMBER_PREFETCH(&text[(size_t)(slot & 0xFFFFFFFFu) - 1]);
        }
        for (size_t k = 0; k < m; ++k) ids[base + k] = find_hashed(keys[base + k], hashes[k]);
    }
}

}  // namespace ember
