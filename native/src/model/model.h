// A loaded model: the GGUF mapping, hyper-parameters from its keys, weight tensors
// pointing into the mapping (never copied), and the vocabulary.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "gguf/gguf.h"
#include "text/vocab.h"

namespace ember {

struct HParams {
    std::string arch;
    int32_t n_vocab = 0;
    int32_t n_ctx_train = 0;
    int32_t n_embd = 0;
    int32_t n_layer = 0;
    int32_t n_ff = 0;
    int32_t n_head = 0;
    int32_t n_head_kv = 0;
    int32_t head_dim = 0;  // per-head size of Q and K (and V)
    int32_t n_rot = 0;     // rotated dimensions per head
    float rms_eps = 1e-5f;
    float rope_freq_base = 10000.0f;
    float rope_freq_scale = 1.0f;
    RopeMode rope_mode = RopeMode::NORMAL;
};

struct LayerWeights {
    Tensor* attn_norm = nullptr;
    Tensor* wq = nullptr;
    Tensor* wk = nullptr;
    Tensor* wv = nullptr;
    Tensor* wo = nullptr;
    Tensor* bq = nullptr;  // optional biases (qwen2)
    Tensor* bk = nullptr;
    Tensor* bv = nullptr;
    Tensor* ffn_norm = nullptr;
    Tensor* ffn_gate = nullptr;
    Tensor* ffn_up = nullptr;
    Tensor* ffn_down = nullptr;
};

struct LoadOptions {
    bool (*progress)(float, void*) = nullptr;
    void* progress_user_data = nullptr;
    const volatile int32_t* cancel = nullptr;
    bool vocab_only = false;
    bool metadata_only = false;
};

class Model {
public:
    static std::unique_ptr<Model> load(const std::string& path, const LoadOptions& opts);

    const GGUFFile& gguf() const { return *gguf_; }
    const HParams& hparams() const { return hp_; }
    const Vocab* vocab() const { return vocab_.get(); }  // null for metadata_only
    bool has_weights() const { return tok_embd != nullptr; }
    const std::string& ftype_name() const { return ftype_name_; }
    uint64_t n_params() const { return n_params_; }

    Tensor* tok_embd = nullptr;
    Tensor* output_norm = nullptr;
    Tensor* output = nullptr;  // tok_embd when the head is tied
    std::vector<LayerWeights> layers;

private:
    void read_hparams();
    void bind_weights(const LoadOptions& opts);
    Tensor* weight(const std::string& name, std::initializer_list<int64_t> shape, bool required = true);

    std::unique_ptr<GGUFFile> gguf_;
    HParams hp_;
    std::unique_ptr<Vocab> vocab_;
    std::deque<Tensor> weights_;
    std::string ftype_name_;
    uint64_t n_params_ = 0;
};

// Architectures whose forward pass Ember implements.
bool arch_supported(const std::string& arch);
const char* supported_arch_list();

}  // namespace ember
