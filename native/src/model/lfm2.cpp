// LFM2 / LFM2.5 (Liquid AI, 350M-2.6B; text): blocks of two kinds, in llama.cpp's order
// (src/models/lfm2.cpp):
// - short-convolution blocks (the blocks with 0 KV heads): one product to three gates
//   B|C|X (shortconv.in_proj), B * X through a causal depthwise convolution of width
//   shortconv.l_cache over time (no activation), continuing from the block's last
//   l_cache - 1 inputs, times C, projected back (shortconv.out_proj);
// - attention blocks: per-head Q/K norms, NeoX rope, the usual scale (optionally over a
//   sliding window, attention.sliding_window);
// - every block: x += mixer(attn_norm(x)); x += ffn(ffn_norm(x)) (SwiGLU); the final norm
//   is token_embd_norm (llama.cpp's name for it in these files).
// LFM2-MoE (lfm2moe: 8B-A1B, 24B-A2B) is the same with the blocks after
// leading_dense_block_count a mixture: sigmoid gates, a selection bias (exp_probs_b), the
// chosen weights renormalised.
// The convolution's inputs are the block's recurrent state (model/recurrent_state.h): a
// convolution state only, no delta-rule matrix, so a snapshot is small.
#include <string>

#include "core/error.h"
#include "model/arch.h"
#include "model/build.h"

