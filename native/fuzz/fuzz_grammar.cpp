// GBNF grammars and texts from arbitrary bytes: the input up to its first NUL is a grammar,
// the rest a text fed to the matcher byte run by byte run, with a mask over a small
// vocabulary after each. Whatever comes in, the parser and the matcher throw ember::Error
// or succeed: no crash, no sanitizer report, no unbounded memory or recursion.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "sample/gbnf.h"
#include "sample/grammar.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const char* begin = reinterpret_cast<const char*>(data);
    const void* nul = std::memchr(data, 0, size);
    const size_t grammar_len = nul ? (size_t)(static_cast<const uint8_t*>(nul) - data) : size;
    const std::string grammar(begin, grammar_len);
    const std::string text = nul ? std::string(begin + grammar_len + 1, size - grammar_len - 1) : "";

    static const std::shared_ptr<const ember::GrammarVocab> vocab = [] {
        std::vector<std::string> pieces = {"", "a", "b", "ab", "{", "}", "\"", "\\", " ", "\n",
                                           "0", "12", "\xc3", "\xa9", "\xc3\xa9", "\xe6\x97\xa5",
                                           "\xff", "true", "null", ":", ",", "[", "]", "<eos>"};
        std::vector<bool> eog(pieces.size(), false);
        eog.back() = true;
        return ember::GrammarVocab::build(pieces, eog);
    }();

    std::shared_ptr<const ember::CompiledGrammar> g;
    try {
        g = std::make_shared<const ember::CompiledGrammar>(ember::parse_gbnf(grammar));
    } catch (const ember::Error&) {
        return 0;
    }
    try {
        ember::GrammarMatcher m(g, vocab);
        std::vector<float> logits(vocab->pieces.size() + 1, 0.0f);
        for (size_t i = 0; i < text.size();) {
            const size_t run = 1 + (unsigned char)text[i] % 4;
            try {
                m.accept_bytes(text.substr(i, run));
            } catch (const ember::Error&) {
            }
            i += run;
            try {
                const size_t kept = m.apply(logits.data(), (int32_t)logits.size());
                if (kept == 0 || kept > logits.size()) __builtin_trap();
            } catch (const ember::Error&) {
            }
            for (float& l : logits) l = 0.0f;
        }
    } catch (const ember::Error&) {
    }
    return 0;
}
