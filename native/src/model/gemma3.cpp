// Gemma 3 (text): embeddings scaled by sqrt(n_embd); per block, per-head Q/K norms, the
// attention and feed-forward outputs normed again before their residual adds, a GELU
// (tanh) gated feed-forward; five of every six blocks attend over a sliding window with
// their own rope base (10000), the sixth over everything with the model's rope base and
// scaling. GGUF norm weights already include Gemma's +1.
// Gemma 2 is the same graph without the Q/K norms, every other block local (with the
// model's own rope), and soft-capped attention scores and logits.
#include <cmath>

#include "core/error.h"
#include "model/arch.h"
#include "model/build.h"

namespace ember {

void read_swa_pattern(const GGUFFile& g, HParams& h, int64_t default_period) {
    const std::string a = h.arch + ".";
    h.swa_layers.assign((size_t)h.n_layer, 0);
    const GGUFValue* pattern = g.find(a + "attention.sliding_window_pattern");
    if (pattern && pattern->type == GGUFType::ARRAY) {
        // one flag per layer: integers, or booleans as Gemma 4's converter writes them
        std::vector<int64_t> flags;
        if (pattern->elem_type == GGUFType::BOOL && pattern->array_data) {
            for (uint64_t i = 0; i < pattern->n_elems; ++i) flags.push_back(pattern->array_data[i] != 0);
        } else {
            flags = g.get_int_array(a + "attention.sliding_window_pattern");
        }
        if ((int64_t)flags.size() < h.n_layer)
            fail(EMBER_ERR_FORMAT, "attention.sliding_window_pattern has fewer entries than layers");
        for (int32_t il = 0; il < h.n_layer; ++il) h.swa_layers[(size_t)il] = flags[(size_t)il] != 0;
    } else {
        const int64_t n = g.get_int_or(a + "attention.sliding_window_pattern", default_period);
        if (n < 0) fail(EMBER_ERR_FORMAT, "attention.sliding_window_pattern must not be negative");
        for (int32_t il = 0; il < h.n_layer; ++il) h.swa_layers[(size_t)il] = n == 0 || il % n < n - 1;
    }
}

namespace {

// Gemma 2 and 3 27B scale queries by the model width per head, the others by the head size.
float gemma_query_scale(const HParams& h, int32_t layers_of_27b) {
    return h.n_layer == layers_of_27b ? 1.0f / std::sqrt((float)(h.n_embd / h.n_head))
                                      : 1.0f / std::sqrt((float)h.head_dim);
}

}  // namespace

void gemma2_read_hparams(const GGUFFile& g, HParams& h) {
    const std::string a = h.arch + ".";
    h.n_swa = (int32_t)g.get_int_or(a + "attention.sliding_window", 4096);
    if (h.n_swa <= 0) fail(EMBER_ERR_FORMAT, "attention.sliding_window must be positive");
    read_swa_pattern(g, h, 2);
    h.rope_freq_base_swa = (float)g.get_float_or(a + "rope.freq_base_swa", h.rope_freq_base);
    h.rope_freq_scale_swa = h.rope_freq_scale;
    // Gemma 2 always soft-caps; files written without the keys get the models' values
    h.attn_softcap = (float)g.get_float_or(a + "attn_logit_softcapping", 50.0);
    h.final_softcap = (float)g.get_float_or(a + "final_logit_softcapping", 30.0);
    if (h.attn_softcap < 0.0f || h.final_softcap < 0.0f) fail(EMBER_ERR_FORMAT, "soft-caps must not be negative");
    h.attn_scale = gemma_query_scale(h, 46);
}

void gemma3_read_hparams(const GGUFFile& g, HParams& h) {
    const std::string a = h.arch + ".";
    h.n_swa = (int32_t)g.get_int_or(a + "attention.sliding_window", 0);
    if (h.n_swa < 0) fail(EMBER_ERR_FORMAT, "attention.sliding_window must not be negative");
    h.swa_layers.clear();
    if (h.n_swa > 0) {
        read_swa_pattern(g, h, 6);
        h.rope_freq_base_swa = (float)g.get_float_or(a + "rope.freq_base_swa", 10000.0);
        h.rope_freq_scale_swa = 1.0f;
    }
    h.final_softcap = (float)g.get_float_or(a + "final_logit_softcapping", 0.0);
    if (h.final_softcap < 0.0f) fail(EMBER_ERR_FORMAT, "final_logit_softcapping must not be negative");
    h.attn_scale = gemma_query_scale(h, 62);
}

void gemma2_bind_model(Model& m) {
    m.output = m.tok_embd;  // the head is the embedding table, whatever else the file holds (llama.cpp)
}

void gemma2_bind_layer(Model& m, int32_t il) {
    const HParams& h = m.hparams();
    bind_attention_weights(m, il);
    bind_ffn_weights(m, il);
    LayerWeights& L = m.layers[(size_t)il];
    L.attn_post_norm = m.layer_weight(il, "post_attention_norm", {h.n_embd});
    L.ffn_post_norm = m.layer_weight(il, "post_ffw_norm", {h.n_embd});
}

void gemma3_bind_layer(Model& m, int32_t il) {
    const HParams& h = m.hparams();
    gemma2_bind_layer(m, il);
    LayerWeights& L = m.layers[(size_t)il];
    L.q_norm = m.layer_weight(il, "attn_q_norm", {h.head_dim});
    L.k_norm = m.layer_weight(il, "attn_k_norm", {h.head_dim});
}

void gemma3_build_graph(GraphBuilder& b) {
    const Model& m = b.model;
    Graph& g = b.g;
    Tensor* x = b.name(g.scale(b.embed(), std::sqrt((float)b.hp.n_embd)), "inp_scaled");
    for (int32_t il = 0; il < b.hp.n_layer; ++il) {
        const LayerWeights& L = m.layers[(size_t)il];
        Tensor* attn = b.attention(il, b.name(b.norm(x, L.attn_norm), "attn_norm", il), x);
        if (!attn) return;  // the batch only fills the cache
        x = b.name(g.add(x, b.name(b.norm(attn, L.attn_post_norm), "attn_post_norm", il)), "ffn_inp", il);
        Tensor* ffn = b.ffn(L, b.name(b.norm(x, L.ffn_norm), "ffn_norm", il), Activation::GELU_TANH, il);
        x = b.name(g.add(x, b.name(b.norm(ffn, L.ffn_post_norm), "ffn_post_norm", il)), "l_out", il);
    }
    b.output(x);
}

}  // namespace ember
