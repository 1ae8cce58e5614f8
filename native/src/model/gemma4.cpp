// Gemma 4 (dense: E2B, E4B, 31B; text): Gemma 3's sandwich blocks (embeddings scaled by
// sqrt(n_embd), per-head Q/K norms, post-attention and post-FFN norms, GELU (tanh) gated
// feed-forward, sliding-window layers, final soft-cap) with:
// - attention scale 1 (the Q/K norms set the scores' size), V RMS-normed without a weight,
//   V = K's projection on layers without attn_v;
// - sliding-window and full layers of different head sizes (key_length_swa), KV head counts
//   and rotated dimensions (rope.dimension_count_swa); the full layers' rope divided by
//   rope_freqs (proportional rope: factors 1e30 leave a head's tail unrotated), the
//   sliding ones on rope.freq_base_swa without factors;
// - per-layer token embeddings (E2B/E4B): n_embd_per_layer floats per block and token, from
//   their own table (times sqrt(n_embd_per_layer)) plus a projection of the scaled input
//   embedding (times 1/sqrt(n_embd), RMS-normed per block slice), the sum times 1/sqrt(2);
//   each block, after its FFN residual, adds the RMS-normed projection of
//   gelu(inp_gate x) * its slice;
// - shared KV: blocks from n_layer - shared_kv_layers on store nothing and attend over the
//   cache of the last earlier block of their kind (HParams::kv_layer);
// - per-layer head counts and FFN widths (arrays), a per-block output scalar
//   (layer_output_scale);
// - 26B-A4B: beside each block's dense MLP (normed after by post_ffw_norm_1), a mixture of
//   experts on pre_ffw_norm_2(x) (normed after by post_ffw_norm_2), routed from
//   rms_norm(x) * ffn_gate_inp.scale / sqrt(n_embd) by a softmax, the chosen renormalised;
//   gate|up in one tensor per block, a factor per expert on its output (ffn_down_exps.scale).
// The order of operations is llama.cpp's src/models/gemma4.cpp.
#include <cmath>

#include "core/error.h"
#include "model/arch.h"
#include "model/build.h"

