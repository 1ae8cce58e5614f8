// Phi-3: the llama graph (model/llama.cpp) with fused QKV and gate/up weights and
// LongRoPE: per-pair rope divisors for long and short contexts and a magnitude factor
// (rope.scaling.attn_factor). Its files may name a sliding window; llama.cpp runs Phi-3
// without one (the converters set it inconsistently), and so does Ember.
#include "model/arch.h"

namespace ember {

void phi3_read_hparams(const GGUFFile&, HParams& h) {
    h.n_swa = 0;
    h.swa_layers.clear();
}

void phi3_bind_model(Model& m) {
    const HParams& h = m.hparams();
    m.rope_long = m.weight("rope_factors_long.weight", {h.n_rot / 2}, false);
    m.rope_short = m.weight("rope_factors_short.weight", {h.n_rot / 2}, false);
}

void phi3_bind_layer(Model& m, int32_t il) {
    const HParams& h = m.hparams();
    bind_attention_weights(m, il);
    LayerWeights& L = m.layers[(size_t)il];
    L.ffn_norm = m.layer_weight(il, "ffn_norm", {h.n_embd});
    L.ffn_up = m.layer_weight(il, "ffn_up", {h.n_embd, 2 * (int64_t)h.n_ff});  // gate rows, then up rows
    L.ffn_down = m.layer_weight(il, "ffn_down", {h.n_ff, h.n_embd});
}

}  // namespace ember
