// GGUF reader from raw bytes: parse, render every metadata value as JSON (the `ember info`
// path), touch every tensor's bytes, and build the vocabulary when tokenizer keys parse.
// A refusal (ember::Error) is the expected outcome for most inputs; anything else that
// escapes, or any sanitizer report, is a finding.
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "gguf/gguf.h"
#include "text/vocab.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::unique_ptr<ember::GGUFFile> g;
    try {
        g = ember::GGUFFile::from_memory(data, size);
    } catch (const ember::Error&) {
        return 0;
    }
    size_t sink = 0;
    for (const auto& [key, value] : g->metadata()) sink += key.size() + ember::GGUFFile::to_json(value).size();
    for (const auto& t : g->tensors()) {
        // the reader promised these bytes lie inside the input: ASan checks the promise
        if (t.n_bytes) sink += t.data[0] + t.data[t.n_bytes - 1];
        if (g->find_tensor(t.name) == nullptr) __builtin_trap();
    }
    try {
        auto vocab = ember::Vocab::load(*g);
        const int32_t n = vocab->n_tokens();
        for (int32_t id = 0; id < n && id < 64; ++id) sink += vocab->token_to_piece(id, true).size();
        sink += vocab->tokenize("Hello world <s> 123", true, true).size();
    } catch (const ember::Error&) {
    }
    volatile size_t keep = sink;
    (void)keep;
    return 0;
}