namespace ember {

void gemma4_read_hparams(const GGUFFile& g, HParams& h) {
    const std::string a = h.arch + ".";
    if (h.n_expert > 0) {
        // 26B-A4B: llama.cpp's gemma4 graph routes with a softmax over all experts, the
        // chosen weights renormalised (and scaled by 1)
        h.expert_gating = ExpertGating::SOFTMAX;
        h.expert_weights_norm = true;
        h.expert_weights_scale = 0.0f;
    }
    h.per_layer_shapes = true;
    h.v_norm = true;
    h.attn_scale = 1.0f;
    h.n_swa = (int32_t)g.get_int(a + "attention.sliding_window");
    if (h.n_swa <= 0) fail(EMBER_ERR_FORMAT, "attention.sliding_window must be positive");
    if (!g.find(a + "attention.sliding_window_pattern"))
        fail(EMBER_ERR_FORMAT, "missing metadata key '" + a + "attention.sliding_window_pattern'");
    read_swa_pattern(g, h, 0);
    h.rope_freq_base_swa = (float)g.get_float_or(a + "rope.freq_base_swa", 10000.0);
    h.rope_freq_scale_swa = 1.0f;
    if (!(h.rope_freq_base_swa > 0.0f)) fail(EMBER_ERR_FORMAT, "rope.freq_base_swa must be positive");

    // the full layers rotate whole heads, rope_freqs (one factor per pair) leaving their tail
    if (h.n_rot != h.head_dim)
        fail(EMBER_ERR_UNSUPPORTED, "rope.dimension_count " + std::to_string(h.n_rot) + " differs from key_length " +
                                        std::to_string(h.head_dim) + " (Gemma 4's full layers rotate whole heads)");
    h.head_dim_swa = (int32_t)g.get_int(a + "attention.key_length_swa");
    const int64_t v_swa = g.get_int(a + "attention.value_length_swa");
    if (h.head_dim_swa <= 0 || h.head_dim_swa > (1 << 16) || h.head_dim_swa % 2)
        fail(EMBER_ERR_FORMAT, "attention.key_length_swa " + std::to_string(h.head_dim_swa) + " is invalid");
    if (v_swa != h.head_dim_swa)
        fail(EMBER_ERR_UNSUPPORTED, "key and value heads of different sizes are not supported");
    const int64_t n_rot_swa = g.get_int_or(a + "rope.dimension_count_swa", h.n_rot);
    if (n_rot_swa <= 0 || n_rot_swa > h.head_dim_swa || n_rot_swa % 2)
        fail(EMBER_ERR_FORMAT, "rope.dimension_count_swa " + std::to_string(n_rot_swa) + " is invalid");
    h.n_rot_swa = (int32_t)n_rot_swa;

    const int64_t n_pl = g.get_int(a + "embedding_length_per_layer_input");
    if (n_pl < 0 || n_pl > (1 << 16))
        fail(EMBER_ERR_FORMAT, "embedding_length_per_layer_input " + std::to_string(n_pl) + " is invalid");
    h.n_embd_per_layer = (int32_t)n_pl;

    const int64_t shared = g.get_int_or(a + "attention.shared_kv_layers", 0);
    if (shared < 0 || shared > h.n_layer - 2)
        fail(EMBER_ERR_FORMAT, "attention.shared_kv_layers " + std::to_string(shared) + " is invalid for " +
                                   std::to_string(h.n_layer) + " layers");
    h.n_layer_kv = h.n_layer - (int32_t)shared;
    for (int32_t il = h.n_layer_kv; il < h.n_layer; ++il) {
        const int32_t src = h.kv_layer(il);
        if (h.is_swa(src) != h.is_swa(il) || h.n_head_kv_of(src) != h.n_head_kv_of(il))
            fail(EMBER_ERR_FORMAT, "layer " + std::to_string(il) + " shares the KV cache of layer " +
                                       std::to_string(src) + ", which has another shape");
    }

    h.final_softcap = (float)g.get_float_or(a + "final_logit_softcapping", 0.0);
    if (h.final_softcap < 0.0f) fail(EMBER_ERR_FORMAT, "final_logit_softcapping must not be negative");
}

void gemma4_bind_model(Model& m) {
    const HParams& h = m.hparams();
    bool any_full = false;
    for (int32_t il = 0; il < h.n_layer; ++il) any_full = any_full || !h.is_swa(il);
    // proportional rope of the full layers (one table for all of them)
    m.rope_freqs = m.weight("rope_freqs.weight", {h.head_dim / 2}, any_full);
    if (h.n_embd_per_layer > 0) {
        const int64_t n_pl = h.n_embd_per_layer, n_all = n_pl * h.n_layer;
        m.per_layer_tok_embd = m.weight("per_layer_token_embd.weight", {n_all, h.n_vocab});
        m.per_layer_model_proj = m.weight("per_layer_model_proj.weight", {h.n_embd, n_all});
        m.per_layer_proj_norm = m.weight("per_layer_proj_norm.weight", {n_pl});
    }
}

void gemma4_bind_layer(Model& m, int32_t il) {
    const HParams& h = m.hparams();
    LayerWeights& L = m.layers[(size_t)il];
    const int64_t hd = h.head_dim_of(il), n_q = hd * h.n_head_of(il), n_kv = hd * h.n_head_kv_of(il);
    L.attn_norm = m.layer_weight(il, "attn_norm", {h.n_embd});
    L.wq = m.layer_weight(il, "attn_q", {h.n_embd, n_q});
    if (h.has_kv(il)) {
        L.wk = m.layer_weight(il, "attn_k", {h.n_embd, n_kv});
        L.wv = m.layer_weight(il, "attn_v", {h.n_embd, n_kv}, false);  // absent: V = K's projection
        L.k_norm = m.layer_weight(il, "attn_k_norm", {hd});
        L.v_norm_ones = m.ones(hd, hd == h.head_dim ? "v_norm_ones" : "v_norm_ones_swa");
    }
    L.wo = m.layer_weight(il, "attn_output", {n_q, h.n_embd});
    L.q_norm = m.layer_weight(il, "attn_q_norm", {hd});
    L.attn_post_norm = m.layer_weight(il, "post_attention_norm", {h.n_embd});
    bind_ffn_weights(m, il);
    L.ffn_post_norm = m.layer_weight(il, "post_ffw_norm", {h.n_embd});
    if (h.n_expert > 0 && m.layer_weight(il, "ffn_gate_inp", {h.n_embd, h.n_expert}, false)) {
        bind_moe_weights(m, il);
        const std::string p = "blk." + std::to_string(il) + ".";
        L.ffn_gate_inp_s = m.weight(p + "ffn_gate_inp.scale", {h.n_embd});
        L.ffn_pre_norm_2 = m.layer_weight(il, "pre_ffw_norm_2", {h.n_embd});
        L.ffn_post_norm_1 = m.layer_weight(il, "post_ffw_norm_1", {h.n_embd});
        L.ffn_post_norm_2 = m.layer_weight(il, "post_ffw_norm_2", {h.n_embd});
    }
    if (h.n_expert > 0 && il == h.n_layer - 1) {
        // a block without a router is dense (as in llama.cpp), but a file that declares
        // experts and gives no block any is not the model it says it is
        bool any = false;
        for (const LayerWeights& l : m.layers) any = any || l.ffn_gate_inp;
        if (!any)
            fail(EMBER_ERR_FORMAT, "expert_count is " + std::to_string(h.n_expert) +
                                       " but no block has experts (ffn_gate_inp.weight)");
    }
    if (h.n_embd_per_layer > 0) {
        L.per_layer_inp_gate = m.layer_weight(il, "inp_gate", {h.n_embd, h.n_embd_per_layer});
        L.per_layer_proj = m.layer_weight(il, "proj", {h.n_embd_per_layer, h.n_embd});
        L.per_layer_post_norm = m.layer_weight(il, "post_norm", {h.n_embd});
    }
    if (const Tensor* s = m.layer_weight(il, "layer_output_scale", {1}, false)) {
        L.out_scale = *static_cast<const float*>(s->data);
        if (!std::isfinite(L.out_scale)) fail(EMBER_ERR_FORMAT, "layer_output_scale is not finite");
    }
}

void gemma4_build_graph(GraphBuilder& b) {
    const Model& m = b.model;
    const HParams& hp = b.hp;
    Graph& g = b.g;
    Tensor* x = b.name(g.scale(b.embed(), std::sqrt((float)hp.n_embd)), "inp_scaled");

    // the per-layer inputs [n_embd_per_layer, n_layer, n_tokens]
    Tensor* per_layer = nullptr;
    if (m.per_layer_tok_embd) {
        const int64_t n_pl = hp.n_embd_per_layer, n_tok = x->ne[1];
        Tensor* tok = g.get_rows(m.per_layer_tok_embd, b.tokens());
        tok = b.name(g.scale(g.reshape(tok, n_pl, hp.n_layer, n_tok), std::sqrt((float)n_pl)),
                     "inp_per_layer_selected");
        Tensor* proj = g.scale(g.mul_mat(m.per_layer_model_proj, x), 1.0f / std::sqrt((float)hp.n_embd));
        proj = b.name(b.norm(g.reshape(proj, n_pl, hp.n_layer, n_tok), m.per_layer_proj_norm), "per_layer_proj");
        per_layer = b.name(g.scale(g.add(proj, tok), 1.0f / std::sqrt(2.0f)), "inp_per_layer");
    }

    for (int32_t il = 0; il < hp.n_layer; ++il) {
        const LayerWeights& L = m.layers[(size_t)il];
        Tensor* factors = hp.is_swa(il) ? nullptr : m.rope_freqs;
        Tensor* attn = b.attention(il, b.name(b.norm(x, L.attn_norm), "attn_norm", il), x, factors);
        if (!attn) return;  // the batch only fills the cache
        x = b.name(g.add(x, b.name(b.norm(attn, L.attn_post_norm), "attn_post_norm", il)), "attn_out", il);
        Tensor* ffn;
        if (L.ffn_gate_inp) {
            // 26B-A4B: the dense MLP and the experts side by side, each normed after; the
            // router reads x RMS-normed, times its scale, / sqrt(n_embd)
            Tensor* mlp = b.ffn(L, b.name(b.norm(x, L.ffn_norm), "ffn_norm_1", il), Activation::GELU_TANH, il);
            mlp = b.name(b.norm(mlp, L.ffn_post_norm_1), "ffn_mlp", il);
            Tensor* rin = g.scale(b.norm(x, L.ffn_gate_inp_s), 1.0f / std::sqrt((float)hp.n_embd));
            Tensor* logits = b.name(g.mul_mat(L.ffn_gate_inp, rin), "ffn_moe_logits", il);
            Tensor* moe = b.moe_ffn(L, b.name(b.norm(x, L.ffn_pre_norm_2), "ffn_norm_2", il), Activation::GELU_TANH,
                                    il, logits);
            moe = b.name(b.norm(moe, L.ffn_post_norm_2), "ffn_moe", il);
            ffn = b.name(g.add(mlp, moe), "ffn_moe_combined", il);
        } else {
            ffn = b.ffn(L, b.name(b.norm(x, L.ffn_norm), "ffn_norm", il), Activation::GELU_TANH, il);
        }
        x = b.name(g.add(x, b.name(b.norm(ffn, L.ffn_post_norm), "ffn_post_norm", il)), "pe_in", il);
        if (per_layer) {
            // this block's slice [n_embd_per_layer, n_tokens] (the last token's alone once the
            // last block has narrowed x to it)
            const int64_t n_tok = per_layer->ne[2];
            const int64_t ne[4] = {per_layer->ne[0], n_tok, 1, 1};
            const size_t nb[4] = {per_layer->nb[0], per_layer->nb[2], per_layer->nb[2] * (size_t)n_tok,
                                  per_layer->nb[2] * (size_t)n_tok};
            Tensor* slice = g.view(per_layer, ne, nb, (size_t)il * per_layer->nb[1]);
            if (x->ne[1] != n_tok) slice = g.column(slice, n_tok - 1);
            Tensor* gated = g.glu(g.mul_mat(L.per_layer_inp_gate, x), slice, Activation::GELU_TANH);
            Tensor* pe = b.name(b.norm(g.mul_mat(L.per_layer_proj, gated), L.per_layer_post_norm),
                                "per_layer_embd_out", il);
            x = g.add(x, pe);
        }
        if (L.out_scale != 1.0f) x = b.name(g.scale(x, L.out_scale), "out_scaled", il);
        b.name(x, "l_out", il);
    }
    b.output(x);
}

}  // namespace ember
