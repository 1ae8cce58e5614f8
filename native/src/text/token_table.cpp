#include "text/token_table.h"

#include <functional>

namespace ember {

namespace {

uint64_t hash_of(std::string_view s) { return (uint64_t)std::hash<std::string_view>{}(s); }

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

int32_t TokenTable::find(std::string_view s) const {
    if (slots_.empty()) return -1;
    const uint64_t h = hash_of(s);
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

}  // namespace ember
