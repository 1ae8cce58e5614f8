// The one Vocab implementation: a token table plus the encoder for its model
// type. vocab_load.cpp fills it from GGUF keys; vocab.cpp tokenizes and detokenizes.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "text/bpe.h"
#include "text/special.h"
#include "text/spm.h"
#include "text/token_table.h"
#include "text/vocab.h"
#include "text/wpm.h"

namespace ember {

enum class VocabModel { SPM, BPE, WPM };

class VocabImpl final : public Vocab {
public:
    int32_t n_tokens() const override { return table_.size(); }
    std::vector<int32_t> tokenize(std::string_view text, bool add_special, bool parse_special) const override;
    std::string token_to_piece(int32_t id, bool special) const override;
    std::string detokenize(const std::vector<int32_t>& ids, bool remove_special,
                           bool unparse_special) const override;

    int32_t bos() const override { return bos_; }
    int32_t eos() const override { return eos_; }
    int32_t eot() const override { return eot_; }
    int32_t unk() const override { return unk_; }
    int32_t pad() const override { return pad_; }
    bool add_bos() const override { return add_bos_; }
    bool add_eos() const override { return add_eos_; }
    bool is_eog(int32_t id) const override { return eog_.count(id) > 0; }
    bool is_control(int32_t id) const override;
    const std::string& token_text(int32_t id) const override;
    TokenType token_type(int32_t id) const override;

    // extras
    VocabModel model() const { return model_; }
    const std::string& model_name() const { return model_name_; }
    const std::string& pre_name() const { return pre_name_; }
    uint32_t token_attr(int32_t id) const;
    int32_t eom() const { return eom_; }
    int32_t sep() const { return sep_; }
    bool add_space_prefix() const { return add_space_prefix_; }
    const std::set<int32_t>& eog_ids() const { return eog_; }

private:
    friend struct VocabLoader;
    void check_id(int32_t id) const;
    void build_pieces();
    std::string render_piece(int32_t id) const;  // the special=true rendering
    void clean_spaces(std::string& s) const;

    VocabModel model_ = VocabModel::SPM;
    std::string model_name_, pre_name_;
    TokenTable table_;
    PreTokenizerConfig pre_;
    std::unique_ptr<BpeEncoder> bpe_;
    std::unique_ptr<SpmEncoder> spm_;
    std::unique_ptr<WpmEncoder> wpm_;
    SpecialMatcher special_;
    std::vector<std::string> pieces_;  // token_to_piece(id, special=true), precomputed

    int32_t bos_ = -1, eos_ = -1, eot_ = -1, eom_ = -1, unk_ = -1, sep_ = -1, pad_ = -1, mask_ = -1;
    int32_t fim_pre_ = -1, fim_suf_ = -1, fim_mid_ = -1, fim_pad_ = -1, fim_rep_ = -1, fim_sep_ = -1;
    bool add_bos_ = false, add_eos_ = false, add_sep_ = false, add_space_prefix_ = false;
    bool clean_spaces_ = false, escape_whitespace_ = false;
    bool lowercase_ = true, strip_accents_ = true;
    std::set<int32_t> eog_;
};

}  // namespace ember
