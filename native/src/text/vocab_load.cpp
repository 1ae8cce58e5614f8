// Builds a VocabImpl from GGUF tokenizer.* keys. Defaults (special ids, add_bos,
// space prefix, ...) follow llama.cpp per model type, since GGUF files are
// written against that loader and often omit keys it implies.
#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "gguf/gguf.h"
#include "text/vocab_impl.h"

namespace ember {

namespace {

// Token texts that mark the end of a turn even when the file does not say so.
const char* const kEogTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<｜end▁of▁sentence｜>", "[e~[",
};
const char* const kEotTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<EOT>",
    "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>", "<end_of_utterance>",
};
const char* const kFimPreTexts[] = {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>",
                                    "<｜fim▁begin｜>", "<PRE>",
                                    "▁<PRE>", "<|code_prefix|>", "<|prefix|>"};
const char* const kFimSufTexts[] = {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
                                    "<｜fim▁hole｜>", "<SUF>",
                                    "▁<SUF>", "<|code_suffix|>", "<|suffix|>"};
const char* const kFimMidTexts[] = {"<|fim_middle|>", "<fim-middle>", "<fim_middle>",
                                    "<｜fim▁end｜>", "<MID>",
                                    "▁<MID>", "<|code_middle|>", "<|middle|>"};
const char* const kFimPadTexts[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"};
const char* const kFimRepTexts[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"};
const char* const kFimSepTexts[] = {"<|file_sep|>"};

uint32_t attr_from_type(int64_t type) {
    switch (type) {
        case 1: return ATTR_NORMAL;
        case 2: return ATTR_UNKNOWN;
        case 3: return ATTR_CONTROL;
        case 4: return ATTR_USER_DEFINED;
        case 5: return ATTR_UNUSED;
        case 6: return ATTR_BYTE;
        default: return ATTR_UNDEFINED;
    }
}

std::string lower_ascii(std::string s) {
    for (char& c : s)
        if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
    return s;
}

}  // namespace

struct VocabLoader {
    const GGUFFile& g;
    VocabImpl& v;

    void load() {
        read_model();
        read_tokens();
        if (v.model_ == VocabModel::BPE) read_merges();
        read_special_ids();
        read_flags();
        detect_special_tokens();
        model_specific_attrs();

        v.special_.build(v.table_);
        if (v.model_ == VocabModel::SPM) v.spm_ = std::make_unique<SpmEncoder>(v.table_, v.unk_);
        if (v.model_ == VocabModel::WPM)
            v.wpm_ = std::make_unique<WpmEncoder>(v.table_, v.unk_, v.lowercase_, v.strip_accents_);
        v.build_pieces();
    }

    void read_model() {
        if (!g.find("tokenizer.ggml.model"))
            fail(EMBER_ERR_FORMAT, "the file has no tokenizer (tokenizer.ggml.model is missing)");
        v.model_name_ = g.get_string("tokenizer.ggml.model");
        v.pre_name_ = g.get_string_or("tokenizer.ggml.pre", "");
        const std::string& m = v.model_name_;
        if (m == "llama") {
            v.model_ = VocabModel::SPM;
            v.bos_ = 1, v.eos_ = 2, v.unk_ = 0;
            v.add_space_prefix_ = true;
            v.add_bos_ = true;
            v.escape_whitespace_ = true;
        } else if (m == "bert") {
            v.model_ = VocabModel::WPM;
            v.bos_ = 101, v.unk_ = 100, v.sep_ = 102, v.pad_ = 0, v.mask_ = 103;
            v.add_bos_ = true;
            v.add_sep_ = true;
            v.clean_spaces_ = true;
        } else if (m == "gpt2" || m == "gemma4") {
            v.model_ = VocabModel::BPE;
            if (m == "gemma4") {
                v.pre_name_ = "gemma4";
            } else {
                v.bos_ = 11, v.eos_ = 11;
            }
            if (!pre_tokenizer_from_name(v.pre_name_, v.pre_))
                fail(EMBER_ERR_UNSUPPORTED, "unsupported pre-tokenizer '" + v.pre_name_ + "' (tokenizer.ggml.pre)");
            v.clean_spaces_ = v.pre_.clean_spaces;
            v.add_bos_ = v.pre_.force_add_bos;
            v.escape_whitespace_ = v.pre_.escape_whitespace;
            if (v.pre_.no_bos) v.bos_ = -1;
        } else {
            fail(EMBER_ERR_UNSUPPORTED, "unsupported tokenizer model '" + m + "' (tokenizer.ggml.model)");
        }
    }

    void read_tokens() {
        const std::vector<std::string_view>& tokens = g.get_string_array("tokenizer.ggml.tokens");
        const size_t n = tokens.size();
        if (n == 0) fail(EMBER_ERR_FORMAT, "tokenizer.ggml.tokens is empty");
        if (n > (size_t)INT32_MAX) fail(EMBER_ERR_FORMAT, "tokenizer.ggml.tokens has too many entries");

        TokenTable& t = v.table_;
        t.text.resize(n);
        t.score.assign(n, 0.0f);
        t.attr.assign(n, ATTR_NORMAL);
        t.type.assign(n, TokenType::NORMAL);

        if (const GGUFValue* sv = g.find("tokenizer.ggml.scores")) {
            std::vector<float> scores;
            if (sv->type == GGUFType::ARRAY && sv->elem_type != GGUFType::FLOAT32 &&
                sv->elem_type != GGUFType::FLOAT64) {
                for (int64_t x : g.get_int_array("tokenizer.ggml.scores")) scores.push_back((float)x);
            } else {
                scores = g.get_float_array("tokenizer.ggml.scores");
            }
            if (scores.size() != n)
                fail(EMBER_ERR_FORMAT, "tokenizer.ggml.scores has " + std::to_string(scores.size()) +
                                           " entries but tokenizer.ggml.tokens has " + std::to_string(n));
            t.score = std::move(scores);
        }
        if (g.find("tokenizer.ggml.token_type")) {
            const std::vector<int64_t> types = g.get_int_array("tokenizer.ggml.token_type");
            if (types.size() != n)
                fail(EMBER_ERR_FORMAT, "tokenizer.ggml.token_type has " + std::to_string(types.size()) +
                                           " entries but tokenizer.ggml.tokens has " + std::to_string(n));
            for (size_t i = 0; i < n; ++i) {
                t.attr[i] = attr_from_type(types[i]);
                t.type[i] = (types[i] >= 0 && types[i] <= 6) ? (TokenType)types[i] : TokenType::UNDEFINED;
            }
        }
        for (size_t i = 0; i < n; ++i) {
            t.text[i] = tokens[i].empty() ? "[EMPTY_" + std::to_string(i) + "]" : std::string(tokens[i]);
            t.max_len = std::max(t.max_len, t.text[i].size());
        }
        t.build_index();
    }

    void read_merges() {
        if (!g.find("tokenizer.ggml.merges"))
            fail(EMBER_ERR_FORMAT, "BPE tokenizer without tokenizer.ggml.merges");
        v.bpe_ = std::make_unique<BpeEncoder>(v.table_, g.get_string_array("tokenizer.ggml.merges"), v.pre_);
    }

    void read_special_ids() {
        const int64_t n = v.table_.size();
        auto read = [&](const char* key, int32_t& id) {
            if (id >= n) id = -1;  // a default outside this vocabulary
            const int64_t x = g.get_int_or(key, -1);
            if (x >= 0 && x < n) id = (int32_t)x;  // out-of-range ids in the file keep the default
        };
        read("tokenizer.ggml.bos_token_id", v.bos_);
        read("tokenizer.ggml.eos_token_id", v.eos_);
        read("tokenizer.ggml.eot_token_id", v.eot_);
        read("tokenizer.ggml.eom_token_id", v.eom_);
        read("tokenizer.ggml.unknown_token_id", v.unk_);
        read("tokenizer.ggml.seperator_token_id", v.sep_);
        read("tokenizer.ggml.padding_token_id", v.pad_);
        read("tokenizer.ggml.mask_token_id", v.mask_);
        read("tokenizer.ggml.fim_pre_token_id", v.fim_pre_);
        read("tokenizer.ggml.fim_suf_token_id", v.fim_suf_);
        read("tokenizer.ggml.fim_mid_token_id", v.fim_mid_);
        read("tokenizer.ggml.fim_pad_token_id", v.fim_pad_);
        read("tokenizer.ggml.fim_rep_token_id", v.fim_rep_);
        read("tokenizer.ggml.fim_sep_token_id", v.fim_sep_);
        read("tokenizer.ggml.prefix_token_id", v.fim_pre_);
        read("tokenizer.ggml.suffix_token_id", v.fim_suf_);
        read("tokenizer.ggml.middle_token_id", v.fim_mid_);
    }

    void read_flags() {
        v.add_space_prefix_ = g.get_bool_or("tokenizer.ggml.add_space_prefix", v.add_space_prefix_);
        v.add_bos_ = g.get_bool_or("tokenizer.ggml.add_bos_token", v.add_bos_);
        v.add_eos_ = g.get_bool_or("tokenizer.ggml.add_eos_token", v.add_eos_);
        v.add_sep_ = g.get_bool_or("tokenizer.ggml.add_sep_token", v.add_sep_);
        if (v.model_name_ == "gemma4" || v.pre_.split == PreSplit::NEWLINES) v.add_bos_ = true;
        v.lowercase_ = g.get_bool_or("tokenizer.ggml.normalizer.lowercase", true);
        v.strip_accents_ = g.get_bool_or("tokenizer.ggml.normalizer.strip_accents", v.lowercase_);
        // never promise a token the vocabulary does not have
        if (v.bos_ < 0) v.add_bos_ = false;
        if (v.eos_ < 0) v.add_eos_ = false;
        if (v.sep_ < 0) v.add_sep_ = false;
    }

    // Many converted files mark end-of-turn and FIM tokens only by their text.
    void detect_special_tokens() {
        TokenTable& t = v.table_;
        const int32_t n = t.size();
        auto force_control = [&](int32_t id) { t.attr[(size_t)id] |= ATTR_CONTROL; };
        // the lowest id whose text is on the list
        auto detect = [&](int32_t& slot, auto& list) {
            if (slot >= 0) return;
            for (const char* text : list) {
                const int32_t id = t.find(text);
                if (id >= 0 && (slot < 0 || id < slot)) slot = id;
            }
            if (slot >= 0) force_control(slot);
        };
        detect(v.eot_, kEotTexts);
        static const char* const kEom[] = {"<|eom_id|>"};
        detect(v.eom_, kEom);
        detect(v.fim_pre_, kFimPreTexts);
        detect(v.fim_suf_, kFimSufTexts);
        detect(v.fim_mid_, kFimMidTexts);
        detect(v.fim_pad_, kFimPadTexts);
        detect(v.fim_rep_, kFimRepTexts);
        detect(v.fim_sep_, kFimSepTexts);

        for (int32_t id = 0; id < n; ++id) {
            uint32_t& a = t.attr[(size_t)id];
            if ((a & ATTR_CONTROL) && t.text[(size_t)id].find("unused") != std::string::npos) a |= ATTR_UNUSED;
        }

        std::set<int32_t>& eog = v.eog_;
        for (int32_t id : {v.fim_pad_, v.fim_rep_, v.fim_sep_})
            if (id >= 0) eog.insert(id);
        for (const char* text : kEogTexts) {
            const int32_t id = t.find(text);
            if (id >= 0) {
                eog.insert(id);
                force_control(id);
            }
        }
        // gpt-oss channel markers must always be rendered
        for (const char* text : {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"}) {
            const int32_t id = t.find(text);
            if (id >= 0) t.attr[(size_t)id] = ATTR_USER_DEFINED;
        }
        for (int32_t id : {v.eos_, v.eot_, v.eom_})
            if (id >= 0) eog.insert(id);

        // harmony / solar-open: "<|end|>" ends a message, not the generation
        bool has_return = false, has_call = false, has_flush = false;
        int32_t end_id = -1;
        for (int32_t id : eog) {
            const std::string& s = t.text[(size_t)id];
            if (s == "<|return|>") has_return = true;
            else if (s == "<|call|>" || s == "<|calls|>") has_call = true;
            else if (s == "<|flush|>") has_flush = true;
            else if (s == "<|end|>") end_id = id;
        }
        if (end_id >= 0 && ((has_return && has_call) || (has_call && has_flush))) {
            eog.erase(end_id);
            t.attr[(size_t)end_id] = ATTR_USER_DEFINED;
        }
        // Gemma 4 / PLaMo use "</s>" as ordinary text
        bool normal_s = false;
        int32_t s_id = -1;
        for (int32_t id : eog) {
            const std::string& s = t.text[(size_t)id];
            if (s == "<|tool_response>" || s == "<|plamo:eos|>") normal_s = true;
            else if (s == "</s>") s_id = id;
        }
        if (normal_s && s_id >= 0) {
            eog.erase(s_id);
            t.attr[(size_t)s_id] = ATTR_NORMAL;
        }
    }

    // Per-model token attributes that GGUF files do not carry.
    void model_specific_attrs() {
        TokenTable& t = v.table_;
        const std::string name = lower_ascii(g.get_string_or("general.name", ""));
        const std::string arch = g.get_string_or("general.architecture", "");
        auto set_attr = [&](const char* text, uint32_t bit, bool on) {
            const int32_t id = t.find(text);
            if (id < 0) return;
            if (on) t.attr[(size_t)id] |= bit;
            else t.attr[(size_t)id] &= ~bit;
        };
        const std::string& pre = v.pre_name_;
        if (pre == "jina-v2-de" || pre == "jina-v2-es" || pre == "jina-v2-code" ||
            arch.find("nomic-bert-moe") != std::string::npos || arch.find("jina-bert-v3") != std::string::npos) {
            set_attr("<mask>", ATTR_LSTRIP, true);
        } else if (name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos) {
            for (int32_t id = 0; id < t.size(); ++id)
                if (t.attr[(size_t)id] & (ATTR_CONTROL | ATTR_USER_DEFINED | ATTR_UNKNOWN))
                    t.attr[(size_t)id] |= ATTR_RSTRIP;
            set_attr("</s>", ATTR_RSTRIP, true);
            for (const char* s : {"<unk>", "<s>", "<|endoftext|>"}) set_attr(s, ATTR_RSTRIP, false);
        } else if (name.find("modern-bert") != std::string::npos) {
            set_attr("[MASK]", ATTR_LSTRIP, true);
        }
    }
};

std::unique_ptr<Vocab> Vocab::load(const GGUFFile& gguf) {
    auto v = std::make_unique<VocabImpl>();
    VocabLoader{gguf, *v}.load();
    return v;
}

}  // namespace ember
