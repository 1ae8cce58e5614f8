// Detokenization on arbitrary ids, in range and out of it (negative, past n_tokens):
// byte 0 picks the vocabulary, byte 1 the flags, then little-endian int32 ids. Out-of-range
// ids must be rejected with an ember::Error or skipped, never read out of bounds.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "fuzz_vocabs.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    fuzz::load_vocabs();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 2) return 0;
    const auto& v = *fuzz::vocabs()[data[0] % fuzz::vocabs().size()].vocab;
    const uint8_t flags = data[1];
    std::vector<int32_t> ids((size - 2) / 4);
    if (!ids.empty()) std::memcpy(ids.data(), data + 2, ids.size() * 4);
    // Most fuzzed ids would be far out of range; fold half of them into the vocabulary so the
    // rendering paths (byte tokens, control tokens, space prefixes) are reached too.
    if (flags & 16)
        for (int32_t& id : ids) id = (int32_t)((uint32_t)id % (uint32_t)v.n_tokens());
    size_t sink = 0;
    try {
        sink += v.detokenize(ids, flags & 1, flags & 2).size();
    } catch (const ember::Error&) {
    }
    for (int32_t id : ids) {
        try {
            sink += v.token_to_piece(id, flags & 4).size();
        } catch (const ember::Error&) {
        }
    }
    volatile size_t keep = sink;
    (void)keep;
    return 0;
}
