// The compute graph: ops record their sources as they are built (lazily, nothing
// runs), then finalize() puts the nodes in topological order and plans one buffer
// for all intermediates, reusing memory of tensors that are no longer needed.
// A graph is built once per batch shape and then executed any number of times.
#pragma once

#include <cstddef>
#include <deque>
#include <vector>

#include "core/tensor.h"

namespace ember {

// Rotary position embedding, as llama.cpp's rope_ext computes it: pair i of a head turns
// by pos * freq_base^(-2i/n_rot) / factor_i, interpolated by freq_scale (YaRN mixes the
// interpolated and the original angle between its correction dimensions when ext_factor
// is set), and cos/sin are scaled by attn_factor.
struct RopeParams {
    int n_rot = 0;
    RopeMode mode = RopeMode::NORMAL;
    float freq_base = 10000.0f;
    float freq_scale = 1.0f;
    float ext_factor = 0.0f;   // YaRN: 0 off, 1 on
    float attn_factor = 1.0f;
    float beta_fast = 32.0f;   // YaRN correction range
    float beta_slow = 1.0f;
    int n_ctx_orig = 0;        // YaRN: the context length the model was trained at
    // Llama 4 / Ministral 3 attention temperature (queries only): after the rotation a
    // token's row is multiplied by log(floor(pos / temp_floor) + 1) * temp_scale + 1
    float temp_scale = 0.0f;   // 0: none
    int temp_floor = 0;
};

class Graph {
public:
    // ---- building -------------------------------------------------------------
    // A leaf whose data its owner provides (weights, inputs, caches).
    Tensor* leaf(DType type, int64_t ne0, int64_t ne1 = 1, int64_t ne2 = 1, int64_t ne3 = 1,
                 void* data = nullptr, const char* name = nullptr);
    // Shares a's data: new shape and strides, byte offset into a.
    Tensor* view(Tensor* a, const int64_t ne[4], const size_t nb[4], size_t offset);
    Tensor* reshape(Tensor* a, int64_t ne0, int64_t ne1, int64_t ne2 = 1, int64_t ne3 = 1);
    // The i-th column (row of dim 1) of a 2-D tensor, as a 1-row view.
    Tensor* column(Tensor* a, int64_t i);
    // Swaps dimensions 0 and 1 by swapping ne/nb: no data moves.
    Tensor* transpose(Tensor* a);

    Tensor* get_rows(Tensor* table, Tensor* ids);
    Tensor* rms_norm_mul(Tensor* x, Tensor* weight, float eps);
    Tensor* mul_mat(Tensor* w, Tensor* x);
    Tensor* add(Tensor* a, Tensor* b);
    // act(gate) * up, elementwise (gate and up may be views into one fused product)
    Tensor* glu(Tensor* gate, Tensor* up, Activation act);
    Tensor* swiglu(Tensor* gate, Tensor* up) { return glu(gate, up, Activation::SILU); }
    // gpt-oss's clamped SwiGLU (Activation::SWIGLU_OAI)
    Tensor* swiglu_oai(Tensor* gate, Tensor* up, float alpha, float limit);
    Tensor* scale(Tensor* x, float s);
    // cap * tanh(x / cap): Gemma 2's logit soft-capping
    Tensor* softcap(Tensor* x, float cap);
    // factors: optional F32 [n_rot/2], each pair's angle divided by its factor
    Tensor* rope(Tensor* x, Tensor* pos, const RopeParams& rp, Tensor* factors = nullptr);
    Tensor* kv_store(Tensor* k, Tensor* v, Tensor* k_cache, Tensor* v_cache, Tensor* pos);
    // q: [head_dim, n_head, N]; caches [head_dim, n_head_kv, n_ctx] F16; `after` orders it
    // after the KV_STORE of the same batch. window > 0: a query at position p sees the keys
    // at p - window + 1 .. p only. softcap > 0: scores become softcap * tanh(score / softcap).
    // sinks: optional F32 [n_head], each head's extra logit in the softmax's denominator.
    Tensor* attention(Tensor* q, Tensor* k_cache, Tensor* v_cache, Tensor* pos, Tensor* after,
                      float scale, int32_t window = 0, float softcap = 0.0f, Tensor* sinks = nullptr);

