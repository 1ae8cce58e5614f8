// A loaded model: the GGUF mapping, hyper-parameters from its keys, weight tensors
// pointing into the mapping (never copied), and the vocabulary. Which keys and weights an
// architecture has, and the graph it builds, live in its family file (model/arch.h).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/weights.h"
#include "core/tensor.h"
#include "gguf/gguf.h"
#include "text/vocab.h"

namespace ember {

class WeightRepack;
enum class Isa : int32_t;

// How an encoder turns a sequence's hidden states into one vector: GGUF's pooling_type
// values (llama.cpp's llama_pooling_type). NONE: per-token states, no vector.
enum class Pooling : int32_t { NONE = 0, MEAN = 1, CLS = 2, LAST = 3 };

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
    // rope.scaling.*: YaRN (ext_factor 1) and the magnitude factor LongRoPE and YaRN use
    float rope_ext_factor = 0.0f;
    float rope_attn_factor = 1.0f;
    float yarn_beta_fast = 32.0f, yarn_beta_slow = 1.0f;
    int32_t n_ctx_orig = 0;  // rope.scaling.original_context_length, else n_ctx_train
    // Sliding-window attention: the window, and which layers use it (with their own rope
    // base and scale); empty when no layer does.
    int32_t n_swa = 0;
    std::vector<uint8_t> swa_layers;
    float rope_freq_base_swa = 10000.0f;
    float rope_freq_scale_swa = 1.0f;
    float attn_scale = 0.0f;        // scale of Q.K; 0: 1/sqrt(head_dim)
    float final_softcap = 0.0f;     // logits soft-cap; 0: none
    float attn_softcap = 0.0f;      // attention scores soft-cap; 0: none
    // Mixture of experts (expert_* keys; n_expert 0: a dense model): each token runs
    // n_expert_used of n_expert feed-forwards n_ff_exp wide, weighted by the router.
    int32_t n_expert = 0;
    int32_t n_expert_used = 0;
    int32_t n_ff_exp = 0;
    ExpertGating expert_gating = ExpertGating::SOFTMAX;
    bool expert_weights_norm = false;  // the chosen experts' weights renormalised to sum 1
    float expert_weights_scale = 0.0f; // then scaled (0: not)
    int32_t n_ff_shexp = 0;            // the shared expert's width (0: none; Qwen3.5-MoE)
    int32_t n_layer_dense_lead = 0;    // the first blocks keep a dense feed-forward (LFM2-MoE)
    Activation ffn_act = Activation::SILU;  // the gate's activation (llama-like graphs)

    // NoPE blocks: every n-th block (il + 1 a multiple of it) attends without rope (SmolLM3:
    // 4); 0: every block ropes
    int32_t n_no_rope_step = 0;
    // Ministral 3's attention temperature (attention.temperature_scale; 0: none), over
    // blocks of the original context's length
    float attn_temp_scale = 0.0f;

    // Per-layer shapes (attention.head_count, head_count_kv and feed_forward_length may be
    // arrays, one value per block; a scalar fills every layer). The scalars above hold layer
    // 0's values, as llama.cpp's n_head() does. Only a family that sets per_layer_shapes runs
    // files whose arrays differ between layers (model.cpp refuses them for the others).
    std::vector<int32_t> n_head_layer, n_head_kv_layer, n_ff_layer;
    bool per_layer_shapes = false;
    // Sliding-window layers' own head size and rotated dimensions (Gemma 4:
    // attention.key_length_swa, rope.dimension_count_swa); 0: the full layers' values.
    int32_t head_dim_swa = 0;
    int32_t n_rot_swa = 0;
    // Shared KV (Gemma 4: attention.shared_kv_layers): only the first n_layer_kv blocks
    // store keys and values; each later block attends over the cache of the last earlier
    // block of its kind (sliding-window or full), as llama.cpp's `reuse` maps it. 0: n_layer.
    int32_t n_layer_kv = 0;
    // Gemma 4's per-layer token embeddings: n_embd_per_layer floats per block (0: none).
    int32_t n_embd_per_layer = 0;
    // Values RMS-normed (no weight) before they are stored (Gemma 4).
    bool v_norm = false;
    // Recurrent layers (Qwen3.5's gated delta-net; model/recurrent_state.h): which blocks are
    // recurrent (empty: none), and their shapes from the ssm.* keys: the convolution's
    // width, the value heads' total width, the head size, key heads (group_count) and value
    // heads (time_step_rank).
    std::vector<uint8_t> recurrent_layers;
    int32_t ssm_d_conv = 0, ssm_d_inner = 0, ssm_d_state = 0, ssm_n_group = 0, ssm_dt_rank = 0;
    // Full-attention blocks whose Q projection also yields a gate per head (Qwen3.5, Qwen3-
    // Next): [q | gate] per head, the attention's output times sigmoid(gate).
    bool attn_q_gate = false;
    // Encoders (BERT): attention sees the whole sequence (attention.causal false), and a
    // sequence's vector is pooled from its tokens' last hidden states (pooling_type, as
    // llama.cpp numbers it); LayerNorm's epsilon (attention.layer_norm_epsilon).
    bool causal = true;
    Pooling pooling = Pooling::NONE;
    float norm_eps = 1e-12f;

