#include "model/build.h"

#include <cmath>
#include <cstdio>

namespace ember {

namespace {

// A [ne0, ne1, N] view into the rows of a 2-D product, starting `offset` floats into
// each row: the Q, K or V part of a fused QKV product.
Tensor* split_heads(Graph& g, Tensor* fused, int64_t ne0, int64_t ne1, int64_t offset) {
    const int64_t ne[4] = {ne0, ne1, fused->ne[1], 1};
    const size_t nb[4] = {sizeof(float), (size_t)ne0 * sizeof(float), fused->nb[1], fused->nb[1] * (size_t)fused->ne[1]};
    return g.view(fused, ne, nb, (size_t)offset * sizeof(float));
}

// The last token of a [ne0, ne1, N] tensor as a [ne0, ne1, 1] view.
Tensor* last_token(Graph& g, Tensor* t) {
    const int64_t ne[4] = {t->ne[0], t->ne[1], 1, 1};
    const size_t nb[4] = {t->nb[0], t->nb[1], t->nb[2], t->nb[2]};
    return g.view(t, ne, nb, (size_t)(t->ne[2] - 1) * t->nb[2]);
}

}  // namespace

GraphBuilder::GraphBuilder(const Model& m, KVCache& kv, RecurrentState* rs, BatchGraph& bg, int32_t n_tokens,
                           Outputs outputs, int32_t n_ctx, void* in_tokens, void* in_pos)
    : model(m), hp(m.hparams()), g(bg.graph), kv_(kv), rs_(rs), bg_(bg), n_tokens_(n_tokens), outputs_(outputs),
      n_ctx_(n_ctx) {
    bg.tokens = g.leaf(DType::I32, n_tokens, 1, 1, 1, in_tokens, "inp_tokens");
    bg.pos = g.leaf(DType::I32, n_tokens, 1, 1, 1, in_pos, "inp_pos");
}

Tensor* GraphBuilder::name(Tensor* t, const char* what, int32_t il) {
    char buf[kMaxName];
    if (il >= 0) std::snprintf(buf, sizeof buf, "%s-%d", what, (int)il);
    else std::snprintf(buf, sizeof buf, "%s", what);
    t->set_name(buf);
    return t;
}

Tensor* GraphBuilder::embed() { return name(g.get_rows(model.tok_embd, bg_.tokens), "inp_embd"); }

Tensor* GraphBuilder::norm(Tensor* x, Tensor* weight) { return g.rms_norm_mul(x, weight, hp.rms_eps); }

RopeParams GraphBuilder::rope_params(int32_t il) const {
    RopeParams rp;
    rp.n_rot = hp.n_rot_of(il);
    rp.mode = hp.rope_mode;
    const bool swa = hp.is_swa(il);
    rp.freq_base = swa ? hp.rope_freq_base_swa : hp.rope_freq_base;
    rp.freq_scale = swa ? hp.rope_freq_scale_swa : hp.rope_freq_scale;
    rp.ext_factor = hp.rope_ext_factor;
    rp.attn_factor = hp.rope_attn_factor;
    rp.beta_fast = hp.yarn_beta_fast;
    rp.beta_slow = hp.yarn_beta_slow;
    rp.n_ctx_orig = hp.n_ctx_orig;
    return rp;
}

Tensor* GraphBuilder::attention(int32_t il, Tensor* cur, Tensor*& residual, Tensor* rope_factors) {
    const LayerWeights& L = model.layers[(size_t)il];
    const bool last_layer = il == hp.n_layer - 1;
    const int64_t N = n_tokens_, hd = hp.head_dim_of(il), n_head = hp.n_head_of(il), n_head_kv = hp.n_head_kv_of(il);
    const RopeParams rp = rope_params(il);
    const bool rope = hp.ropes(il);
    // the cache this block attends over: its own, or (shared KV) an earlier block's
    const int32_t src = hp.kv_layer(il);
    if (stored_.empty()) stored_.assign((size_t)hp.n_layer, nullptr);

    // keys and values of every token go to the cache
    Tensor* q = nullptr;
    if (hp.has_kv(il)) {
        Tensor *k, *v;
        if (L.wqkv) {
            Tensor* qkv = g.mul_mat(L.wqkv, cur);
            q = split_heads(g, qkv, hd, n_head, 0);
            k = split_heads(g, qkv, hd, n_head_kv, hd * n_head);
            v = split_heads(g, qkv, hd, n_head_kv, hd * (n_head + n_head_kv));
        } else {
            k = g.mul_mat(L.wk, cur);
            v = L.wv ? g.mul_mat(L.wv, cur) : k;  // no attn_v (Gemma 4's full layers): V is K's projection
            if (L.bk) k = g.add(k, L.bk);
            if (L.bv) v = g.add(v, L.bv);
            k = g.reshape(k, hd, n_head_kv, N);
            v = g.reshape(v, hd, n_head_kv, N);
        }
        if (L.k_norm) k = name(norm(k, L.k_norm), "Kcur_normed", il);
        if (hp.v_norm) v = name(norm(v, L.v_norm_ones), "Vcur_normed", il);
        k = name(rope ? g.rope(k, bg_.pos, rp, rope_factors) : k, "Kcur", il);
        name(v, "Vcur", il);
        stored_[(size_t)il] = g.kv_store(k, v, &kv_.k[(size_t)il], &kv_.v[(size_t)il], bg_.pos);
        // the last block that stores (keys and values, or a recurrent state): from there on
        // a batch that only fills the memories is done
        if (il == hp.last_stateful_layer() && outputs_ == Outputs::NONE) {
            g.finalize({stored_[(size_t)il]});
            return nullptr;
        }
    }
    Tensor* stored = stored_[(size_t)src];

    // From the last layer's queries on, only the rows whose logits are wanted go on
    // (the same operations per row, so the same bits as computing every row).
    Tensor* pos = bg_.pos;
    if (last_layer && outputs_ == Outputs::LAST && N > 1) {
        if (q) q = last_token(g, q);
        else cur = g.column(cur, N - 1);
        residual = g.column(residual, N - 1);
        const int64_t ne[4] = {1, 1, 1, 1};
        const size_t nb[4] = {sizeof(int32_t), sizeof(int32_t), sizeof(int32_t), sizeof(int32_t)};
        pos = g.view(bg_.pos, ne, nb, (size_t)(N - 1) * sizeof(int32_t));
    }
    Tensor* gate = nullptr;  // attn_q_gate: sigmoid(gate) scales the attention's output
    if (!q) {
        q = g.mul_mat(L.wq, cur);
        if (L.bq) q = g.add(q, L.bq);
        if (hp.attn_q_gate) {
            // per head [q | gate], hd floats each
            const int64_t n = cur->ne[1];
            const int64_t ne[4] = {hd, n_head, n, 1};
            const size_t nb[4] = {sizeof(float), 2 * (size_t)hd * sizeof(float), q->nb[1], q->nb[1] * (size_t)n};
            Tensor* full = q;
            q = g.view(full, ne, nb, 0);
            gate = g.view(full, ne, nb, (size_t)hd * sizeof(float));
        } else {
            q = g.reshape(q, hd, n_head, cur->ne[1]);
        }
    }
    if (L.q_norm) q = name(norm(q, L.q_norm), "Qcur_normed", il);
    RopeParams rq = rp;
    rq.temp_scale = hp.attn_temp_scale;
    rq.temp_floor = hp.n_ctx_orig;
    q = name(rope ? g.rope(q, pos, rq, rope_factors) : q, "Qcur", il);
    const float scale = hp.attn_scale > 0.0f ? hp.attn_scale : 1.0f / std::sqrt((float)hd);
    Tensor* attn = g.attention(q, &kv_.k[(size_t)src], &kv_.v[(size_t)src], pos, stored, scale,
                               hp.is_swa(il) ? hp.n_swa : 0, hp.attn_softcap, L.attn_sinks);
    name(attn, "kqv_out", il);
    if (gate) {
        const int64_t n = attn->ne[1];
        attn = g.glu(gate, g.reshape(attn, hd, n_head, n), Activation::SIGMOID);
        attn = name(g.reshape(attn, hd * n_head, n), "attn_gated", il);
    }
    Tensor* out = g.mul_mat(L.wo, attn);
    if (L.bo) out = g.add(out, L.bo);
    return name(out, "attn_out", il);
}

Tensor* GraphBuilder::ffn(const LayerWeights& L, Tensor* cur, Activation act, int32_t il) {
    Tensor* h;
    if (L.ffn_gate) {
        h = g.glu(g.mul_mat(L.ffn_gate, cur), g.mul_mat(L.ffn_up, cur), act);
    } else {
        // one product holds the gate rows, then the up rows
        Tensor* gu = g.mul_mat(L.ffn_up, cur);
        const int64_t n_ff = gu->ne[0] / 2;
        const int64_t ne[4] = {n_ff, gu->ne[1], 1, 1};
        const size_t nb[4] = {sizeof(float), gu->nb[1], gu->nb[1] * (size_t)gu->ne[1], gu->nb[1] * (size_t)gu->ne[1]};
        h = g.glu(g.view(gu, ne, nb, 0), g.view(gu, ne, nb, (size_t)n_ff * sizeof(float)), act);
    }
    name(h, "ffn_gate_par", il);
    return name(g.mul_mat(L.ffn_down, h), "ffn_out", il);
}

Tensor* GraphBuilder::moe_ffn(const LayerWeights& L, Tensor* cur, Activation act, int32_t il, Tensor* router_logits) {
    Tensor* logits = router_logits;
    if (!logits) {
        logits = g.mul_mat(L.ffn_gate_inp, cur);  // [n_expert, N]
        if (L.ffn_gate_inp_b) logits = g.add(logits, L.ffn_gate_inp_b);
        name(logits, "ffn_moe_logits", il);
    }
    Tensor* ids = name(g.moe_route(logits, L.ffn_exp_probs_b, hp.n_expert_used, hp.expert_gating), "ffn_moe_topk", il);
    Tensor* weights = name(g.moe_weights(logits, ids, hp.expert_gating, hp.expert_weights_norm, hp.expert_weights_scale,
                                         L.ffn_down_exps_s),
                           "ffn_moe_weights", il);
    Tensor *up, *gate;
    if (L.ffn_gate_up_exps) {
        // one product per expert, its gate rows then its up rows: [2 n_ff_exp, k, N]
        Tensor* gu = name(g.mul_mat_id(L.ffn_gate_up_exps, cur, ids), "ffn_moe_gate_up", il);
        const int64_t ne[4] = {gu->ne[0] / 2, gu->ne[1], gu->ne[2], 1};
        const size_t nb[4] = {gu->nb[0], gu->nb[1], gu->nb[2], gu->nb[3]};
        gate = g.view(gu, ne, nb, 0);
        up = g.view(gu, ne, nb, (size_t)ne[0] * sizeof(float));
    } else {
        up = name(g.mul_mat_id(L.ffn_up_exps, cur, ids, L.ffn_up_exps_b), "ffn_moe_up", il);
        gate = name(g.mul_mat_id(L.ffn_gate_exps, cur, ids, L.ffn_gate_exps_b), "ffn_moe_gate", il);
    }
    // [n_ff_exp, k, N]; gpt-oss's constants as llama.cpp fixes them
    Tensor* h = name(act == Activation::SWIGLU_OAI ? g.swiglu_oai(gate, up, 1.702f, 7.0f) : g.glu(gate, up, act),
                     "ffn_moe_swiglu", il);
    Tensor* down = name(g.mul_mat_id(L.ffn_down_exps, h, ids, L.ffn_down_exps_b), "ffn_moe_down", il);
    Tensor* out = name(g.moe_sum(down, weights), "ffn_moe_out", il);
    if (!L.ffn_up_shexp) return out;

    Tensor* sh = g.mul_mat(L.ffn_down_shexp, g.glu(g.mul_mat(L.ffn_gate_shexp, cur), g.mul_mat(L.ffn_up_shexp, cur), act));
    name(sh, "ffn_shexp", il);
    if (L.ffn_gate_inp_shexp) {
        // sigmoid of one logit per token, as the weight of a one-expert mixture: the
        // router's ops give it without an elementwise product op
        Tensor* gl = name(g.mul_mat(L.ffn_gate_inp_shexp, cur), "shared_expert_gate", il);  // [1, N]
        Tensor* only = g.moe_route(gl, nullptr, 1, ExpertGating::SIGMOID);
        Tensor* w = g.moe_weights(gl, only, ExpertGating::SIGMOID, false, 0.0f);
        sh = name(g.moe_sum(g.reshape(sh, sh->ne[0], 1, sh->ne[1]), w), "ffn_shexp_gated", il);
    }
    return g.add(out, sh);
}

void GraphBuilder::output(Tensor* x) {
    x = name(norm(x, model.output_norm), "result_norm");
    Tensor* logits = g.mul_mat(model.output, x);
    if (hp.final_softcap > 0.0f) logits = g.softcap(logits, hp.final_softcap);
    name(logits, "result_output");
    bg_.logits = logits;
    g.finalize({logits});
}

void GraphBuilder::encoder_output(Tensor* x) {
    bg_.embd = name(x, "result_embd");
    g.finalize({x});
}

}  // namespace ember
