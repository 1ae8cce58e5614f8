// Shared pieces of the families' forward graphs (the counterpart of llama.cpp's graph
// helpers, smaller): embedding, norm, self-attention over the KV cache with its rope,
// window and scale, the gated feed-forward, the output head. A family's build function
// strings them together; the helpers know nothing of any one family.
#pragma once

#include <cstdint>
#include <vector>

#include "model/context.h"

namespace ember {

class GraphBuilder {
public:
    GraphBuilder(const Model& model, KVCache& kv, RecurrentState* rs, BatchGraph& bg, int32_t n_tokens, Outputs outputs,
                 int32_t n_ctx, void* in_tokens, void* in_pos);

    const Model& model;
    const HParams& hp;
    Graph& g;

    int32_t n_ctx() const { return n_ctx_; }
    Tensor* tokens() const { return bg_.tokens; }  // I32 [n_tokens], the batch's ids
    Tensor* positions() const { return bg_.pos; }  // I32 [n_tokens], each token's position
    // Names a node as llama.cpp's cb(cur, name, il) does ("attn_norm-3"; il < 0: the name
    // alone, "result_output"), so that a trace or a diff against llama.cpp's intermediates
    // points at it. Returns t.
    Tensor* name(Tensor* t, const char* what, int32_t il = -1);
    // The token rows of the embedding table [n_embd, N].
    Tensor* embed();
    // RMSNorm times the weight, with the model's epsilon (any row layout).
    Tensor* norm(Tensor* x, Tensor* weight);
    // Rope of block il: the family's mode, the sliding-window layers' own base and scale,
    // the rope.scaling keys.
    RopeParams rope_params(int32_t il) const;

    // Self-attention of block il on its normed input: Q/K/V (separate, with biases, or
    // fused), per-head Q/K norms where the block has them, rope (with `rope_factors` when
    // given), the keys and values of every token into the cache, attention (the block's
    // window, the model's scale), the output projection. From the last block on only the
    // rows whose logits are wanted go on: `residual` is narrowed to them as well. Returns
    // null when the batch only fills the cache (after the last block that stores keys and
    // values); the graph is then finished. A block without a cache of its own (shared KV)
    // computes only its queries and attends over HParams::kv_layer(il)'s cache; a block
    // without attn_v uses K's projection as V; HParams::v_norm RMS-norms V.
    Tensor* attention(int32_t il, Tensor* cur, Tensor*& residual, Tensor* rope_factors = nullptr);
    // The gated feed-forward of block il: down(act(gate(x)) * up(x)); gate and up fused or not.
    Tensor* ffn(const LayerWeights& L, Tensor* cur, Activation act, int32_t il);
    // The mixture-of-experts feed-forward of block il (model/build.cpp; DESIGN.md, "expert
    // routing"): the router picks hp.n_expert_used experts per token and weighs them, each
    // chosen expert's gated feed-forward runs on the tokens routed to it, and the outputs
    // are summed with the weights (hp.expert_*: the family's reader fixes what its graph
    // fixes in llama.cpp). router_logits: the family's own [n_expert, N] (Gemma 4 routes
    // from another input), else ffn_gate_inp . cur. A shared expert (ffn_up_shexp) runs on
    // every token and is added, gated by sigmoid(ffn_gate_inp_shexp . cur) where present.
    Tensor* moe_ffn(const LayerWeights& L, Tensor* cur, Activation act, int32_t il, Tensor* router_logits = nullptr);
    // Final norm, output head (soft-capped where the model says so); finishes the graph.
    void output(Tensor* x);
    // An encoder's result: the last hidden states [n_embd, N] (BatchGraph::embd, pooled by
    // model/encoder.h); finishes the graph.
    void encoder_output(Tensor* x);
    // A recurrent block's state leaves (model/recurrent_state.h): the convolution's and
    // the delta rule's.
    Tensor* conv_state(int32_t il) const { return &rs_->conv[(size_t)il]; }
    Tensor* ssm_state(int32_t il) const { return &rs_->ssm[(size_t)il]; }
    int64_t n_tokens() const { return n_tokens_; }
    Outputs outputs() const { return outputs_; }

private:
    KVCache& kv_;
    RecurrentState* rs_;
    BatchGraph& bg_;
    int64_t n_tokens_;
    Outputs outputs_;
    int32_t n_ctx_;
    std::vector<Tensor*> stored_;  // per block: its KV_STORE node (shared-KV blocks order after their source's)
};

}  // namespace ember