    bool is_swa(int32_t il) const { return !swa_layers.empty() && swa_layers[(size_t)il]; }
    bool ropes(int32_t il) const { return n_no_rope_step <= 0 || (il + 1) % n_no_rope_step != 0; }
    int32_t n_head_of(int32_t il) const { return n_head_layer.empty() ? n_head : n_head_layer[(size_t)il]; }
    int32_t n_head_kv_of(int32_t il) const {
        return n_head_kv_layer.empty() ? n_head_kv : n_head_kv_layer[(size_t)il];
    }
    int32_t n_ff_of(int32_t il) const { return n_ff_layer.empty() ? n_ff : n_ff_layer[(size_t)il]; }
    int32_t head_dim_of(int32_t il) const { return is_swa(il) && head_dim_swa > 0 ? head_dim_swa : head_dim; }
    int32_t n_rot_of(int32_t il) const { return is_swa(il) && n_rot_swa > 0 ? n_rot_swa : n_rot; }
    bool is_recurrent(int32_t il) const { return !recurrent_layers.empty() && recurrent_layers[(size_t)il]; }
    bool has_recurrent() const {
        return std::find(recurrent_layers.begin(), recurrent_layers.end(), 1) != recurrent_layers.end();
    }
    // The width of a recurrent layer's convolution: Q and K (key heads) and V (value heads).
    int64_t ssm_conv_channels() const { return 2 * (int64_t)ssm_d_state * ssm_n_group + ssm_d_inner; }
    bool has_kv(int32_t il) const { return !is_recurrent(il) && (n_layer_kv <= 0 || il < n_layer_kv); }
    // The last block whose work a batch that only fills the memories must do: the last one
    // that stores keys and values or updates a recurrent state.
    int32_t last_stateful_layer() const {
        for (int32_t il = n_layer - 1; il >= 0; --il)
            if (has_kv(il) || is_recurrent(il)) return il;
        return -1;
    }
    // The block whose cache block il attends over (il itself when it has one).
    int32_t kv_layer(int32_t il) const {
        if (has_kv(il)) return il;
        return n_layer_kv - (is_swa(il) ? 2 : 1);
    }
    // The widest of the layers' heads, and of their query groups (n_head / n_head_kv).
    int32_t max_head_dim() const { return std::max(head_dim, head_dim_swa); }
    int32_t max_group() const {
        int32_t m = 1;
        for (int32_t il = 0; il < n_layer; ++il) m = std::max(m, n_head_of(il) / std::max(1, n_head_kv_of(il)));
        return m;
    }
};

