#include "text/unicode.h"

#include <algorithm>
#include <array>

namespace ember::unicode {

uint32_t to_lower(uint32_t cp) {
    using namespace unicode_tables;
    if (cp < 0x80) return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
    const CaseMapping* end = kLower + kLowerCount;
    const CaseMapping* it =
        std::lower_bound(kLower, end, cp, [](const CaseMapping& m, uint32_t v) { return m.from < v; });
    return (it != end && it->from == cp) ? it->to : cp;
}

uint32_t nfd_first(uint32_t cp) {
    using namespace unicode_tables;
    if (cp < 0xC0) return cp;
    const DecompRange* end = kNfdFirst + kNfdCount;
    const DecompRange* it =
        std::upper_bound(kNfdFirst, end, cp, [](uint32_t v, const DecompRange& r) { return v < r.first; });
    if (it == kNfdFirst) return cp;
    --it;
    return (cp <= it->last) ? it->to : cp;
}

namespace {

// Printable Latin-1 bytes map to themselves; the rest (controls, space, DEL,
// NBSP, soft hyphen) are moved to U+0100.. in byte order, so every byte has a
// visible, whitespace-free stand-in.
struct ByteMap {
    std::array<uint32_t, 256> to_cp{};
    std::array<int16_t, 324> from_cp{};  // indexed by code point, all images are < 324

    ByteMap() {
        from_cp.fill(-1);
        uint32_t next = 256;
        for (int b = 0; b < 256; ++b) {
            const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
            to_cp[b] = printable ? (uint32_t)b : next++;
            from_cp[to_cp[b]] = (int16_t)b;
        }
    }
};

const ByteMap& byte_map() {
    static const ByteMap m;
    return m;
}

}  // namespace

uint32_t byte_to_cp(uint8_t b) { return byte_map().to_cp[b]; }

int cp_to_byte(uint32_t cp) {
    const ByteMap& m = byte_map();
    return cp < m.from_cp.size() ? m.from_cp[cp] : -1;
}

}  // namespace ember::unicode
