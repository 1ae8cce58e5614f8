// Vocabularies for the tokenizer fuzzers: EMBER_FUZZ_VOCAB lists ggml-vocab-*.gguf files
// (':'-separated); each input's first byte picks one of them, so one run can cover several
// tokenizer types or BPE pre-tokenizers. Loaded once, in LLVMFuzzerInitialize.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "gguf/gguf.h"
#include "text/vocab.h"

namespace fuzz {

struct LoadedVocab {
    std::unique_ptr<ember::GGUFFile> gguf;
    std::unique_ptr<ember::Vocab> vocab;
};

inline std::vector<LoadedVocab>& vocabs() {
    static std::vector<LoadedVocab> v;
    return v;
}

inline void load_vocabs() {
    const char* list = std::getenv("EMBER_FUZZ_VOCAB");
    if (!list || !*list) {
        std::fprintf(stderr, "set EMBER_FUZZ_VOCAB to ggml-vocab-*.gguf paths (':'-separated)\n");
        std::exit(2);
    }
    std::string all = list;
    for (size_t pos = 0; pos <= all.size();) {
        size_t end = all.find(':', pos);
        if (end == std::string::npos) end = all.size();
        const std::string path = all.substr(pos, end - pos);
        pos = end + 1;
        if (path.empty()) continue;
        try {
            LoadedVocab lv;
            lv.gguf = ember::GGUFFile::open(path);
            lv.vocab = ember::Vocab::load(*lv.gguf);
            std::fprintf(stderr, "fuzz vocab %zu: %s (%d tokens)\n", vocabs().size(), path.c_str(),
                         lv.vocab->n_tokens());
            vocabs().push_back(std::move(lv));
        } catch (const ember::Error& e) {
            std::fprintf(stderr, "cannot load %s: %s\n", path.c_str(), e.what());
            std::exit(2);
        }
    }
    if (vocabs().empty()) std::exit(2);
}

}  // namespace fuzz
