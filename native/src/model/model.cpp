#include "model/model.h"

#include <cstdio>
#include <map>

#include "core/error.h"

namespace ember {

namespace {

struct ArchInfo {
    const char* name;
    RopeMode rope;
};
const ArchInfo kArchs[] = {
    {"llama", RopeMode::NORMAL},  // Llama 1-3, TinyLlama, SmolLM, Mistral (as converted)
    {"qwen2", RopeMode::NEOX},
};

const ArchInfo* find_arch(const std::string& arch) {
    for (const auto& a : kArchs)
        if (arch == a.name) return &a;
    return nullptr;
}

// llama.cpp's llama_ftype values, as written in general.file_type
const char* ftype_to_name(int64_t ft) {
    static const std::map<int64_t, const char*> names = {
        {0, "F32"},     {1, "F16"},     {2, "Q4_0"},    {3, "Q4_1"},    {7, "Q8_0"},
        {8, "Q5_0"},    {9, "Q5_1"},    {10, "Q2_K"},   {11, "Q3_K_S"}, {12, "Q3_K_M"},
        {13, "Q3_K_L"}, {14, "Q4_K_S"}, {15, "Q4_K_M"}, {16, "Q5_K_S"}, {17, "Q5_K_M"},
        {18, "Q6_K"},   {32, "BF16"},
    };
    auto it = names.find(ft);
    return it == names.end() ? nullptr : it->second;
}

void check_cancel(const LoadOptions& o, float progress) {
    if (o.cancel && *o.cancel) fail(EMBER_ERR_CANCELLED, "loading cancelled");
    if (o.progress && !o.progress(progress, o.progress_user_data))
        fail(EMBER_ERR_CANCELLED, "loading cancelled");
}

}  // namespace

bool arch_supported(const std::string& arch) { return find_arch(arch) != nullptr; }

const char* supported_arch_list() { return "llama, qwen2"; }

std::unique_ptr<Model> Model::load(const std::string& path, const LoadOptions& opts) {
    std::unique_ptr<Model> m(new Model());
    check_cancel(opts, 0.0f);
    m->gguf_ = GGUFFile::open(path);
    const GGUFFile& g = *m->gguf_;

    for (const auto& t : g.tensors()) m->n_params_ += (uint64_t)(t.ne[0] * t.ne[1] * t.ne[2] * t.ne[3]);
    if (const char* n = ftype_to_name(g.get_int_or("general.file_type", -1))) {
        m->ftype_name_ = n;
    } else {
        // the type holding most of the bytes
        std::map<uint32_t, uint64_t> bytes;
        for (const auto& t : g.tensors()) bytes[t.type] += t.n_bytes;
        uint32_t best = 0;
        uint64_t most = 0;
        for (auto& [type, b] : bytes)
            if (b > most) most = b, best = type;
        m->ftype_name_ = most ? type_name(best) : "none";
    }
    m->hp_.arch = g.get_string_or("general.architecture", "");
    if (opts.metadata_only) return m;

    m->vocab_ = Vocab::load(g);
    check_cancel(opts, 0.05f);
    if (opts.vocab_only) return m;

    if (m->hp_.arch.empty()) fail(EMBER_ERR_FORMAT, "the file has no general.architecture key");
    if (!find_arch(m->hp_.arch))
        fail(EMBER_ERR_UNSUPPORTED, "model architecture '" + m->hp_.arch +
                                        "' is not supported (supported: " + supported_arch_list() + ")");
    m->read_hparams();
    m->bind_weights(opts);
    check_cancel(opts, 1.0f);
    return m;
}

void Model::read_hparams() {
    const GGUFFile& g = *gguf_;
    const std::string a = hp_.arch + ".";
    auto positive = [&](const std::string& key, int64_t v) {
        if (v <= 0 || v > (1 << 24))
            fail(EMBER_ERR_FORMAT, "metadata key '" + key + "' has an invalid value " + std::to_string(v));
        return (int32_t)v;
    };
    hp_.n_embd = positive(a + "embedding_length", g.get_int(a + "embedding_length"));
    hp_.n_layer = positive(a + "block_count", g.get_int(a + "block_count"));
    hp_.n_ff = positive(a + "feed_forward_length", g.get_int(a + "feed_forward_length"));
    hp_.n_head = positive(a + "attention.head_count", g.get_int(a + "attention.head_count"));
    hp_.n_head_kv = positive(a + "attention.head_count_kv",
                             g.get_int_or(a + "attention.head_count_kv", hp_.n_head));
    hp_.n_ctx_train = positive(a + "context_length", g.get_int_or(a + "context_length", 2048));
    if (hp_.n_head % hp_.n_head_kv != 0)
        fail(EMBER_ERR_FORMAT, "head_count " + std::to_string(hp_.n_head) +
                                   " is not a multiple of head_count_kv " + std::to_string(hp_.n_head_kv));
    hp_.head_dim = positive(a + "attention.key_length",
                            g.get_int_or(a + "attention.key_length", hp_.n_embd / hp_.n_head));
    hp_.n_rot = positive(a + "rope.dimension_count", g.get_int_or(a + "rope.dimension_count", hp_.head_dim));
    if (hp_.n_rot > hp_.head_dim || hp_.n_rot % 2)
        fail(EMBER_ERR_FORMAT, "rope.dimension_count " + std::to_string(hp_.n_rot) + " is invalid");
    hp_.rms_eps = (float)g.get_float_or(a + "attention.layer_norm_rms_epsilon", 1e-5);
    hp_.rope_freq_base = (float)g.get_float_or(a + "rope.freq_base", 10000.0);
    const std::string scaling = g.get_string_or(a + "rope.scaling.type", "none");
    if (scaling == "linear") {
        const double factor = g.get_float_or(a + "rope.scaling.factor", 1.0);
        if (!(factor > 0.0)) fail(EMBER_ERR_FORMAT, "rope.scaling.factor must be positive");
        hp_.rope_freq_scale = (float)(1.0 / factor);
    } else if (scaling != "none") {
        fail(EMBER_ERR_UNSUPPORTED, "rope scaling '" + scaling + "' is not supported (none, linear)");
    } else if (const GGUFValue* f = g.find(a + "rope.scale_linear")) {
        if (!f->is_number() || !(f->f > 0.0)) fail(EMBER_ERR_FORMAT, "rope.scale_linear must be positive");
        hp_.rope_freq_scale = (float)(1.0 / f->f);
    }
    hp_.rope_mode = find_arch(hp_.arch)->rope;
}

Tensor* Model::weight(const std::string& name, std::initializer_list<int64_t> shape, bool required) {
    const GGUFTensorInfo* ti = gguf_->find_tensor(name);
    if (!ti) {
        if (required) fail(EMBER_ERR_FORMAT, "missing tensor '" + name + "'");
        return nullptr;
    }
    size_t d = 0;
    for (int64_t want : shape) {
        if (ti->ne[d] != want) {
            std::string got, exp;
            for (uint32_t i = 0; i < ti->n_dims; ++i) got += (i ? "x" : "") + std::to_string(ti->ne[i]);
            size_t i = 0;
            for (int64_t s : shape) exp += (i++ ? "x" : "") + std::to_string(s);
            fail(EMBER_ERR_FORMAT, "tensor '" + name + "' has shape " + got + ", expected " + exp);
        }
        ++d;
    }
    for (; d < 4; ++d)
        if (ti->ne[d] != 1) fail(EMBER_ERR_FORMAT, "tensor '" + name + "' has too many dimensions");
    if (ti->n_dims > 1 || shape.size() > 1) {
        // weights used in matrix products need a dequantizer; all known types have one
        if (!type_traits(ti->type)->dequantize)
            fail(EMBER_ERR_UNSUPPORTED, "tensor '" + name + "' has unsupported type " + type_name(ti->type));
    } else if (ti->type != (uint32_t)DType::F32) {
        fail(EMBER_ERR_UNSUPPORTED, "tensor '" + name + "' should be F32 but is " + type_name(ti->type));
    }
    weights_.emplace_back();
    Tensor* t = &weights_.back();
    t->type = (DType)ti->type;
    for (int i = 0; i < 4; ++i) t->ne[i] = ti->ne[i];
    tensor_set_contiguous_strides(t);
    t->data = const_cast<uint8_t*>(ti->data);  // read-only mapping: kernels never write weights
    t->set_name(name.c_str());
    return t;
}

void Model::bind_weights(const LoadOptions& opts) {
    const HParams& h = hp_;
    const int64_t n_embd_q = (int64_t)h.head_dim * h.n_head;
    const int64_t n_embd_kv = (int64_t)h.head_dim * h.n_head_kv;
    const GGUFTensorInfo* emb = gguf_->find_tensor("token_embd.weight");
    if (!emb) fail(EMBER_ERR_FORMAT, "missing tensor 'token_embd.weight'");
    hp_.n_vocab = (int32_t)emb->ne[1];
    if (vocab_ && vocab_->n_tokens() > hp_.n_vocab)
        fail(EMBER_ERR_FORMAT, "the vocabulary has " + std::to_string(vocab_->n_tokens()) +
                                   " tokens but token_embd.weight only " + std::to_string(hp_.n_vocab) + " rows");
    tok_embd = weight("token_embd.weight", {h.n_embd, h.n_vocab});
    output_norm = weight("output_norm.weight", {h.n_embd});
    output = weight("output.weight", {h.n_embd, h.n_vocab}, false);
    if (!output) output = tok_embd;  // tied embeddings

    layers.resize((size_t)h.n_layer);
    for (int32_t i = 0; i < h.n_layer; ++i) {
        const std::string p = "blk." + std::to_string(i) + ".";
        LayerWeights& L = layers[(size_t)i];
        L.attn_norm = weight(p + "attn_norm.weight", {h.n_embd});
        L.wq = weight(p + "attn_q.weight", {h.n_embd, n_embd_q});
        L.wk = weight(p + "attn_k.weight", {h.n_embd, n_embd_kv});
        L.wv = weight(p + "attn_v.weight", {h.n_embd, n_embd_kv});
        L.wo = weight(p + "attn_output.weight", {n_embd_q, h.n_embd});
        L.bq = weight(p + "attn_q.bias", {n_embd_q}, false);
        L.bk = weight(p + "attn_k.bias", {n_embd_kv}, false);
        L.bv = weight(p + "attn_v.bias", {n_embd_kv}, false);
        L.ffn_norm = weight(p + "ffn_norm.weight", {h.n_embd});
        L.ffn_gate = weight(p + "ffn_gate.weight", {h.n_embd, h.n_ff});
        L.ffn_up = weight(p + "ffn_up.weight", {h.n_embd, h.n_ff});
        L.ffn_down = weight(p + "ffn_down.weight", {h.n_ff, h.n_embd});
        check_cancel(opts, 0.05f + 0.95f * (float)(i + 1) / (float)h.n_layer);
    }
}

}  // namespace ember