// One block's weights; a family binds the ones it has (null: absent).
struct LayerWeights {
    Tensor* attn_norm = nullptr;
    Tensor* wq = nullptr;
    Tensor* wk = nullptr;
    Tensor* wv = nullptr;
    Tensor* wqkv = nullptr;  // fused Q, K, V rows (phi3), instead of wq/wk/wv
    Tensor* wo = nullptr;
    Tensor* bo = nullptr;  // output projection bias (gpt-oss)
    Tensor* attn_sinks = nullptr;  // a logit per head in the softmax's denominator (gpt-oss)
    Tensor* bq = nullptr;  // optional biases (qwen2)
    Tensor* bk = nullptr;
    Tensor* bv = nullptr;
    Tensor* q_norm = nullptr;  // per-head RMSNorm of Q and K (qwen3, gemma3)
    Tensor* k_norm = nullptr;
    Tensor* attn_post_norm = nullptr;  // norm of the attention output before the residual (gemma3)
    Tensor* ffn_norm = nullptr;
    Tensor* ffn_gate = nullptr;  // null when ffn_up holds gate and up rows (phi3)
    Tensor* ffn_up = nullptr;
    Tensor* ffn_down = nullptr;
    Tensor* ffn_post_norm = nullptr;  // (gemma3)
    // Gemma 4: the per-layer embedding's gate [n_embd, n_embd_per_layer], projection back
    // [n_embd_per_layer, n_embd] and its norm; the block output's scalar (1: none); the
    // V norm's weight of ones (model-wide, shared)
    Tensor* per_layer_inp_gate = nullptr;
    Tensor* per_layer_proj = nullptr;
    Tensor* per_layer_post_norm = nullptr;
    float out_scale = 1.0f;
    Tensor* v_norm_ones = nullptr;
    // mixture of experts: the router [n_embd, n_expert] (with its bias), the experts'
    // matrices [in, out, n_expert] and their biases [out, n_expert] (gpt-oss)
    Tensor* ffn_gate_inp = nullptr;
    Tensor* ffn_gate_inp_b = nullptr;
    Tensor* ffn_exp_probs_b = nullptr;  // [n_expert] added to the gate scores for the choice only (LFM2-MoE)
    Tensor* ffn_gate_exps = nullptr;
    Tensor* ffn_up_exps = nullptr;
    Tensor* ffn_down_exps = nullptr;
    Tensor* ffn_gate_exps_b = nullptr;
    Tensor* ffn_up_exps_b = nullptr;
    Tensor* ffn_down_exps_b = nullptr;
    // the gate rows then the up rows of every expert in one tensor [in, 2 n_ff_exp,
    // n_expert] instead of ffn_gate_exps and ffn_up_exps (Gemma 4's converter), and a
    // factor per expert on its down projection's output [n_expert] (Gemma 4)
    Tensor* ffn_gate_up_exps = nullptr;
    Tensor* ffn_down_exps_s = nullptr;
    // a shared expert every token runs beside the routed ones, its output times
    // sigmoid(ffn_gate_inp_shexp . x) when that gate [n_embd] is there (Qwen3.5-MoE)
    Tensor* ffn_gate_inp_shexp = nullptr;
    Tensor* ffn_gate_shexp = nullptr;
    Tensor* ffn_up_shexp = nullptr;
    Tensor* ffn_down_shexp = nullptr;
    // Gemma 4's MoE blocks: the router's input scale [n_embd] and the norms around the
    // dense MLP (ffn_norm, post_ffw_norm_1) and the experts (pre_ffw_norm_2, post_ffw_norm_2)
    Tensor* ffn_gate_inp_s = nullptr;
    Tensor* ffn_pre_norm_2 = nullptr;
    Tensor* ffn_post_norm_1 = nullptr;
    Tensor* ffn_post_norm_2 = nullptr;
    // a gated delta-net block (Qwen3.5): the input projection to Q|K|V (attn_qkv) and to the
    // output gate z (attn_gate), the convolution's kernel [d_conv, channels], the per-head
    // dt bias and A, the projections to the per-head beta and alpha, the output norm (one
    // head's width) and the output projection
    Tensor* ssm_in = nullptr;
    Tensor* ssm_z = nullptr;
    Tensor* ssm_conv1d = nullptr;
    Tensor* ssm_dt = nullptr;
    Tensor* ssm_a = nullptr;
    Tensor* ssm_beta = nullptr;
    Tensor* ssm_alpha = nullptr;
    Tensor* ssm_norm = nullptr;
    Tensor* ssm_out = nullptr;
    // an encoder block (BERT, post-norm): the LayerNorms after the attention's and the
    // feed-forward's residuals, with their biases, and the feed-forward's biases
    Tensor* attn_out_norm = nullptr;
    Tensor* attn_out_norm_b = nullptr;
    Tensor* layer_out_norm = nullptr;
    Tensor* layer_out_norm_b = nullptr;
    Tensor* ffn_up_b = nullptr;
    Tensor* ffn_down_b = nullptr;
};

