// Tokenizer and vocabulary: SentencePiece ("llama") and byte-level BPE ("gpt2")
// vocabularies read from GGUF tokenizer.* keys, with special-token handling and
// streaming-safe detokenization.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ember {

class GGUFFile;

enum class TokenType : int32_t {
    UNDEFINED = 0, NORMAL = 1, UNKNOWN = 2, CONTROL = 3, USER_DEFINED = 4, UNUSED = 5, BYTE = 6,
};

class Vocab {
public:
    // Throws ember::Error (EMBER_ERR_FORMAT for inconsistent keys,
    // EMBER_ERR_UNSUPPORTED for an unknown tokenizer model or pre-tokenizer).
    static std::unique_ptr<Vocab> load(const GGUFFile& gguf);
    virtual ~Vocab() = default;

    virtual int32_t n_tokens() const = 0;
    virtual std::vector<int32_t> tokenize(std::string_view text, bool add_special,
                                          bool parse_special) const = 0;
    // Bytes of one token's text as it appears in output (may be a partial UTF-8
    // sequence). special=false renders control tokens as "".
    virtual std::string token_to_piece(int32_t id, bool special) const = 0;
    virtual std::string detokenize(const std::vector<int32_t>& ids, bool remove_special,
                                   bool unparse_special) const = 0;

    virtual int32_t bos() const = 0;  // -1 when absent
    virtual int32_t eos() const = 0;
    virtual int32_t eot() const = 0;
    virtual int32_t unk() const = 0;
    virtual int32_t pad() const = 0;
    virtual bool add_bos() const = 0;
    virtual bool add_eos() const = 0;
    virtual bool is_eog(int32_t id) const = 0;      // end of generation (eos, eot, eom, ...)
    virtual bool is_control(int32_t id) const = 0;
    virtual const std::string& token_text(int32_t id) const = 0;
    virtual TokenType token_type(int32_t id) const = 0;
};

}  // namespace ember
