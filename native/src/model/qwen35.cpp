// Qwen3.5 / Qwen3.6 (dense: 0.8B-27B; text): blocks of two kinds, in llama.cpp's order
// (src/models/qwen35.cpp):
// - gated delta-net blocks (linear attention; three of every four by default): one product
//   to Q|K|V (attn_qkv) and one to the output gate z (attn_gate); a causal depthwise
//   convolution of width ssm.conv_kernel over Q|K|V with SiLU, continuing from the state
//   of the previous tokens; Q and K L2-normed; the gated delta rule per value head (its
//   state a matrix of ssm.state_size squared, value head h reading key head h %
//   group_count), its decay exp(softplus(alpha + dt) * A) and step sigmoid(beta) from two
//   small products; the output RMS-normed per head (ssm_norm), times silu(z), and
//   projected back (ssm_out);
// - gated full-attention blocks: Q projected with a gate per head ([q | gate]), per-head
//   Q/K norms, rope on the first rope.dimension_count dims of each head (the sectioned
//   "interleaved M-RoPE" of the release, which for text, with the same position in every
//   section, is NeoX rope), the attention's output times sigmoid(gate);
// - every block: x += mixer(norm(x)); x += ffn(post_attention_norm(x)) (SwiGLU).
// The multi-token-prediction block some files append (nextn_predict_layers) is not run.
// Qwen3.5-MoE (qwen35moe, 35B-A3B and up) is the same with every block's feed-forward a
// mixture: a softmax router over expert_count experts, expert_used_count chosen and their
// weights renormalised, plus a shared expert whose output is times sigmoid(gate . x).
#include <cmath>
#include <string>

#include "core/error.h"
#include "model/arch.h"
#include "model/build.h"

