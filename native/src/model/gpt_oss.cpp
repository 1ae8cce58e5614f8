// gpt-oss (OpenAI's open-weight MoE, GGUF arch "gpt-oss"; llama.cpp's openai-moe.cpp): the
// llama graph with biases on Q, K, V and the output projection, a learned sink logit per
// head in every attention softmax, every other block (0, 2, ...) attending over a sliding
// window (128 in the released models) with the same YaRN rope as the rest, and a mixture of
// experts for every feed-forward: the router (with a bias) picks the top k on its raw logits
// and weighs them by a softmax over those k alone; the experts (with biases) use the clamped
// SwiGLU (alpha 1.702, limit 7). The pre-feed-forward norm is stored as
// post_attention_norm.
#include "core/error.h"
#include "model/arch.h"
#include "model/build.h"

namespace ember {

void gpt_oss_read_hparams(const GGUFFile& g, HParams& h) {
    const std::string a = h.arch + ".";
    if (h.n_expert <= 0 || h.n_expert_used <= 0)
        fail(EMBER_ERR_FORMAT, "a gpt-oss model needs expert_count and expert_used_count");
    h.n_swa = (int32_t)g.get_int(a + "attention.sliding_window");
    if (h.n_swa <= 0) fail(EMBER_ERR_FORMAT, "attention.sliding_window must be positive");
    read_swa_pattern(g, h, 2);
    h.rope_freq_base_swa = (float)g.get_float_or(a + "rope.freq_base_swa", h.rope_freq_base);
    h.rope_freq_scale_swa = h.rope_freq_scale;
    h.expert_gating = ExpertGating::SOFTMAX_WEIGHT;
    h.expert_weights_norm = false;
    h.ffn_act = Activation::SWIGLU_OAI;
}

void gpt_oss_bind_layer(Model& m, int32_t il) {
    const HParams& h = m.hparams();
    bind_attention_weights(m, il);
    LayerWeights& L = m.layers[(size_t)il];
    const std::string p = "blk." + std::to_string(il) + ".";
    L.bo = m.weight(p + "attn_output.bias", {h.n_embd});
    L.attn_sinks = m.layer_weight(il, "attn_sinks", {h.n_head});
    L.ffn_norm = m.layer_weight(il, "post_attention_norm", {h.n_embd});
    bind_moe_weights(m, il);
}

}  // namespace ember
