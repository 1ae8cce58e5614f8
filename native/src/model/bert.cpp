// The bert family (all-MiniLM, bge, e5 as converted to GGUF `bert`): an encoder that turns a
// whole sequence into hidden states, pooled into one vector by model/encoder.h. Read top to
// bottom: token + absolute position + token-type embeddings and their LayerNorm; per block
// bidirectional self-attention (Q/K/V and output biases), residual, LayerNorm, then the GELU
// feed-forward (biases), residual, LayerNorm (post-norm, as BERT); the last block's output
// is the result (no final norm, no head).
#include "core/error.h"
#include "model/arch.h"
#include "model/build.h"

#include <cmath>

namespace ember {

void bert_read_hparams(const GGUFFile& g, HParams& h) {
    const std::string a = h.arch + ".";
    h.causal = g.get_bool_or(a + "attention.causal", false);
    if (h.causal) fail(EMBER_ERR_UNSUPPORTED, "a causal bert file is not supported (attention.causal is true)");
    h.norm_eps = (float)g.get_float_or(a + "attention.layer_norm_epsilon", 1e-12);
    if (!(h.norm_eps > 0.0f) || !std::isfinite(h.norm_eps))
        fail(EMBER_ERR_FORMAT, "attention.layer_norm_epsilon must be positive");
    // sentence-transformers' default, and what the models without the key (converted
    // without a modules.json) were mostly trained for
    const int64_t pooling = g.get_int_or(a + "pooling_type", (int64_t)Pooling::MEAN);
    if (pooling < (int64_t)Pooling::NONE || pooling > (int64_t)Pooling::LAST)
        fail(EMBER_ERR_UNSUPPORTED, "pooling_type " + std::to_string(pooling) +
                                        " is not supported (0 none, 1 mean, 2 CLS, 3 last)");
    h.pooling = (Pooling)pooling;
    if (h.n_head_kv != h.n_head || h.head_dim * h.n_head != h.n_embd)
        fail(EMBER_ERR_FORMAT, "a bert file needs head_count * head size = embedding_length");
}

void bert_bind_model(Model& m) {
    const HParams& h = m.hparams();
    // the tables' row counts come from the file: positions it was trained for, segment types
    const GGUFTensorInfo* pos = m.gguf().find_tensor("position_embd.weight");
    if (!pos) fail(EMBER_ERR_FORMAT, "missing tensor 'position_embd.weight'");
    const GGUFTensorInfo* types = m.gguf().find_tensor("token_types.weight");
    if (!types) fail(EMBER_ERR_FORMAT, "missing tensor 'token_types.weight'");
    if (pos->ne[1] < 1 || pos->ne[1] > (1 << 20)) fail(EMBER_ERR_FORMAT, "position_embd.weight has no rows");
    if (types->ne[1] < 1) fail(EMBER_ERR_FORMAT, "token_types.weight has no rows");
    m.position_embd = m.weight("position_embd.weight", {h.n_embd, pos->ne[1]});
    m.token_types = m.weight("token_types.weight", {h.n_embd, types->ne[1]});
    m.tok_norm = m.weight("token_embd_norm.weight", {h.n_embd});
    m.tok_norm_b = m.weight("token_embd_norm.bias", {h.n_embd});
}

void bert_bind_layer(Model& m, int32_t il) {
    const HParams& h = m.hparams();
    LayerWeights& L = m.layers[(size_t)il];
    const int64_t n = h.n_embd, n_ff = h.n_ff_of(il);
    const std::string p = "blk." + std::to_string(il) + ".";
    auto bias = [&](const char* name, int64_t size) { return m.weight(p + name + ".bias", {size}, false); };
    L.wq = m.layer_weight(il, "attn_q", {n, n});
    L.wk = m.layer_weight(il, "attn_k", {n, n});
    L.wv = m.layer_weight(il, "attn_v", {n, n});
    L.wo = m.layer_weight(il, "attn_output", {n, n});
    L.bq = bias("attn_q", n);
    L.bk = bias("attn_k", n);
    L.bv = bias("attn_v", n);
    L.bo = bias("attn_output", n);
    L.attn_out_norm = m.layer_weight(il, "attn_output_norm", {n});
    L.attn_out_norm_b = bias("attn_output_norm", n);
    L.ffn_up = m.layer_weight(il, "ffn_up", {n, n_ff});
    L.ffn_up_b = bias("ffn_up", n_ff);
    L.ffn_down = m.layer_weight(il, "ffn_down", {n_ff, n});
    L.ffn_down_b = bias("ffn_down", n);
    L.layer_out_norm = m.layer_weight(il, "layer_output_norm", {n});
    L.layer_out_norm_b = bias("layer_output_norm", n);
}

void bert_build_graph(GraphBuilder& b) {
    const Model& m = b.model;
    const HParams& h = b.hp;
    Graph& g = b.g;
    const int64_t N = b.n_tokens(), hd = h.head_dim, n_head = h.n_head;
    auto with_bias = [&](Tensor* x, Tensor* bias) { return bias ? g.add(x, bias) : x; };

    // every token is of type 0 (one text per sequence, as sentence-transformers embeds it)
    static int32_t type_zero = 0;
    Tensor* type0 = g.get_rows(m.token_types, g.leaf(DType::I32, 1, 1, 1, 1, &type_zero, "inp_type0"));
    Tensor* x = g.add(g.add(b.embed(), g.get_rows(m.position_embd, b.positions())), type0);  // [n_embd, N]
    x = b.name(g.layer_norm(x, m.tok_norm, m.tok_norm_b, h.norm_eps), "inp_norm");
    const float scale = 1.0f / std::sqrt((float)hd);
    for (int32_t il = 0; il < h.n_layer; ++il) {
        const LayerWeights& L = m.layers[(size_t)il];
        Tensor* q = b.name(g.reshape(with_bias(g.mul_mat(L.wq, x), L.bq), hd, n_head, N), "Qcur", il);
        Tensor* k = b.name(g.reshape(with_bias(g.mul_mat(L.wk, x), L.bk), hd, n_head, N), "Kcur", il);
        Tensor* v = b.name(g.reshape(with_bias(g.mul_mat(L.wv, x), L.bv), hd, n_head, N), "Vcur", il);
        Tensor* attn = b.name(g.attention_bidir(q, k, v, b.positions(), scale), "kqv_out", il);
        Tensor* out = b.name(with_bias(g.mul_mat(L.wo, attn), L.bo), "attn_out", il);
        x = b.name(g.layer_norm(g.add(x, out), L.attn_out_norm, L.attn_out_norm_b, h.norm_eps), "attn_out_norm", il);
        Tensor* up = g.gelu(with_bias(g.mul_mat(L.ffn_up, x), L.ffn_up_b));
        Tensor* ffn = b.name(with_bias(g.mul_mat(L.ffn_down, b.name(up, "ffn_gelu", il)), L.ffn_down_b), "ffn_out", il);
        x = b.name(g.layer_norm(g.add(x, ffn), L.layer_out_norm, L.layer_out_norm_b, h.norm_eps), "l_out", il);
    }
    b.encoder_output(x);
}

}  // namespace ember