namespace ember {

void qwen35_read_hparams(const GGUFFile& g, HParams& h) {
    const std::string a = h.arch + ".";
    if (h.arch == "qwen35moe") {
        if (h.n_expert <= 0 || h.n_expert_used <= 0)
            fail(EMBER_ERR_FORMAT, "a qwen35moe model needs expert_count and expert_used_count");
        // llama.cpp's qwen35moe graph: a softmax router whose chosen weights are
        // renormalised, then a shared expert gated by sigmoid(ffn_gate_inp_shexp . x)
        h.expert_gating = ExpertGating::SOFTMAX;
        h.expert_weights_norm = true;
        const int64_t shexp = g.get_int_or(a + "expert_shared_feed_forward_length", h.n_ff);
        if (shexp <= 0 || shexp > (1 << 20))
            fail(EMBER_ERR_FORMAT, "expert_shared_feed_forward_length " + std::to_string(shexp) + " is invalid");
        h.n_ff_shexp = (int32_t)shexp;
    } else if (h.n_expert > 0) {
        fail(EMBER_ERR_FORMAT, "a qwen35 file has expert_count: its architecture should be qwen35moe");
    }
    // the MTP block(s) come after the trunk's blocks and are not run
    const int64_t nextn = g.get_int_or(a + "nextn_predict_layers", 0);
    if (nextn < 0 || nextn >= h.n_layer)
        fail(EMBER_ERR_FORMAT, "nextn_predict_layers " + std::to_string(nextn) + " is invalid for " +
                                   std::to_string(h.n_layer) + " blocks");
    h.n_layer -= (int32_t)nextn;
    for (std::vector<int32_t>* v : {&h.n_head_layer, &h.n_head_kv_layer, &h.n_ff_layer})
        if ((int64_t)v->size() > h.n_layer) v->resize((size_t)h.n_layer);

    auto ssm_key = [&](const char* k, int64_t hi) {
        const int64_t v = g.get_int(a + k);
        if (v <= 0 || v > hi) fail(EMBER_ERR_FORMAT, "metadata key '" + a + k + "' has an invalid value " + std::to_string(v));
        return (int32_t)v;
    };
    h.ssm_d_conv = ssm_key("ssm.conv_kernel", 16);
    h.ssm_d_inner = ssm_key("ssm.inner_size", 1 << 20);
    h.ssm_d_state = ssm_key("ssm.state_size", 1024);
    h.ssm_dt_rank = ssm_key("ssm.time_step_rank", 4096);
    h.ssm_n_group = ssm_key("ssm.group_count", 4096);
    if (h.ssm_d_conv < 2) fail(EMBER_ERR_FORMAT, "ssm.conv_kernel must be at least 2");
    if (h.ssm_dt_rank % h.ssm_n_group != 0)
        fail(EMBER_ERR_FORMAT, "ssm.time_step_rank " + std::to_string(h.ssm_dt_rank) +
                                   " (value heads) is not a multiple of ssm.group_count " +
                                   std::to_string(h.ssm_n_group) + " (key heads)");
    if ((int64_t)h.ssm_d_inner != (int64_t)h.ssm_d_state * h.ssm_dt_rank)
        fail(EMBER_ERR_UNSUPPORTED, "ssm.inner_size " + std::to_string(h.ssm_d_inner) +
                                        " is not state_size x time_step_rank (key and value heads of one size)");

    // which blocks are recurrent: a flag per block, else every full_attention_interval-th
    // block (counting from 1) attends
    h.recurrent_layers.assign((size_t)h.n_layer, 0);
    const GGUFValue* flags = g.find(a + "attention.recurrent_layers");
    if (flags && flags->type == GGUFType::ARRAY) {
        std::vector<int64_t> f;
        if (flags->elem_type == GGUFType::BOOL && flags->array_data) {
            for (uint64_t i = 0; i < flags->n_elems; ++i) f.push_back(flags->array_data[i] != 0);
        } else {
            f = g.get_int_array(a + "attention.recurrent_layers");
        }
        if ((int64_t)f.size() < h.n_layer)
            fail(EMBER_ERR_FORMAT, "attention.recurrent_layers has fewer entries than blocks");
        for (int32_t il = 0; il < h.n_layer; ++il) h.recurrent_layers[(size_t)il] = f[(size_t)il] != 0;
    } else {
        const int64_t interval = g.get_int_or(a + "full_attention_interval", 4);
        if (interval <= 0 || interval > h.n_layer + 1)
            fail(EMBER_ERR_FORMAT, "full_attention_interval " + std::to_string(interval) + " is invalid");
        for (int32_t il = 0; il < h.n_layer; ++il) h.recurrent_layers[(size_t)il] = (il + 1) % interval != 0;
    }
    h.attn_q_gate = true;

    // Interleaved M-RoPE: rotated pair i reads the position of section (i % sum) by
    // llama.cpp's rule; text gives the temporal, height and width sections the same
    // position (NeoX rope), the fourth the position 0 (no rotation), which Ember does not
    // do yet: refuse files whose sections send a pair there.
    if (g.find(a + "rope.dimension_sections")) {
        std::vector<int64_t> s = g.get_int_array(a + "rope.dimension_sections");
        s.resize(4, 0);
        int64_t sum = 0;
        for (int64_t v : s) {
            if (v < 0 || v > 4096) fail(EMBER_ERR_FORMAT, "rope.dimension_sections has an invalid entry");
            sum += v;
        }
        if (sum <= 0) fail(EMBER_ERR_FORMAT, "rope.dimension_sections are all 0");
        for (int64_t i = 0; i < h.n_rot / 2; ++i) {
            const int64_t sector = i % sum;
            const bool thw = (sector % 3 == 0 && sector < 3 * s[0]) || (sector % 3 == 1 && sector < 3 * s[1]) ||
                             (sector % 3 == 2 && sector < 3 * s[2]);
            if (!thw)
                fail(EMBER_ERR_UNSUPPORTED, "rope.dimension_sections send rotated pair " + std::to_string(i) +
                                                " to the fourth section, which is not supported");
        }
    }
}

void qwen35_bind_layer(Model& m, int32_t il) {
    const HParams& h = m.hparams();
    LayerWeights& L = m.layers[(size_t)il];
    const int64_t E = h.n_embd;
    L.attn_norm = m.layer_weight(il, "attn_norm", {E});
    L.attn_post_norm = m.layer_weight(il, "post_attention_norm", {E});
    if (h.is_recurrent(il)) {
        const int64_t S = h.ssm_d_state, H = h.ssm_dt_rank, value = h.ssm_d_inner, C = h.ssm_conv_channels();
        const std::string p = "blk." + std::to_string(il) + ".";
        L.ssm_in = m.layer_weight(il, "attn_qkv", {E, C});
        L.ssm_z = m.layer_weight(il, "attn_gate", {E, value});
        L.ssm_conv1d = m.layer_weight(il, "ssm_conv1d", {h.ssm_d_conv, C});
        if (L.ssm_conv1d->type != DType::F32 && L.ssm_conv1d->type != DType::F16)
            fail(EMBER_ERR_UNSUPPORTED, "tensor '" + p + "ssm_conv1d.weight' must be F32 or F16");
        L.ssm_dt = m.weight(p + "ssm_dt.bias", {H});
        L.ssm_a = m.weight(p + "ssm_a", {H});
        L.ssm_beta = m.layer_weight(il, "ssm_beta", {E, H});
        L.ssm_alpha = m.layer_weight(il, "ssm_alpha", {E, H});
        L.ssm_norm = m.layer_weight(il, "ssm_norm", {S});
        L.ssm_out = m.layer_weight(il, "ssm_out", {value, E});
    } else {
        const int64_t hd = h.head_dim, nq = hd * h.n_head_of(il), nkv = hd * h.n_head_kv_of(il);
        L.wq = m.layer_weight(il, "attn_q", {E, 2 * nq});  // [q | gate] per head
        L.wk = m.layer_weight(il, "attn_k", {E, nkv});
        L.wv = m.layer_weight(il, "attn_v", {E, nkv});
        L.wo = m.layer_weight(il, "attn_output", {nq, E});
        L.q_norm = m.layer_weight(il, "attn_q_norm", {hd});
        L.k_norm = m.layer_weight(il, "attn_k_norm", {hd});
    }
    if (h.n_expert > 0) {
        bind_moe_weights(m, il);
        L.ffn_gate_inp_shexp = m.layer_weight(il, "ffn_gate_inp_shexp", {E});
        L.ffn_gate_shexp = m.layer_weight(il, "ffn_gate_shexp", {E, h.n_ff_shexp});
        L.ffn_up_shexp = m.layer_weight(il, "ffn_up_shexp", {E, h.n_ff_shexp});
        L.ffn_down_shexp = m.layer_weight(il, "ffn_down_shexp", {h.n_ff_shexp, E});
        return;
    }
    L.ffn_gate = m.layer_weight(il, "ffn_gate", {E, h.n_ff_of(il)});
    L.ffn_up = m.layer_weight(il, "ffn_up", {E, h.n_ff_of(il)});
    L.ffn_down = m.layer_weight(il, "ffn_down", {h.n_ff_of(il), E});
}

namespace {

// A [S, heads, N] view of the convolution's output rows, `offset` floats in.
Tensor* conv_heads(Graph& g, Tensor* conv, int64_t S, int64_t heads, int64_t offset) {
    const int64_t ne[4] = {S, heads, conv->ne[1], 1};
    const size_t nb[4] = {sizeof(float), (size_t)S * sizeof(float), conv->nb[1], conv->nb[1] * (size_t)conv->ne[1]};
    return g.view(conv, ne, nb, (size_t)offset * sizeof(float));
}

// The gated delta-net mixer of block il on its normed input [n_embd, N] -> [n_embd, N],
// or (a batch that only fills the memories, when this is the last block with a state)
// the graph finished and null.
Tensor* delta_net_block(GraphBuilder& b, int32_t il, Tensor* cur) {
    const HParams& h = b.hp;
    const LayerWeights& L = b.model.layers[(size_t)il];
    Graph& g = b.g;
    const int64_t S = h.ssm_d_state, H = h.ssm_dt_rank, Hk = h.ssm_n_group, N = cur->ne[1];
    Tensor* qkv = b.name(g.mul_mat(L.ssm_in, cur), "linear_attn_qkv_mixed", il);
    Tensor* z = b.name(g.mul_mat(L.ssm_z, cur), "z", il);
    Tensor* beta = b.name(g.mul_mat(L.ssm_beta, cur), "beta", il);
    Tensor* alpha = b.name(g.mul_mat(L.ssm_alpha, cur), "alpha", il);
    Tensor* gates = b.name(g.gdn_gates(alpha, beta, L.ssm_dt, L.ssm_a), "gate", il);
    Tensor* conv = b.name(g.ssm_conv(qkv, L.ssm_conv1d, b.conv_state(il), true), "conv_output_silu", il);
    Tensor* q = conv_heads(g, conv, S, Hk, 0);
    Tensor* k = conv_heads(g, conv, S, Hk, S * Hk);
    Tensor* v = conv_heads(g, conv, S, H, 2 * S * Hk);
    Tensor* o = b.name(g.delta_net(q, k, v, gates, b.ssm_state(il), true, h.rms_eps), "attn_output", il);
    if (il == h.last_stateful_layer() && b.outputs() == Outputs::NONE) {
        g.finalize({o});
        return nullptr;
    }
    Tensor* normed = b.norm(o, L.ssm_norm);
    Tensor* gated = g.glu(g.reshape(z, S, H, N), normed, Activation::SILU);
    gated = b.name(g.reshape(gated, S * H, N), "final_output", il);
    return b.name(g.mul_mat(L.ssm_out, gated), "linear_attn_out", il);
}

}  // namespace

void qwen35_build_graph(GraphBuilder& b) {
    const Model& m = b.model;
    const HParams& hp = b.hp;
    Graph& g = b.g;
    Tensor* x = b.embed();
    for (int32_t il = 0; il < hp.n_layer; ++il) {
        const LayerWeights& L = m.layers[(size_t)il];
        Tensor* cur = b.name(b.norm(x, L.attn_norm), "attn_norm", il);
        if (hp.is_recurrent(il)) {
            cur = delta_net_block(b, il, cur);
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
        x = b.name(g.add(cur, x), "attn_residual", il);
        Tensor* normed = b.name(b.norm(x, L.attn_post_norm), "attn_post_norm", il);
        Tensor* ffn = L.ffn_gate_inp ? b.moe_ffn(L, normed, Activation::SILU, il) : b.ffn(L, normed, Activation::SILU, il);
        x = b.name(g.add(ffn, x), "l_out", il);
    }
    b.output(x);
}

}  // namespace ember
