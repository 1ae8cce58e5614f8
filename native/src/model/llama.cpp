// The llama-family forward pass (Llama, TinyLlama, SmolLM, Mistral, Qwen2), read top
// to bottom: embed, then per layer attention and SwiGLU FFN with pre-norms and
// residuals, final norm, output head.
#include <cmath>

#include "model/context.h"

namespace ember {

void build_llama_graph(const Model& model, KVCache& kv, BatchGraph& bg, int32_t n_tokens,
                       Outputs outputs, void* in_tokens, void* in_pos) {
    const HParams& h = model.hparams();
    Graph& g = bg.graph;
    const int64_t N = n_tokens;

    bg.tokens = g.leaf(DType::I32, N, 1, 1, 1, in_tokens, "inp_tokens");
    bg.pos = g.leaf(DType::I32, N, 1, 1, 1, in_pos, "inp_pos");

    Tensor* x = g.get_rows(model.tok_embd, bg.tokens);  // [n_embd, N]
    const float kq_scale = 1.0f / std::sqrt((float)h.head_dim);

    for (int32_t il = 0; il < h.n_layer; ++il) {
        const LayerWeights& L = model.layers[(size_t)il];

        // self-attention
        Tensor* cur = g.rms_norm_mul(x, L.attn_norm, h.rms_eps);
        Tensor* q = g.mul_mat(L.wq, cur);
        Tensor* k = g.mul_mat(L.wk, cur);
        Tensor* v = g.mul_mat(L.wv, cur);
        if (L.bq) q = g.add(q, L.bq);
        if (L.bk) k = g.add(k, L.bk);
        if (L.bv) v = g.add(v, L.bv);
        q = g.reshape(q, h.head_dim, h.n_head, N);
        k = g.reshape(k, h.head_dim, h.n_head_kv, N);
        v = g.reshape(v, h.head_dim, h.n_head_kv, N);
        q = g.rope(q, bg.pos, h.n_rot, h.rope_mode, h.rope_freq_base, h.rope_freq_scale);
        k = g.rope(k, bg.pos, h.n_rot, h.rope_mode, h.rope_freq_base, h.rope_freq_scale);
        Tensor* stored = g.kv_store(k, v, &kv.k[(size_t)il], &kv.v[(size_t)il], bg.pos);
        Tensor* attn = g.attention(q, &kv.k[(size_t)il], &kv.v[(size_t)il], bg.pos, stored, kq_scale);
        x = g.add(x, g.mul_mat(L.wo, attn));

        // feed-forward
        cur = g.rms_norm_mul(x, L.ffn_norm, h.rms_eps);
        Tensor* act = g.swiglu(g.mul_mat(L.ffn_gate, cur), g.mul_mat(L.ffn_up, cur));
        x = g.add(x, g.mul_mat(L.ffn_down, act));
    }

    if (outputs == Outputs::NONE) {
        // the cache is all we want: finish at the last layer's KV store
        g.finalize({x});
        return;
    }
    if (outputs == Outputs::LAST && N > 1) x = g.column(x, N - 1);
    x = g.rms_norm_mul(x, model.output_norm, h.rms_eps);
    bg.logits = g.mul_mat(model.output, x);
    g.finalize({bg.logits});
}

}  // namespace ember