struct ArchSpec;

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
    HParams& mutable_hparams() { return hp_; }  // for the family's hyper-parameter reader
    const ArchSpec& arch() const { return *arch_; }
    const Vocab* vocab() const { return vocab_.get(); }  // null for metadata_only
    bool has_weights() const { return tok_embd != nullptr; }
    const std::string& ftype_name() const { return ftype_name_; }
    uint64_t n_params() const { return n_params_; }

    Tensor* tok_embd = nullptr;
    Tensor* output_norm = nullptr;
    Tensor* output = nullptr;  // tok_embd when the head is tied
    // rope frequency divisors: Llama 3.1+ (rope_freqs), Phi-3 LongRoPE (long / short)
    Tensor* rope_freqs = nullptr;
    Tensor* rope_long = nullptr;
    Tensor* rope_short = nullptr;
    // Gemma 4's per-layer token embeddings [n_embd_per_layer * n_layer, n_vocab], the
    // projection of the input embedding to them [n_embd, n_embd_per_layer * n_layer] and
    // its norm [n_embd_per_layer]
    Tensor* per_layer_tok_embd = nullptr;
    Tensor* per_layer_model_proj = nullptr;
    Tensor* per_layer_proj_norm = nullptr;
    // Encoders (BERT): absolute position embeddings [n_embd, n_ctx_train], token-type
    // embeddings [n_embd, n_types], and the LayerNorm of their sum (weight and bias)
    Tensor* position_embd = nullptr;
    Tensor* token_types = nullptr;
    Tensor* tok_norm = nullptr;
    Tensor* tok_norm_b = nullptr;
    std::vector<LayerWeights> layers;

    // Binds a weight of the mapping, checking its shape and that its type can be
    // computed (absent and not required: null).
    Tensor* weight(const std::string& name, std::initializer_list<int64_t> shape, bool required = true);
    // The same for block il's "blk.<il>.<name>".
    Tensor* layer_weight(int32_t il, const char* name, std::initializer_list<int64_t> shape,
                         bool required = true);
    // An F32 vector of n ones that the model owns (an RMSNorm without a weight of its own).
    Tensor* ones(int64_t n, const char* name);

    // Copies of the weights on devices, shared by the contexts that offload layers.
    DeviceWeightCache& device_weights() const { return device_weights_; }

    // Contexts open and close through these. The first context on the model (none other
    // open, so no graph reads the weights) starts a copy of the weights its CPU computes in
    // the four-row layout its level reads (cpu/repack.h's WeightRepack: Tensor::extra),
    // unless EMBER_NO_REPACK is set or the copy would not fit in available memory (then the
    // rows are read as they are: same results, slower decoding). One thread below normal
    // priority fills it in the background, 1024 rows at a time, and publishes each piece;
    // decoding meanwhile reads the rows not yet copied from the file (the same bits). The
    // copies stay until the model is freed; this process's mapping of the file pages they
    // replace is dropped as they are published (they stay in the page cache).
    void open_context(Isa isa, const std::vector<Tensor*>& cpu_weights) const;
    void close_context() const;
    // How much of the four-row copy is filled (1 when done, or when none is made); with
    // wait, returns when it is done.
    double layout_progress(bool wait) const;

    ~Model();
    Model() = default;
    Model(const Model&) = delete;
    Model& operator=(const Model&) = delete;

private:
    void read_hparams();
    void bind_weights(const LoadOptions& opts);

    std::unique_ptr<GGUFFile> gguf_;
    const ArchSpec* arch_ = nullptr;
    HParams hp_;
    std::unique_ptr<Vocab> vocab_;
    std::deque<Tensor> weights_;
    mutable DeviceWeightCache device_weights_;  // declared after weights_: freed first
    std::string ftype_name_;
    uint64_t n_params_ = 0;
    mutable std::mutex contexts_mu_;
    mutable int open_contexts_ = 0;
    std::vector<void*> vector_copies_;  // the 1-D weights (aligned_malloc'd; Model::weight)
    // the four-row copy of the CPU's weights (cpu/repack.h), made by the first context;
    // declared after gguf_ and weights_, which its thread reads: freed before them
    mutable std::unique_ptr<WeightRepack> repack_;
};

// Binding steps the families share: a block's attention weights (attn_norm, then fused
// attn_qkv or attn_q/k/v with optional biases, attn_output) and its gated feed-forward
// (ffn_norm, ffn_gate, ffn_up, ffn_down).
void bind_attention_weights(Model& m, int32_t il);
void bind_ffn_weights(Model& m, int32_t il);
// A block's experts instead of the dense feed-forward: the router ffn_gate_inp and
// ffn_{gate,up,down}_exps, with the optional biases (the family binds the norm before it).
void bind_moe_weights(Model& m, int32_t il);

}  // namespace ember
