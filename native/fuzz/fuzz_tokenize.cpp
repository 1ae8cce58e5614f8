// Tokenizers on arbitrary bytes (valid UTF-8 or not). Byte 0 picks the vocabulary, byte 1
// the flags; the rest is the text. Checks what must hold for any input: every id is in the
// vocabulary, and detokenizing the ids terminates without a sanitizer report.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_vocabs.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    fuzz::load_vocabs();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 2) return 0;
    const auto& v = *fuzz::vocabs()[data[0] % fuzz::vocabs().size()].vocab;
    const bool add_special = data[1] & 1, parse_special = data[1] & 2;
    const std::string_view text((const char*)data + 2, size - 2);
    std::vector<int32_t> ids;
    try {
        ids = v.tokenize(text, add_special, parse_special);
    } catch (const ember::Error&) {
        return 0;
    }
    for (int32_t id : ids)
        if (id < 0 || id >= v.n_tokens()) __builtin_trap();
    const std::string back = v.detokenize(ids, data[1] & 4, data[1] & 8);
    volatile size_t keep = back.size();
    (void)keep;
    return 0;
}
