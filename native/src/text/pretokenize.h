// Pre-tokenizers for byte-level BPE: split text (as code points) into the words
// that BPE merges never cross. Each GGUF tokenizer.ggml.pre name selects one of
// the regex sets below; the regexes are implemented as hand-written matchers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ember {

enum class PreSplit {
    DEFAULT,         // original GPT-2 regex plus punctuation / digit isolation
    GPT2,            // 's|'t|...| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
    LLAMA3,          // cased contractions, \p{N}{1,3}, newline-aware whitespace
    QWEN2,           // LLAMA3 with single digits
    QWEN35,          // QWEN2 where letter runs also take combining marks
    SEED_CODER,      // QWEN2 whose punctuation runs do not swallow newlines
    JAIS2,           // LLAMA3 with power-of-two whitespace chunks
    STARCODER,       // isolated digits, then GPT2
    FALCON,          // punctuation runs, GPT2, digit triples
    DEEPSEEK_LLM,
    DEEPSEEK_CODER,
    PORO,            // " ?[^(\s|.,!?…。，、।۔،)]+"
    VIKING,          // PORO then isolated digits
    TEKKEN,          // case-split words (Mistral Nemo)
    GPT4O,           // case-split words with contractions, \p{N}{1,3}
    CHAMELEON,
    NEWLINES,        // "[^\n]+|[\n]+" (Gemma 4: SentencePiece-style BPE)
};

// Tokenizer flags that llama.cpp-compatible loaders attach to a pre-tokenizer name.
struct PreTokenizerConfig {
    PreSplit split = PreSplit::DEFAULT;
    bool clean_spaces = true;       // detokenize removes " ," " ." ... (HF clean_up_tokenization_spaces)
    bool ignore_merges = false;     // a word that is itself a token skips the merges
    bool force_add_bos = false;     // add BOS unless tokenizer.ggml.add_bos_token says otherwise
    bool no_bos = false;            // the model has no BOS token by default
    bool byte_encode = true;        // GPT-2 byte<->unicode mapping (false: raw UTF-8, <0xNN> fallback)
    bool escape_whitespace = false; // spaces become U+2581 before splitting
};

// False when the name is unknown.
bool pre_tokenizer_from_name(const std::string& name, PreTokenizerConfig& out);

// Splits cps into words; appends each word's length in code points to out.
void pre_tokenize(PreSplit split, const std::vector<uint32_t>& cps, std::vector<uint32_t>& out);

}  // namespace ember
