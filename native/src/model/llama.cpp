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
        const bool last_layer = il == h.n_layer - 1;

        // self-attention: keys and values of every token go to the cache
        Tensor* cur = g.rms_norm_mul(x, L.attn_norm, h.rms_eps);
        Tensor* k = g.mul_mat(L.wk, cur);
        Tensor* v = g.mul_mat(L.wv, cur);
        if (L.bk) k = g.add(k, L.bk);
        if (L.bv) v = g.add(v, L.bv);
        k = g.reshape(k, h.head_dim, h.n_head_kv, N);
        v = g.reshape(v, h.head_dim, h.n_head_kv, N);
        k = g.rope(k, bg.pos, h.n_rot, h.rope_mode, h.rope_freq_base, h.rope_freq_scale);
        Tensor* stored = g.kv_store(k, v, &kv.k[(size_t)il], &kv.v[(size_t)il], bg.pos);
        if (last_layer && outputs == Outputs::NONE) {
            // the cache is all we want: finish at the last layer's KV store
            g.finalize({stored});
            return;
        }
        // From the last layer's queries on, only the rows whose logits are wanted go on
        // (the same operations per row, so the same bits as computing every row).
        Tensor* pos = bg.pos;
        if (last_layer && outputs == Outputs::LAST && N > 1) {
            cur = g.column(cur, N - 1);
            x = g.column(x, N - 1);
            const int64_t ne[4] = {1, 1, 1, 1};
            const size_t nb[4] = {sizeof(int32_t), sizeof(int32_t), sizeof(int32_t), sizeof(int32_t)};
            pos = g.view(bg.pos, ne, nb, (size_t)(N - 1) * sizeof(int32_t));
        }
        const int64_t nq = cur->ne[1];
        Tensor* q = g.mul_mat(L.wq, cur);
        if (L.bq) q = g.add(q, L.bq);
        q = g.reshape(q, h.head_dim, h.n_head, nq);
        q = g.rope(q, pos, h.n_rot, h.rope_mode, h.rope_freq_base, h.rope_freq_scale);
        Tensor* attn = g.attention(q, &kv.k[(size_t)il], &kv.v[(size_t)il], pos, stored, kq_scale);
        x = g.add(x, g.mul_mat(L.wo, attn));

        // feed-forward
        cur = g.rms_norm_mul(x, L.ffn_norm, h.rms_eps);
        Tensor* act = g.swiglu(g.mul_mat(L.ffn_gate, cur), g.mul_mat(L.ffn_up, cur));
        x = g.add(x, g.mul_mat(L.ffn_down, act));
    }

    x = g.rms_norm_mul(x, model.output_norm, h.rms_eps);
    bg.logits = g.mul_mat(model.output, x);
    g.finalize({bg.logits});
}

}  // namespace ember
