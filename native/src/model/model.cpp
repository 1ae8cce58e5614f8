#include "model/model.h"

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <cstdio>
#include <map>

#include "core/arena.h"
#include "core/error.h"
#include "core/memory.h"
#include "core/threadpool.h"
#include "cpu/repack.h"
#include "model/arch.h"
#include "quant/types.h"

#ifdef __linux__
#  include <sys/mman.h>
#endif

namespace ember {

namespace {

// llama.cpp's llama_ftype values, as written in general.file_type
const char* ftype_to_name(int64_t ft) {
    static const std::map<int64_t, const char*> names = {
        {0, "F32"},     {1, "F16"},     {2, "Q4_0"},    {3, "Q4_1"},    {7, "Q8_0"},
        {8, "Q5_0"},    {9, "Q5_1"},    {10, "Q2_K"},   {11, "Q3_K_S"}, {12, "Q3_K_M"},
        {13, "Q3_K_L"}, {14, "Q4_K_S"}, {15, "Q4_K_M"}, {16, "Q5_K_S"}, {17, "Q5_K_M"},
        {18, "Q6_K"},   {25, "IQ4_NL"}, {30, "IQ4_XS"}, {32, "BF16"},  {38, "MXFP4_MOE"},
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
    m->arch_ = find_arch(m->hp_.arch);
    if (!m->arch_)
        fail(EMBER_ERR_UNSUPPORTED, "model architecture '" + m->hp_.arch +
                                        "' is not supported (supported: " + supported_arch_list() + ")");
    m->read_hparams();
    m->bind_weights(opts);
    check_cancel(opts, 1.0f);
    return m;
}

namespace {

// The layer of a weight, from GGUF's names: "blk.N.*" block N, "token_embd.*" the
// embedding, "output*" the head (output_norm with it), anything else none.
int32_t weight_layer(const std::string& name) {
    if (name.rfind("blk.", 0) == 0) {
        int32_t il = 0;
        size_t i = 4;
        if (i >= name.size() || name[i] < '0' || name[i] > '9') return kLayerNone;
        for (; i < name.size() && name[i] >= '0' && name[i] <= '9'; ++i) il = il * 10 + (name[i] - '0');
        return il;
    }
    if (name == "token_embd.weight") return kLayerEmbedding;
    if (name.rfind("output", 0) == 0) return kLayerOutput;
    return kLayerNone;
}

// An integer hyper-parameter that newer files may store per layer (an array): Ember runs
// the same value in every layer, so an array must hold one value.
int64_t uniform_int(const GGUFFile& g, const std::string& key, int64_t fallback, bool required) {
    const GGUFValue* v = g.find(key);
    if (!v) {
        if (required) return g.get_int(key);  // throws: the key is missing
        return fallback;
    }
    if (v->type != GGUFType::ARRAY) return g.get_int(key);
    const std::vector<int64_t> a = g.get_int_array(key);
    if (a.empty()) fail(EMBER_ERR_FORMAT, "metadata key '" + key + "' is an empty array");
    for (int64_t x : a)
        if (x != a[0])
            fail(EMBER_ERR_UNSUPPORTED, "metadata key '" + key +
                                            "' differs between layers, which Ember does not run yet");
    return a[0];
}

// A per-layer integer (a scalar fills every layer; an array holds one value per layer).
std::vector<int32_t> layer_ints(const GGUFFile& g, const std::string& key, int32_t n_layer, int64_t fallback,
                                bool required, bool zero_ok = false) {
    auto checked = [&](int64_t v) {
        if (v < (zero_ok ? 0 : 1) || v > (1 << 24))
            fail(EMBER_ERR_FORMAT, "metadata key '" + key + "' has an invalid value " + std::to_string(v));
        return (int32_t)v;
    };
    const GGUFValue* v = g.find(key);
    if (!v || v->type != GGUFType::ARRAY) {
        const int64_t x = v ? g.get_int(key) : required ? g.get_int(key) : fallback;  // throws when required and missing
        return std::vector<int32_t>((size_t)n_layer, checked(x));
    }
    const std::vector<int64_t> a = g.get_int_array(key);
    if ((int64_t)a.size() != n_layer)
        fail(EMBER_ERR_FORMAT, "metadata key '" + key + "' has " + std::to_string(a.size()) + " entries for " +
                                   std::to_string(n_layer) + " layers");
    std::vector<int32_t> out;
    for (int64_t x : a) out.push_back(checked(x));
    return out;
}

}  // namespace

void Model::read_hparams() {
    const GGUFFile& g = *gguf_;
    const std::string a = hp_.arch + ".";
    auto positive = [&](const std::string& key, int64_t v) {
        if (v <= 0 || v > (1 << 24))
            fail(EMBER_ERR_FORMAT, "metadata key '" + key + "' has an invalid value " + std::to_string(v));
        return (int32_t)v;
    };
    auto key_int = [&](const char* k, int64_t fallback, bool required) {
        return positive(a + k, uniform_int(g, a + k, fallback, required));
    };
    hp_.n_embd = key_int("embedding_length", 0, true);
    hp_.n_layer = key_int("block_count", 0, true);
    // experts: the count, how many each token uses, their width (else the dense width / k,
    // as llama.cpp assumes), and how the router weighs them
    hp_.n_expert = (int32_t)uniform_int(g, a + "expert_count", 0, false);
    if (hp_.n_expert < 0 || hp_.n_expert > 4096)
        fail(EMBER_ERR_FORMAT, "metadata key '" + a + "expert_count' has an invalid value " + std::to_string(hp_.n_expert));
    hp_.n_ff_layer = layer_ints(g, a + "feed_forward_length", hp_.n_layer, hp_.n_expert > 0 ? 1 : 0,
                                hp_.n_expert == 0);
    hp_.n_ff = hp_.n_ff_layer[0];
    if (hp_.n_expert > 0) {
        hp_.n_expert_used = key_int("expert_used_count", 0, true);
        if (hp_.n_expert_used > hp_.n_expert)
            fail(EMBER_ERR_FORMAT, "expert_used_count " + std::to_string(hp_.n_expert_used) +
                                       " is more than expert_count " + std::to_string(hp_.n_expert));
        hp_.n_ff_exp = key_int("expert_feed_forward_length", std::max(1, hp_.n_ff / hp_.n_expert_used), false);
        hp_.expert_weights_norm = g.get_bool_or(a + "expert_weights_norm", false);
        hp_.expert_weights_scale = (float)g.get_float_or(a + "expert_weights_scale", 0.0);
        const int64_t gating = g.get_int_or(a + "expert_gating_func", (int64_t)ExpertGating::SOFTMAX);
        if (gating < (int64_t)ExpertGating::SOFTMAX || gating > (int64_t)ExpertGating::SOFTMAX_WEIGHT)
            fail(EMBER_ERR_UNSUPPORTED, "expert_gating_func " + std::to_string(gating) +
                                            " is not supported (1 softmax, 2 sigmoid, 3 softmax of the chosen)");
        hp_.expert_gating = (ExpertGating)gating;
    }
    hp_.n_head_layer = layer_ints(g, a + "attention.head_count", hp_.n_layer, 0, true);
    hp_.n_head = hp_.n_head_layer[0];
    hp_.n_head_kv_layer = g.find(a + "attention.head_count_kv")
                              ? layer_ints(g, a + "attention.head_count_kv", hp_.n_layer, 0, true, true)
                              : hp_.n_head_layer;
    // 0 KV heads mark a block without attention (LFM2's convolution blocks): the family's
    // reader makes those blocks recurrent, and any left over are refused below
    hp_.n_head_kv = *std::max_element(hp_.n_head_kv_layer.begin(), hp_.n_head_kv_layer.end());
    if (hp_.n_head_kv == 0) fail(EMBER_ERR_FORMAT, "attention.head_count_kv is 0 in every layer");
    hp_.n_ctx_train = key_int("context_length", 2048, false);
    for (int32_t il = 0; il < hp_.n_layer; ++il)
        if (hp_.n_head_kv_layer[(size_t)il] > 0 && hp_.n_head_layer[(size_t)il] % hp_.n_head_kv_layer[(size_t)il] != 0)
            fail(EMBER_ERR_FORMAT, "head_count " + std::to_string(hp_.n_head_layer[(size_t)il]) +
                                       " is not a multiple of head_count_kv " +
                                       std::to_string(hp_.n_head_kv_layer[(size_t)il]));
    hp_.head_dim = key_int("attention.key_length", hp_.n_embd / hp_.n_head, false);
    if (key_int("attention.value_length", hp_.head_dim, false) != hp_.head_dim)
        fail(EMBER_ERR_UNSUPPORTED, "key and value heads of different sizes are not supported");
    hp_.n_rot = key_int("rope.dimension_count", hp_.head_dim, false);
    if (hp_.n_rot > hp_.head_dim || hp_.n_rot % 2)
        fail(EMBER_ERR_FORMAT, "rope.dimension_count " + std::to_string(hp_.n_rot) + " is invalid");
    hp_.rms_eps = (float)g.get_float_or(a + "attention.layer_norm_rms_epsilon", 1e-5);
    hp_.rope_freq_base = (float)g.get_float_or(a + "rope.freq_base", 10000.0);
    if (!(hp_.rope_freq_base > 0.0f)) fail(EMBER_ERR_FORMAT, "rope.freq_base must be positive");

    // rope.scaling.*, as llama.cpp reads them: the type defaults to linear, the factor
    // (or the older rope.scale_linear) to none
    const std::string scaling = g.get_string_or(a + "rope.scaling.type", "linear");
    double factor = g.get_float_or(a + "rope.scaling.factor", 0.0);
    if (factor == 0.0) factor = g.get_float_or(a + "rope.scale_linear", 0.0);
    if (factor < 0.0 || !std::isfinite(factor)) fail(EMBER_ERR_FORMAT, "rope.scaling.factor must be positive");
    hp_.rope_freq_scale = factor == 0.0 ? 1.0f : (float)(1.0 / factor);
    hp_.n_ctx_orig = key_int("rope.scaling.original_context_length", hp_.n_ctx_train, false);
    hp_.rope_attn_factor = (float)g.get_float_or(a + "rope.scaling.attn_factor", 1.0);
    if (scaling == "none") {
        hp_.rope_freq_scale = 1.0f;
    } else if (scaling == "yarn") {
        hp_.rope_ext_factor = (float)g.get_float_or(a + "rope.scaling.yarn_ext_factor", 1.0);
        hp_.yarn_beta_fast = (float)g.get_float_or(a + "rope.scaling.yarn_beta_fast", 32.0);
        hp_.yarn_beta_slow = (float)g.get_float_or(a + "rope.scaling.yarn_beta_slow", 1.0);
        if (hp_.rope_ext_factor != 0.0f) {
            // YaRN's magnitude correction; the rope op multiplies by 1 + 0.1 ln(factor)
            // again, so it is divided out here (llama.cpp does the same)
            const float f = 1.0f / hp_.rope_freq_scale;
            auto mscale = [](float scale, float m) { return scale <= 1.0f ? 1.0f : 0.1f * m * std::log(scale) + 1.0f; };
            const float log_mul = (float)g.get_float_or(a + "rope.scaling.yarn_log_multiplier", 0.0);
            float attn = log_mul != 0.0f ? mscale(f, 1.0f) / mscale(f, log_mul) : mscale(f, 1.0f);
            attn *= 1.0f / (1.0f + 0.1f * std::log(f));
            hp_.rope_attn_factor *= attn;
        }
    } else if (scaling != "linear" && scaling != "longrope") {
        fail(EMBER_ERR_UNSUPPORTED,
             "rope scaling '" + scaling + "' is not supported (none, linear, yarn, longrope)");
    }
    hp_.rope_mode = arch_->rope;
    if (arch_->read_hparams) arch_->read_hparams(g, hp_);
    for (int32_t il = 0; il < hp_.n_layer; ++il)
        if (hp_.n_head_kv_layer[(size_t)il] == 0 && !hp_.is_recurrent(il))
            fail(EMBER_ERR_FORMAT, "attention.head_count_kv is 0 for block " + std::to_string(il) +
                                       ", which is an attention block in a '" + hp_.arch + "' model");
    if (!hp_.per_layer_shapes) {
        // the family's graph runs one shape in every layer
        const std::pair<const char*, const std::vector<int32_t>*> arrays[] = {
            {"feed_forward_length", &hp_.n_ff_layer},
            {"attention.head_count", &hp_.n_head_layer},
            {"attention.head_count_kv", &hp_.n_head_kv_layer}};
        for (const auto& [key, values] : arrays)
            for (int32_t x : *values)
                if (x != values->front())
                    fail(EMBER_ERR_UNSUPPORTED, "metadata key '" + a + key +
                                                    "' differs between layers, which Ember does not run yet");
    }
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
        // weights used in matrix products need a dot-product kernel (and rows a
        // dequantizer); a type without one is refused here, never computed by another's
        if (!type_traits(ti->type)->dequantize || !weight_type_supported((DType)ti->type))
            fail(EMBER_ERR_UNSUPPORTED, "tensor '" + name + "' has type " + type_name(ti->type) +
                                            ", which Ember cannot compute as a weight");
    } else if (ti->type != (uint32_t)DType::F32) {
        fail(EMBER_ERR_UNSUPPORTED, "tensor '" + name + "' should be F32 but is " + type_name(ti->type));
    }
    weights_.emplace_back();
    Tensor* t = &weights_.back();
    t->type = (DType)ti->type;
    for (int i = 0; i < 4; ++i) t->ne[i] = ti->ne[i];
    tensor_set_contiguous_strides(t);
    t->data = const_cast<uint8_t*>(ti->data);  // read-only mapping: kernels never write weights
    if (ti->n_dims <= 1 && ti->n_bytes > 0) {
        // Vectors (norms, biases, rope factors) are copied: a few KiB each, read on every
        // token, they would keep the file's pages around them mapped (the page cache maps
        // whole large folios, up to 2 MiB, on a fault) after the matrices are read from
        // their four-row copies. bind_weights then drops the mapping of what it read.
        void* copy = aligned_malloc(ti->n_bytes);
        std::memcpy(copy, ti->data, ti->n_bytes);
        vector_copies_.push_back(copy);
        t->data = copy;
    }
    t->set_name(name.c_str());
    t->layer = weight_layer(name);
    return t;
}

Tensor* Model::layer_weight(int32_t il, const char* name, std::initializer_list<int64_t> shape, bool required) {
    return weight("blk." + std::to_string(il) + "." + name + ".weight", shape, required);
}

Tensor* Model::ones(int64_t n, const char* name) {
    for (Tensor& t : weights_)
        if (t.op == Op::NONE && t.ne[0] == n && t.n_rows() == 1 && std::strcmp(t.name, name) == 0) return &t;
    float* data = static_cast<float*>(aligned_malloc((size_t)n * sizeof(float)));
    for (int64_t i = 0; i < n; ++i) data[i] = 1.0f;
    vector_copies_.push_back(data);
    weights_.emplace_back();
    Tensor* t = &weights_.back();
    t->type = DType::F32;
    t->ne[0] = n;
    tensor_set_contiguous_strides(t);
    t->data = data;
    t->set_name(name);
    t->layer = kLayerNone;
    return t;
}

void Model::bind_weights(const LoadOptions& opts) {
    const GGUFTensorInfo* emb = gguf_->find_tensor("token_embd.weight");
    if (!emb) fail(EMBER_ERR_FORMAT, "missing tensor 'token_embd.weight'");
    hp_.n_vocab = (int32_t)emb->ne[1];
    if (vocab_ && vocab_->n_tokens() > hp_.n_vocab)
        fail(EMBER_ERR_FORMAT, "the vocabulary has " + std::to_string(vocab_->n_tokens()) +
                                   " tokens but token_embd.weight only " + std::to_string(hp_.n_vocab) + " rows");
    tok_embd = weight("token_embd.weight", {hp_.n_embd, hp_.n_vocab});
    output_norm = weight("output_norm.weight", {hp_.n_embd}, false);  // (LFM2 names it otherwise)
    output = weight("output.weight", {hp_.n_embd, hp_.n_vocab}, false);
    if (!output) output = tok_embd;  // tied embeddings
    if (arch_->bind_model) arch_->bind_model(*this);
    // encoders (bert) end in their blocks' norms: no final norm, no head
    if (!output_norm && hp_.causal) fail(EMBER_ERR_FORMAT, "missing tensor 'output_norm.weight'");
    layers.assign((size_t)hp_.n_layer, LayerWeights{});
    for (int32_t il = 0; il < hp_.n_layer; ++il) {
        arch_->bind_layer(*this, il);
        check_cancel(opts, 0.05f + 0.95f * (float)(il + 1) / (float)hp_.n_layer);
    }
    gguf_->release_tensor_data();  // the vectors' pages, read just now (they refault if read again)
}

void bind_attention_weights(Model& m, int32_t il) {
    const HParams& h = m.hparams();
    LayerWeights& L = m.layers[(size_t)il];
    const int64_t hd = h.head_dim_of(il);
    const int64_t n_q = hd * h.n_head_of(il), n_kv = hd * h.n_head_kv_of(il);
    L.attn_norm = m.layer_weight(il, "attn_norm", {h.n_embd});
    L.wqkv = m.layer_weight(il, "attn_qkv", {h.n_embd, n_q + 2 * n_kv}, false);
    if (!L.wqkv) {
        L.wq = m.layer_weight(il, "attn_q", {h.n_embd, n_q});
        L.wk = m.layer_weight(il, "attn_k", {h.n_embd, n_kv});
        L.wv = m.layer_weight(il, "attn_v", {h.n_embd, n_kv});
        const std::string p = "blk." + std::to_string(il) + ".";
        L.bq = m.weight(p + "attn_q.bias", {n_q}, false);
        L.bk = m.weight(p + "attn_k.bias", {n_kv}, false);
        L.bv = m.weight(p + "attn_v.bias", {n_kv}, false);
    }
    L.wo = m.layer_weight(il, "attn_output", {n_q, h.n_embd});
}

void bind_ffn_weights(Model& m, int32_t il) {
    const HParams& h = m.hparams();
    LayerWeights& L = m.layers[(size_t)il];
    L.ffn_norm = m.layer_weight(il, "ffn_norm", {h.n_embd});
    const int64_t n_ff = h.n_ff_of(il);
    L.ffn_gate = m.layer_weight(il, "ffn_gate", {h.n_embd, n_ff});
    L.ffn_up = m.layer_weight(il, "ffn_up", {h.n_embd, n_ff});
    L.ffn_down = m.layer_weight(il, "ffn_down", {n_ff, h.n_embd});
}

void bind_moe_weights(Model& m, int32_t il) {
    const HParams& h = m.hparams();
    if (h.n_expert <= 0 || h.n_expert_used <= 0)
        fail(EMBER_ERR_FORMAT, "a mixture-of-experts model needs expert_count and expert_used_count");
    LayerWeights& L = m.layers[(size_t)il];
    const std::string p = "blk." + std::to_string(il) + ".";
    L.ffn_gate_inp = m.layer_weight(il, "ffn_gate_inp", {h.n_embd, h.n_expert});
    L.ffn_gate_inp_b = m.weight(p + "ffn_gate_inp.bias", {h.n_expert}, false);
    L.ffn_exp_probs_b = m.weight(p + "exp_probs_b.bias", {h.n_expert}, false);
    L.ffn_gate_up_exps = m.layer_weight(il, "ffn_gate_up_exps", {h.n_embd, 2 * (int64_t)h.n_ff_exp, h.n_expert}, false);
    if (!L.ffn_gate_up_exps) {
        L.ffn_gate_exps = m.layer_weight(il, "ffn_gate_exps", {h.n_embd, h.n_ff_exp, h.n_expert});
        L.ffn_up_exps = m.layer_weight(il, "ffn_up_exps", {h.n_embd, h.n_ff_exp, h.n_expert});
    }
    L.ffn_down_exps = m.layer_weight(il, "ffn_down_exps", {h.n_ff_exp, h.n_embd, h.n_expert});
    L.ffn_down_exps_s = m.weight(p + "ffn_down_exps.scale", {h.n_expert}, false);
    if (L.ffn_down_exps_s && L.ffn_down_exps_s->type != DType::F32)
        fail(EMBER_ERR_UNSUPPORTED, "tensor '" + p + "ffn_down_exps.scale' should be F32 but is " +
                                        type_name((uint32_t)L.ffn_down_exps_s->type));
    L.ffn_gate_exps_b = m.weight(p + "ffn_gate_exps.bias", {h.n_ff_exp, h.n_expert}, false);
    L.ffn_up_exps_b = m.weight(p + "ffn_up_exps.bias", {h.n_ff_exp, h.n_expert}, false);
    L.ffn_down_exps_b = m.weight(p + "ffn_down_exps.bias", {h.n_embd, h.n_expert}, false);
    for (const Tensor* b : {L.ffn_gate_exps_b, L.ffn_up_exps_b, L.ffn_down_exps_b})
        if (b && b->type != DType::F32)
            fail(EMBER_ERR_UNSUPPORTED, std::string("tensor '") + b->name + "' should be F32 but is " +
                                            type_name((uint32_t)b->type));
}

Model::~Model() {
    repack_.reset();  // its thread reads the weights and releases the file's pages
    for (void* p : vector_copies_) aligned_free(p);
}

void Model::close_context() const {
    std::lock_guard<std::mutex> lock(contexts_mu_);
    --open_contexts_;
}

double Model::layout_progress(bool wait) const {
    const WeightRepack* repack;
    {
        std::lock_guard<std::mutex> lock(contexts_mu_);
        repack = repack_.get();
    }
    return repack ? repack->progress(wait) : 1.0;
}

void Model::open_context(Isa isa, const std::vector<Tensor*>& cpu_weights) const {
    std::lock_guard<std::mutex> lock(contexts_mu_);
    const bool alone = open_contexts_ == 0;
    ++open_contexts_;
    if (!alone || repack_) return;
    auto repack = std::make_unique<WeightRepack>();
    const GGUFFile* file = gguf_.get();
    if (repack->start(isa, cpu_weights, [file](const void* p, uint64_t n) { file->release_pages(p, n); }))
        repack_ = std::move(repack);
}

}  // namespace ember