namespace ember {

void lfm2_read_hparams(const GGUFFile& g, HParams& h) {
    const std::string a = h.arch + ".";
    if (h.arch == "lfm2moe") {
        // llama.cpp's lfm2moe graph: after the leading dense blocks, experts chosen by the
        // file's gating (sigmoid in the converter) plus a selection bias, the chosen
        // weights renormalised
        if (h.n_expert <= 0 || h.n_expert_used <= 0)
            fail(EMBER_ERR_FORMAT, "an lfm2moe model needs expert_count and expert_used_count");
        h.expert_weights_norm = true;
        const int64_t lead = g.get_int_or(a + "leading_dense_block_count", 0);
        if (lead < 0 || lead > h.n_layer)
            fail(EMBER_ERR_FORMAT, "leading_dense_block_count " + std::to_string(lead) + " is invalid");
        h.n_layer_dense_lead = (int32_t)lead;
    } else if (h.n_expert > 0) {
        fail(EMBER_ERR_FORMAT, "an lfm2 file has expert_count: its architecture should be lfm2moe");
    }
    const int64_t l_cache = g.get_int(a + "shortconv.l_cache");
    if (l_cache < 2 || l_cache > 16)
        fail(EMBER_ERR_FORMAT, "shortconv.l_cache " + std::to_string(l_cache) + " is invalid (2-16)");
    // the convolution blocks are those without KV heads
    h.recurrent_layers.assign((size_t)h.n_layer, 0);
    for (int32_t il = 0; il < h.n_layer; ++il) h.recurrent_layers[(size_t)il] = h.n_head_kv_layer[(size_t)il] == 0;
    h.ssm_d_conv = (int32_t)l_cache;
    h.ssm_d_inner = h.n_embd;  // the convolution runs over n_embd channels
    h.ssm_d_state = h.ssm_n_group = h.ssm_dt_rank = 0;
    h.per_layer_shapes = true;  // KV heads 0 on the convolution blocks
    for (int32_t il = 0; il < h.n_layer; ++il)
        if (h.n_head_layer[(size_t)il] != h.n_head || (!h.is_recurrent(il) && h.n_head_kv_layer[(size_t)il] != h.n_head_kv) ||
            (il < h.n_layer_dense_lead || h.n_expert == 0 ? h.n_ff_layer[(size_t)il] != h.n_ff : false))
            fail(EMBER_ERR_UNSUPPORTED, "an lfm2 file whose attention blocks differ in shape is not supported");
    h.n_swa = (int32_t)g.get_int_or(a + "attention.sliding_window", 0);
    if (h.n_swa < 0) fail(EMBER_ERR_FORMAT, "attention.sliding_window must not be negative");
    if (h.n_swa > 0) {
        h.swa_layers.assign((size_t)h.n_layer, 0);
        for (int32_t il = 0; il < h.n_layer; ++il) h.swa_layers[(size_t)il] = !h.is_recurrent(il);
        h.rope_freq_base_swa = h.rope_freq_base;
        h.rope_freq_scale_swa = h.rope_freq_scale;
    }
}

void lfm2_bind_model(Model& m) {
    m.output_norm = m.weight("token_embd_norm.weight", {m.hparams().n_embd});
}

void lfm2_bind_layer(Model& m, int32_t il) {
    const HParams& h = m.hparams();
    LayerWeights& L = m.layers[(size_t)il];
    const int64_t E = h.n_embd;
    if (h.is_recurrent(il)) {
        L.attn_norm = m.layer_weight(il, "attn_norm", {E});
        L.ssm_in = m.layer_weight(il, "shortconv.in_proj", {E, 3 * E});
        L.ssm_conv1d = m.layer_weight(il, "shortconv.conv", {h.ssm_d_conv, E});
        if (L.ssm_conv1d->type != DType::F32 && L.ssm_conv1d->type != DType::F16)
            fail(EMBER_ERR_UNSUPPORTED, "tensor 'blk." + std::to_string(il) + ".shortconv.conv.weight' must be F32 or F16");
        L.ssm_out = m.layer_weight(il, "shortconv.out_proj", {E, E});
    } else {
        bind_attention_weights(m, il);
        L.q_norm = m.layer_weight(il, "attn_q_norm", {h.head_dim});
        L.k_norm = m.layer_weight(il, "attn_k_norm", {h.head_dim});
    }
    if (h.n_expert > 0 && il >= h.n_layer_dense_lead) {
        L.ffn_norm = m.layer_weight(il, "ffn_norm", {E});
        bind_moe_weights(m, il);
        if (!L.ffn_exp_probs_b)
            fail(EMBER_ERR_FORMAT, "missing tensor 'blk." + std::to_string(il) + ".exp_probs_b.bias'");
    } else {
        bind_ffn_weights(m, il);
    }
}

namespace {

// A [E, N] view of one third of the in-projection's rows (B, C or X).
Tensor* third(Graph& g, Tensor* bcx, int i) {
    const int64_t E = bcx->ne[0] / 3;
    const int64_t ne[4] = {E, bcx->ne[1], 1, 1};
    const size_t nb[4] = {sizeof(float), bcx->nb[1], bcx->nb[1] * (size_t)bcx->ne[1], bcx->nb[1] * (size_t)bcx->ne[1]};
    return g.view(bcx, ne, nb, (size_t)(i * E) * sizeof(float));
}

// The short-convolution mixer of block il on its normed input [n_embd, N], or (a batch that
// only fills the memories, at the last block with a state) the graph finished and null.
Tensor* shortconv_block(GraphBuilder& b, int32_t il, Tensor* cur) {
    const LayerWeights& L = b.model.layers[(size_t)il];
    Graph& g = b.g;
    Tensor* bcx = b.name(g.mul_mat(L.ssm_in, cur), "conv_in_proj", il);
    Tensor* bx = b.name(g.glu(third(g, bcx, 0), third(g, bcx, 2), Activation::LINEAR), "conv_bx", il);
    Tensor* conv = b.name(g.ssm_conv(bx, L.ssm_conv1d, b.conv_state(il), false), "conv_conv", il);
    if (il == b.hp.last_stateful_layer() && b.outputs() == Outputs::NONE) {
        g.finalize({conv});
        return nullptr;
    }
    Tensor* y = b.name(g.glu(third(g, bcx, 1), conv, Activation::LINEAR), "conv_cy", il);
    return b.name(g.mul_mat(L.ssm_out, y), "conv_out_proj", il);
}

}  // namespace

void lfm2_build_graph(GraphBuilder& b) {
    const Model& m = b.model;
    const HParams& hp = b.hp;
    Graph& g = b.g;
    Tensor* x = b.embed();
    for (int32_t il = 0; il < hp.n_layer; ++il) {
        const LayerWeights& L = m.layers[(size_t)il];
        Tensor* cur = b.name(b.norm(x, L.attn_norm), "operator_norm", il);
        if (hp.is_recurrent(il)) {
            cur = shortconv_block(b, il, cur);
            if (!cur) return;
            if (il == hp.n_layer - 1 && b.outputs() == Outputs::LAST && b.n_tokens() > 1) {
                // the last block: only the last token's row goes on
                cur = g.column(cur, b.n_tokens() - 1);
                x = g.column(x, b.n_tokens() - 1);
            }
        } else {
            cur = b.attention(il, cur, x);
            if (!cur) return;  // the batch only fills the memories
        }
        x = b.name(g.add(x, cur), "ffn_inp", il);
        Tensor* normed = b.name(b.norm(x, L.ffn_norm), "ffn_norm", il);
        Tensor* ffn = L.ffn_gate_inp ? b.moe_ffn(L, normed, Activation::SILU, il) : b.ffn(L, normed, Activation::SILU, il);
        x = b.name(g.add(x, ffn), "l_out", il);
    }
    b.output(x);
}

}  // namespace ember