    // Mixture of experts. The router: each token's k experts from its logits [n_expert, N]
    // (best first; `bias` [n_expert], optional, shifts the choice but not the weights), and
    // their weights (normalised to sum 1 when `normalise`, then times `scale` when nonzero).
    Tensor* moe_route(Tensor* logits, Tensor* bias, int32_t k, ExpertGating gating);
    // expert_scale: optional F32 [n_expert], each chosen weight then times its expert's
    // factor (Gemma 4's per-expert scale of the down projection, moved onto the weight).
    Tensor* moe_weights(Tensor* logits, Tensor* ids, ExpertGating gating, bool normalise, float scale,
                        Tensor* expert_scale = nullptr);
    // Each token's x times each of its experts' matrices (w [K, M, n_expert]): x [K, N] (the
    // same row for every expert) or [K, k, N] (a row per expert); biases [M, n_expert] optional.
    // -> [M, k, N]. Only the chosen experts' rows are read.
    Tensor* mul_mat_id(Tensor* w, Tensor* x, Tensor* ids, Tensor* bias = nullptr);
    // sum over j of weights[j, t] * y[:, j, t] -> [M, N]
    Tensor* moe_sum(Tensor* y, Tensor* weights);

    // Recurrent layers (DESIGN.md, "recurrent state"). state leaves are overwritten with
    // the state after the batch's last token.
    // Causal depthwise convolution over time of x [C, N] with kernel w [K, C], continuing
    // from state [K - 1, C]; silu: SiLU of the result.
    Tensor* ssm_conv(Tensor* x, Tensor* w, Tensor* state, bool silu);
    // The gated delta rule's gates per head and token from alpha, beta [H, N] and the
    // layer's dt bias and A [H]: [2, H, N] = (softplus(alpha + dt) * A, sigmoid(beta)).
    Tensor* gdn_gates(Tensor* alpha, Tensor* beta, Tensor* dt_bias, Tensor* a);
    // The gated delta rule over the batch's tokens in order, from and into state [S, S, H]:
    // per value head h with key head h % Hk, S <- exp(g) S; S += k (beta (v - S^T k))^T;
    // out = S^T q / sqrt(S). q, k [S, Hk, N], v [S, H, N]; l2_norm: q and k L2-normed
    // first (eps as llama.cpp's: x / sqrt(sum x^2 + eps)). -> [S, H, N].
    Tensor* delta_net(Tensor* q, Tensor* k, Tensor* v, Tensor* gates, Tensor* state, bool l2_norm, float eps);

    // Encoders (BERT). LayerNorm of each row times weight plus bias (either may be null).
    Tensor* layer_norm(Tensor* x, Tensor* weight, Tensor* bias, float eps);
    // The exact (erf) GELU, elementwise.
    Tensor* gelu(Tensor* x);
    // Bidirectional attention within each sequence of the batch (no cache, no causal mask):
    // q [head_dim, n_head, N], k and v [head_dim, n_head_kv, N] F32; sequences lie one after
    // another, each with positions 0, 1, ... (pos I32 [N]). -> [head_dim * n_head, N].
    Tensor* attention_bidir(Tensor* q, Tensor* k, Tensor* v, Tensor* pos, float scale);

    // ---- planning -------------------------------------------------------------
    // Orders the nodes reachable from outputs and plans the intermediate buffer.
    void finalize(const std::vector<Tensor*>& outputs);
    size_t buffer_size() const { return buffer_size_; }
    // Points every planned tensor (and view) into base, which has buffer_size() bytes.
    void bind(uint8_t* base);
    const std::vector<Tensor*>& nodes() const { return order_; }
    size_t node_count() const { return order_.size(); }
    // Unique per finalize() in this process (never 0): lets a backend cache what it
    // derives from a graph, such as its barrier plan, without hashing the nodes.
    uint64_t id() const { return id_; }

private:
    Tensor* new_tensor(DType type, const int64_t ne[4]);
    Tensor* new_op(Op op, DType type, const int64_t ne[4], std::initializer_list<Tensor*> srcs);

    std::deque<Tensor> tensors_;       // stable addresses
    std::vector<Tensor*> order_;       // topological order, ops only (no leaves)
    std::vector<Tensor*> planned_;     // tensors with a planned offset
    std::vector<size_t> offsets_;
    size_t buffer_size_ = 0;
    uint64_t id_ = 0;
};

}  // namespace ember
