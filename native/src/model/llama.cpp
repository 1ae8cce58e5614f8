// The llama family's forward pass (Llama 1-3.x, TinyLlama, SmolLM, Mistral as converted;
// SmolLM3 with every fourth block's rope left out),
// which Qwen2 (Q/K/V biases), Qwen3 (per-head Q/K norms) and Phi-3 (fused QKV and
// gate/up, LongRoPE) share; read top to bottom: embed, then per block attention and the
// SwiGLU feed-forward with pre-norms and residuals, final norm, output head.
#include "core/error.h"
#include "model/arch.h"
#include "model/build.h"

namespace ember {

void llama_bind_model(Model& m) {
    // Llama 3.1+ rope scaling: one divisor per rotated pair
    m.rope_freqs = m.weight("rope_freqs.weight", {m.hparams().n_rot / 2}, false);
}

void llama_bind_layer(Model& m, int32_t il) {
    bind_attention_weights(m, il);
    bind_ffn_weights(m, il);
}

void qwen3_bind_layer(Model& m, int32_t il) {
    const HParams& h = m.hparams();
    bind_attention_weights(m, il);
    LayerWeights& L = m.layers[(size_t)il];
    L.q_norm = m.layer_weight(il, "attn_q_norm", {h.head_dim});
    L.k_norm = m.layer_weight(il, "attn_k_norm", {h.head_dim});
    bind_ffn_weights(m, il);
}

void mistral3_read_hparams(const GGUFFile& g, HParams& h) {
    h.attn_temp_scale = (float)g.get_float_or(h.arch + ".attention.temperature_scale", 0.0);
    if (h.attn_temp_scale != 0.0f && h.n_ctx_orig <= 0)
        fail(EMBER_ERR_FORMAT, "attention temperature scaling needs rope.scaling.original_context_length");
}

void smollm3_read_hparams(const GGUFFile&, HParams& h) {
    h.n_no_rope_step = 4;  // llama.cpp's smollm3: blocks 3, 7, 11, ... attend without rope
}

void qwen3moe_read_hparams(const GGUFFile&, HParams& h) {
    if (h.n_expert <= 0 || h.n_expert_used <= 0)
        fail(EMBER_ERR_FORMAT, "a qwen3moe model needs expert_count and expert_used_count");
    // llama.cpp's qwen3moe graph: a softmax router whose chosen weights are renormalised
    h.expert_gating = ExpertGating::SOFTMAX;
    h.expert_weights_norm = true;
}

void qwen3moe_bind_layer(Model& m, int32_t il) {
    const HParams& h = m.hparams();
    bind_attention_weights(m, il);
    LayerWeights& L = m.layers[(size_t)il];
    L.q_norm = m.layer_weight(il, "attn_q_norm", {h.head_dim});
    L.k_norm = m.layer_weight(il, "attn_k_norm", {h.head_dim});
    L.ffn_norm = m.layer_weight(il, "ffn_norm", {h.n_embd});
    bind_moe_weights(m, il);
}

void llama_build_graph(GraphBuilder& b) {
    const Model& m = b.model;
    Graph& g = b.g;
    // rope frequency divisors: Llama 3's, or Phi-3's long ones when the context is
    // longer than the model was trained for (llama.cpp's choice), else its short ones
    Tensor* factors = m.rope_freqs ? m.rope_freqs : b.n_ctx() > b.hp.n_ctx_orig ? m.rope_long : m.rope_short;

    Tensor* x = b.embed();  // [n_embd, N]
    for (int32_t il = 0; il < b.hp.n_layer; ++il) {
        const LayerWeights& L = m.layers[(size_t)il];
        Tensor* attn = b.attention(il, b.name(b.norm(x, L.attn_norm), "attn_norm", il), x, factors);
        if (!attn) return;  // the batch only fills the cache
        x = b.name(g.add(x, attn), "ffn_inp", il);
        Tensor* normed = b.name(b.norm(x, L.ffn_norm), "ffn_norm", il);
        Tensor* ffn = L.ffn_gate_inp ? b.moe_ffn(L, normed, b.hp.ffn_act, il) : b.ffn(L, normed, b.hp.ffn_act, il);
        x = b.name(g.add(x, ffn), "l_out", il);
    }
    b.output(x);
}

}  // namespace ember
