// Implements ember.h: handles wrap the C++ objects; every entry point catches every
// exception and turns it into an ember_status plus a last-error message.
#include "ember.h"

#include <cstdio>
#include <cstring>
#include <atomic>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "backend/registry.h"
#include "core/error.h"
#include "core/thread_state.h"
#include "core/threadpool.h"
#include "cpu/kernels.h"
#include "model/arch.h"
#include "model/context.h"
#include "model/encoder.h"
#include "model/footprint.h"
#include "model/model.h"
#include "quant/types.h"
#include "sample/grammar.h"
#include "sample/sampler.h"

using namespace ember;

namespace {

// A handle's last-error message, one per calling thread. Calls on one model come from
// several threads at once (the server's slots tokenize in parallel), and every checked
// call writes the message, success included: one shared string would be written by two
// threads at a time, and one thread's success would wipe another's failure before it was
// read. Only threads whose last call on the handle failed hold an entry, so the common
// path (a success, no failures recorded) takes no lock.
class HandleErrors {
public:
    void set(const std::string& message) {
        if (message.empty() && n_entries_.load(std::memory_order_acquire) == 0) return;
        std::lock_guard<std::mutex> lock(mutex_);
        if (message.empty())
            by_thread_.erase(std::this_thread::get_id());
        else
            by_thread_[std::this_thread::get_id()] = message;
        n_entries_.store(by_thread_.size(), std::memory_order_release);
    }
    // Valid until this thread's next call on the handle: other threads' entries come and
    // go, but the map's nodes never move.
    const char* get() const {
        std::lock_guard<std::mutex> lock(mutex_);
        const auto it = by_thread_.find(std::this_thread::get_id());
        return it == by_thread_.end() ? "" : it->second.c_str();
    }

private:
    mutable std::mutex mutex_;
    std::unordered_map<std::thread::id, std::string> by_thread_;
    std::atomic<size_t> n_entries_{0};
};

}  // namespace

struct ember_model {
    std::unique_ptr<Model> model;
    HandleErrors last_error;
    std::mutex meta_mutex;  // meta_json fills in lazily, maybe from several threads
    std::vector<std::optional<std::string>> meta_json;  // rendered on first request
    std::mutex grammar_mutex;  // grammar_vocab is built by the first grammar, maybe on any thread
    std::shared_ptr<const GrammarVocab> grammar_vocab;
};

struct ember_context {
    ember_model* owner = nullptr;
    std::unique_ptr<Context> ctx;
    HandleErrors last_error;
    std::string profile_report;
};

struct ember_embedder {
    ember_model* owner = nullptr;
    std::unique_ptr<Encoder> encoder;
    HandleErrors last_error;
};

struct ember_sampler {
    std::unique_ptr<Sampler> sampler;
};

struct ember_grammar {
    std::unique_ptr<GrammarMatcher> matcher;
};

namespace {

template <typename F>
ember_status guarded(HandleErrors* handle_error, F&& body) {
    ember_status status = EMBER_OK;
    std::string message;
    try {
        body();
    } catch (const Error& e) {
        status = e.status();
        message = e.what();
    } catch (const std::bad_alloc&) {
        status = EMBER_ERR_OUT_OF_MEMORY;
        message = "out of memory";
    } catch (const std::exception& e) {
        status = EMBER_ERR_INTERNAL;
        message = std::string("internal error: ") + e.what();
    } catch (...) {
        status = EMBER_ERR_INTERNAL;
        message = "internal error";
    }
    thread_last_error() = message;
    if (handle_error) handle_error->set(message);
    return status;
}

void require(bool ok, const char* what) {
    if (!ok) fail(EMBER_ERR_INVALID_ARGUMENT, what);
}

const Vocab& vocab_of(const ember_model* m) {
    require(m != nullptr, "model is NULL");
    if (!m->model->vocab()) fail(EMBER_ERR_INVALID_ARGUMENT, "the model was loaded without its vocabulary");
    return *m->model->vocab();
}

// Copies bytes out, or reports the size needed.
void copy_out(const std::string& s, char* buf, int32_t capacity, int32_t* n_out) {
    require(n_out != nullptr, "n_out is NULL");
    require(s.size() < (size_t)INT32_MAX, "output too large");
    *n_out = (int32_t)s.size();
    if ((int32_t)s.size() > capacity || (!buf && !s.empty()))
        fail(EMBER_ERR_BUFFER_TOO_SMALL, "buffer of " + std::to_string(capacity) + " bytes is too small (" +
                                             std::to_string(s.size()) + " needed)");
    if (!s.empty()) std::memcpy(buf, s.data(), s.size());
}

}  // namespace

extern "C" {

int32_t ember_abi_version(void) { return EMBER_ABI_VERSION; }
const char* ember_version(void) { return "0.1.0"; }

const char* ember_system_info(void) {
    static const std::string info = std::string("ISA=") + isa_name(detect_isa()) +
                                    " active=" + isa_name(active_isa()) +
                                    " threads=" + std::to_string(ThreadPool::default_thread_count());
    return info.c_str();
}

const char* ember_last_error(void) { return thread_last_error().c_str(); }

const char* ember_status_name(ember_status s) {
    switch (s) {
        case EMBER_OK: return "ok";
        case EMBER_ERR_INVALID_ARGUMENT: return "invalid argument";
        case EMBER_ERR_IO: return "I/O error";
        case EMBER_ERR_FORMAT: return "invalid file format";
        case EMBER_ERR_UNSUPPORTED: return "unsupported";
        case EMBER_ERR_OUT_OF_MEMORY: return "out of memory";
        case EMBER_ERR_CANCELLED: return "cancelled";
        case EMBER_ERR_CONTEXT_FULL: return "context full";
        case EMBER_ERR_BUFFER_TOO_SMALL: return "buffer too small";
        case EMBER_ERR_INTERNAL: return "internal error";
    }
    return "unknown status";
}

// ---- model ------------------------------------------------------------------

ember_model_params ember_model_default_params(void) {
    ember_model_params p;
    std::memset(&p, 0, sizeof(p));
    return p;
}

ember_status ember_model_load(const char* path, const ember_model_params* params, ember_model** out) {
    return guarded(nullptr, [&] {
        require(path && out, "path and out must not be NULL");
        *out = nullptr;
        LoadOptions o;
        if (params) {
            o.progress = params->progress;
            o.progress_user_data = params->progress_user_data;
            o.cancel = params->cancel;
            o.vocab_only = params->vocab_only;
            o.metadata_only = params->metadata_only;
        }
        auto h = std::make_unique<ember_model>();
        const bool weights = !o.vocab_only && !o.metadata_only;
        if (weights) check_memory_fits(model_memory_need(path));  // the mapping, before it is made
        h->model = Model::load(path, o);
        if (weights) check_memory_fits(model_memory_need(*h->model));  // what decoding reads of it
        h->meta_json.resize(h->model->gguf().metadata().size());
        *out = h.release();
    });
}

void ember_model_free(ember_model* model) { delete model; }

const char* ember_model_last_error(const ember_model* m) { return m ? m->last_error.get() : ""; }

const char* ember_model_arch(const ember_model* m) { return m ? m->model->hparams().arch.c_str() : ""; }
const char* ember_model_ftype_name(const ember_model* m) { return m ? m->model->ftype_name().c_str() : ""; }
uint32_t ember_model_gguf_version(const ember_model* m) { return m ? m->model->gguf().version() : 0; }
uint64_t ember_model_file_size(const ember_model* m) { return m ? m->model->gguf().file_size() : 0; }
uint64_t ember_model_n_params(const ember_model* m) { return m ? m->model->n_params() : 0; }

int32_t ember_model_n_vocab(const ember_model* m) {
    if (!m) return 0;
    if (m->model->hparams().n_vocab > 0) return m->model->hparams().n_vocab;
    return m->model->vocab() ? m->model->vocab()->n_tokens() : 0;
}

const char* ember_architectures(void) {
    static const std::string list = [] {
        size_t n = 0;
        const ArchSpec* table = arch_table(&n);
        std::string s;
        for (size_t i = 0; i < n; ++i) s += std::string(table[i].name) + "\t" + table[i].models + "\n";
        return s;
    }();
    return list.c_str();
}

int32_t ember_model_n_ctx_train(const ember_model* m) {
    if (!m) return 0;
    if (m->model->hparams().n_ctx_train) return m->model->hparams().n_ctx_train;
    const std::string a = m->model->hparams().arch;
    const GGUFValue* v = m->model->gguf().find(a + ".context_length");
    return v && v->is_integer() ? (int32_t)v->i : 0;
}

static int32_t arch_int(const ember_model* m, int32_t loaded, const char* suffix) {
    if (!m) return 0;
    if (loaded) return loaded;
    const GGUFValue* v = m->model->gguf().find(m->model->hparams().arch + suffix);
    return v && v->is_integer() ? (int32_t)v->i : 0;
}

int32_t ember_model_n_embd(const ember_model* m) {
    return arch_int(m, m ? m->model->hparams().n_embd : 0, ".embedding_length");
}
int32_t ember_model_n_layer(const ember_model* m) {
    return arch_int(m, m ? m->model->hparams().n_layer : 0, ".block_count");
}

double ember_model_layout_progress(const ember_model* m, bool wait) {
    return m && m->model ? m->model->layout_progress(wait) : 1.0;
}

int64_t ember_model_meta_count(const ember_model* m) {
    return m ? (int64_t)m->model->gguf().metadata().size() : 0;
}

ember_status ember_model_meta_get(const ember_model* m, int64_t index, const char** key,
                                  int32_t* gguf_type, const char** value_json) {
    ember_model* mm = const_cast<ember_model*>(m);
    return guarded(mm ? &mm->last_error : nullptr, [&] {
        require(m != nullptr, "model is NULL");
        const auto& kv = m->model->gguf().metadata();
        require(index >= 0 && index < (int64_t)kv.size(), "metadata index out of range");
        const auto& [k, v] = kv[(size_t)index];
        if (key) *key = k.c_str();
        if (gguf_type) *gguf_type = (int32_t)v.type;
        if (value_json) {
            std::lock_guard<std::mutex> lock(mm->meta_mutex);
            auto& slot = mm->meta_json[(size_t)index];
            if (!slot) slot = GGUFFile::to_json(v);
            *value_json = slot->c_str();
        }
    });
}

int64_t ember_model_tensor_count(const ember_model* m) {
    return m ? (int64_t)m->model->gguf().tensors().size() : 0;
}

ember_status ember_model_tensor_get(const ember_model* m, int64_t index, ember_tensor_info* out) {
    ember_model* mm = const_cast<ember_model*>(m);
    return guarded(mm ? &mm->last_error : nullptr, [&] {
        require(m && out, "model and out must not be NULL");
        const auto& ts = m->model->gguf().tensors();
        require(index >= 0 && index < (int64_t)ts.size(), "tensor index out of range");
        const GGUFTensorInfo& t = ts[(size_t)index];
        out->name = t.name.c_str();
        out->type = (int32_t)t.type;
        out->type_name = type_name(t.type);
        out->n_dims = (int32_t)t.n_dims;
        for (int i = 0; i < 4; ++i) out->ne[i] = t.ne[i];
        out->offset = m->model->gguf().data_offset() + t.offset;
        out->n_bytes = t.n_bytes;
    });
}

ember_status ember_model_tensor_dequantize(const ember_model* m, const char* name, float* out, int64_t n) {
    ember_model* mm = const_cast<ember_model*>(m);
    return guarded(mm ? &mm->last_error : nullptr, [&] {
        require(m && name && out, "model, name and out must not be NULL");
        const GGUFTensorInfo* t = m->model->gguf().find_tensor(name);
        if (!t) fail(EMBER_ERR_INVALID_ARGUMENT, std::string("no tensor named '") + name + "'");
        const int64_t count = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
        require(n == count, "n must equal the tensor's element count");
        type_traits(t->type)->dequantize(t->data, out, count);
    });
}

// ---- types ------------------------------------------------------------------

const char* ember_type_name(int32_t type) { return type < 0 ? nullptr : type_name((uint32_t)type); }

int64_t ember_type_block_size(int32_t type) {
    const TypeTraits* t = type < 0 ? nullptr : type_traits((uint32_t)type);
    return t ? t->block_size : 0;
}

int64_t ember_type_block_bytes(int32_t type) {
    const TypeTraits* t = type < 0 ? nullptr : type_traits((uint32_t)type);
    return t ? t->block_bytes : 0;
}

int32_t ember_type_is_weight(int32_t type) {
    // what the model loader admits (Model::weight): a codec to dequantize and a kernel row
    const TypeTraits* t = type < 0 ? nullptr : type_traits((uint32_t)type);
    return t && t->dequantize && weight_type_supported((DType)type) ? 1 : 0;
}

ember_status ember_dequantize(int32_t type, const void* src, float* dst, int64_t n) {
    return guarded(nullptr, [&] {
        const TypeTraits* t = type < 0 ? nullptr : type_traits((uint32_t)type);
        if (!t || !t->dequantize) fail(EMBER_ERR_UNSUPPORTED, "unknown type " + std::to_string(type));
        require(src && dst && n >= 0 && n % t->block_size == 0, "n must be a multiple of the block size");
        t->dequantize(src, dst, n);
    });
}

ember_status ember_quantize(int32_t type, const float* src, void* dst, int64_t n) {
    return guarded(nullptr, [&] {
        const TypeTraits* t = type < 0 ? nullptr : type_traits((uint32_t)type);
        if (!t) fail(EMBER_ERR_UNSUPPORTED, "unknown type " + std::to_string(type));
        if (!t->quantize) fail(EMBER_ERR_UNSUPPORTED, std::string("no reference quantizer for ") + t->name);
        require(src && dst && n >= 0 && n % t->block_size == 0, "n must be a multiple of the block size");
        t->quantize(src, dst, n);
    });
}

// ---- vocabulary -----------------------------------------------------------------

ember_status ember_tokenize(const ember_model* m, const char* text, int32_t text_len, bool add_special,
                            bool parse_special, ember_token* tokens, int32_t capacity, int32_t* n_out) {
    ember_model* mm = const_cast<ember_model*>(m);
    return guarded(mm ? &mm->last_error : nullptr, [&] {
        const Vocab& v = vocab_of(m);
        require(n_out != nullptr && text_len >= 0 && (text || text_len == 0), "invalid text or n_out");
        std::vector<int32_t> ids = v.tokenize(std::string_view(text ? text : "", (size_t)text_len),
                                              add_special, parse_special);
        *n_out = (int32_t)ids.size();
        if ((int32_t)ids.size() > capacity || (!tokens && !ids.empty()))
            fail(EMBER_ERR_BUFFER_TOO_SMALL, "token buffer too small (" + std::to_string(ids.size()) + " needed)");
        if (!ids.empty()) std::memcpy(tokens, ids.data(), ids.size() * sizeof(int32_t));
    });
}

ember_status ember_token_to_piece(const ember_model* m, ember_token token, bool special, char* buf,
                                  int32_t capacity, int32_t* n_out) {
    ember_model* mm = const_cast<ember_model*>(m);
    return guarded(mm ? &mm->last_error : nullptr, [&] {
        const Vocab& v = vocab_of(m);
        require(token >= 0 && token < v.n_tokens(), "token id out of range");
        copy_out(v.token_to_piece(token, special), buf, capacity, n_out);
    });
}

ember_status ember_detokenize(const ember_model* m, const ember_token* tokens, int32_t n_tokens,
                              bool remove_special, bool unparse_special, char* buf, int32_t capacity,
                              int32_t* n_out) {
    ember_model* mm = const_cast<ember_model*>(m);
    return guarded(mm ? &mm->last_error : nullptr, [&] {
        const Vocab& v = vocab_of(m);
        require(n_tokens >= 0 && (tokens || n_tokens == 0), "invalid tokens");
        std::vector<int32_t> ids(tokens, tokens + n_tokens);
        for (int32_t id : ids) require(id >= 0 && id < v.n_tokens(), "token id out of range");
        copy_out(v.detokenize(ids, remove_special, unparse_special), buf, capacity, n_out);
    });
}

ember_token ember_token_bos(const ember_model* m) { return m && m->model->vocab() ? m->model->vocab()->bos() : -1; }
ember_token ember_token_eos(const ember_model* m) { return m && m->model->vocab() ? m->model->vocab()->eos() : -1; }
ember_token ember_token_eot(const ember_model* m) { return m && m->model->vocab() ? m->model->vocab()->eot() : -1; }

bool ember_token_is_eog(const ember_model* m, ember_token t) {
    if (!m || !m->model->vocab() || t < 0 || t >= m->model->vocab()->n_tokens()) return false;
    return m->model->vocab()->is_eog(t);
}

bool ember_token_is_control(const ember_model* m, ember_token t) {
    if (!m || !m->model->vocab() || t < 0 || t >= m->model->vocab()->n_tokens()) return false;
    return m->model->vocab()->is_control(t);
}

const char* ember_token_text(const ember_model* m, ember_token t) {
    if (!m || !m->model->vocab() || t < 0 || t >= m->model->vocab()->n_tokens()) return nullptr;
    return m->model->vocab()->token_text(t).c_str();
}

bool ember_vocab_add_bos(const ember_model* m) { return m && m->model->vocab() && m->model->vocab()->add_bos(); }
bool ember_vocab_add_eos(const ember_model* m) { return m && m->model->vocab() && m->model->vocab()->add_eos(); }

// ---- context ------------------------------------------------------------------

ember_context_params ember_context_default_params(void) {
    ember_context_params p;
    p.n_ctx = 0;
    p.n_batch = 512;
    p.n_threads = 0;
    p.isa = EMBER_ISA_AUTO;
    p.backend = nullptr;
    p.n_gpu_layers = -1;
    p.progress = nullptr;
    p.progress_user_data = nullptr;
    return p;
}

int32_t ember_backend_device_count(void) {
    try {
        return (int32_t)backend_devices().size();
    } catch (...) {
        return 1;  // the CPU
    }
}

ember_status ember_backend_device_get(int32_t i, ember_backend_device* out) {
    return guarded(nullptr, [&] {
        require(out != nullptr, "out is NULL");
        const std::vector<BackendDeviceRow> rows = backend_devices();
        require(i >= 0 && (size_t)i < rows.size(), "backend device index out of range");
        const BackendDeviceRow& r = rows[(size_t)i];
        std::memset(out, 0, sizeof(*out));
        auto put = [](char* dst, size_t n, const std::string& s) { std::snprintf(dst, n, "%s", s.c_str()); };
        put(out->backend, sizeof(out->backend), r.backend->name);
        put(out->label, sizeof(out->label), r.backend->label);
        out->device = r.device;
        out->usable = r.backend->usable && r.device >= 0;
        out->score = r.backend->score;
        put(out->name, sizeof(out->name), r.info.name);
        out->memory_total = r.info.memory_total;
        out->memory_free = r.info.memory_free;
        put(out->reason, sizeof(out->reason), r.backend->reason);
        put(out->path, sizeof(out->path), r.backend->path);
    });
}

bool ember_isa_supported(int32_t isa) {
    return isa >= EMBER_ISA_SCALAR && isa <= EMBER_ISA_NEON && isa_supported((Isa)isa);
}

ember_status ember_context_create(ember_model* model, const ember_context_params* params, ember_context** out) {
    return guarded(model ? &model->last_error : nullptr, [&] {
        require(model && out, "model and out must not be NULL");
        *out = nullptr;
        ContextOptions o;
        if (params) {
            require(params->n_ctx >= 0 && params->n_batch >= 0 && params->n_threads >= 0,
                    "context parameters must not be negative");
            o.n_ctx = params->n_ctx;
            o.n_batch = params->n_batch;
            o.n_threads = params->n_threads;
            if (params->backend) o.backend = params->backend;
            o.n_gpu_layers = params->n_gpu_layers;
            o.progress = params->progress;
            o.progress_user_data = params->progress_user_data;
            if (params->isa != EMBER_ISA_AUTO) {
                if (!ember_isa_supported(params->isa))
                    fail(EMBER_ERR_UNSUPPORTED, "this CPU does not support instruction set level " +
                                                    std::to_string(params->isa));
                o.isa = params->isa;
            }
        }
        auto h = std::make_unique<ember_context>();
        h->owner = model;
        if (model->model->has_weights()) check_memory_fits(context_memory_need(*model->model, o));
        h->ctx = std::make_unique<Context>(*model->model, o);
        *out = h.release();
    });
}

void ember_context_free(ember_context* ctx) { delete ctx; }

int32_t ember_model_pooling(const ember_model* m) {
    if (!m || !m->model->has_weights()) return -1;
    const HParams& h = m->model->hparams();
    return h.causal ? -1 : (int32_t)h.pooling;
}

ember_embedder_params ember_embedder_default_params(void) {
    ember_embedder_params p{};
    p.n_threads = 0;
    p.isa = EMBER_ISA_AUTO;
    p.n_batch = 0;
    p.pooling = EMBER_POOLING_UNSPECIFIED;
    return p;
}

ember_status ember_embedder_create(ember_model* model, const ember_embedder_params* params, ember_embedder** out) {
    return guarded(model ? &model->last_error : nullptr, [&] {
        require(model && out, "model and out must not be NULL");
        *out = nullptr;
        EncoderOptions o;
        if (params) {
            require(params->n_threads >= 0 && params->n_batch >= 0, "embedder parameters must not be negative");
            require(params->pooling >= EMBER_POOLING_UNSPECIFIED && params->pooling <= EMBER_POOLING_LAST,
                    "pooling must be one of EMBER_POOLING_*");
            o.n_threads = params->n_threads;
            o.n_batch = params->n_batch;
            o.pooling = params->pooling;
            if (params->isa != EMBER_ISA_AUTO) {
                if (!ember_isa_supported(params->isa))
                    fail(EMBER_ERR_UNSUPPORTED, "this CPU does not support instruction set level " +
                                                    std::to_string(params->isa));
                o.isa = params->isa;
            }
        }
        auto h = std::make_unique<ember_embedder>();
        h->owner = model;
        h->encoder = std::make_unique<Encoder>(*model->model, o);
        *out = h.release();
    });
}

void ember_embedder_free(ember_embedder* e) { delete e; }

const char* ember_embedder_last_error(const ember_embedder* e) { return e ? e->last_error.get() : ""; }

int32_t ember_embedder_n_embd(const ember_embedder* e) { return e ? e->encoder->n_embd() : 0; }

int32_t ember_embedder_n_seq_max(const ember_embedder* e) { return e ? e->encoder->n_seq_max() : 0; }

int32_t ember_embedder_pooling(const ember_embedder* e) { return e ? (int32_t)e->encoder->pooling() : -1; }

void ember_embedder_set_cancel_flag(ember_embedder* e, const volatile int32_t* flag) {
    if (e) e->encoder->set_cancel_flag(flag);
}

ember_status ember_embed(ember_embedder* e, const ember_token* tokens, const int32_t* seq_lens, int32_t n_seqs,
                         bool normalize, float* out, int64_t out_capacity) {
    return guarded(e ? &e->last_error : nullptr, [&] {
        require(e != nullptr, "embedder is NULL");
        require(n_seqs > 0, "n_seqs must be positive");
        const int64_t need = (int64_t)n_seqs * e->encoder->n_embd();
        if (out_capacity < need)
            fail(EMBER_ERR_BUFFER_TOO_SMALL, "out holds " + std::to_string(out_capacity) + " floats; " +
                                                 std::to_string(n_seqs) + " vectors need " + std::to_string(need));
        e->encoder->embed(tokens, seq_lens, n_seqs, normalize, out);
    });
}
const char* ember_context_backend(const ember_context* ctx) {
    return ctx ? ctx->ctx->placement().summary.c_str() : "";
}
const char* ember_context_backend_note(const ember_context* ctx) {
    return ctx ? ctx->ctx->placement().note.c_str() : "";
}
const char* ember_context_backend_name(const ember_context* ctx) {
    return ctx ? ctx->ctx->placement().backend.c_str() : "";
}
int32_t ember_context_n_gpu_layers(const ember_context* ctx) { return ctx ? ctx->ctx->placement().n_offloaded : 0; }
const char* ember_context_last_error(const ember_context* ctx) { return ctx ? ctx->last_error.get() : ""; }
int32_t ember_context_n_ctx(const ember_context* ctx) { return ctx ? ctx->ctx->n_ctx() : 0; }
int32_t ember_context_n_past(const ember_context* ctx) { return ctx ? ctx->ctx->n_past() : 0; }
void ember_context_set_profiling(ember_context* ctx, bool on) {
    if (ctx) ctx->ctx->set_profiling(on);
}

const char* ember_context_profile(ember_context* ctx) {
    if (!ctx) return "";
    std::string& out = ctx->profile_report;
    out.clear();
    char seconds[32];
    for (const auto& [name, e] : ctx->ctx->profile().entries) {
        std::snprintf(seconds, sizeof(seconds), "%.9f", e.seconds);
        out += name + "\t" + std::to_string(e.count) + "\t" + seconds + "\n";
    }
    return out.c_str();
}

ember_status ember_context_read_bandwidth(ember_context* ctx, double seconds, double* gbs, uint64_t* bytes) {
    return guarded(ctx ? &ctx->last_error : nullptr, [&] {
        require(ctx != nullptr, "context is NULL");
        require(gbs != nullptr, "gbs is NULL");
        require(seconds >= 0.0 && seconds <= 60.0, "seconds must be in [0, 60]");
        *gbs = ctx->ctx->weight_read_rate(seconds, bytes) / 1e9;
    });
}

int32_t ember_context_rewind_limit(const ember_context* ctx) { return ctx ? ctx->ctx->rewind_limit() : 0; }

int32_t ember_context_restart_point(const ember_context* ctx, int32_t pos) {
    return ctx ? ctx->ctx->restart_point(pos) : 0;
}

int32_t ember_context_n_snapshots(const ember_context* ctx) {
    const RecurrentState* rs = ctx ? ctx->ctx->recurrent_state() : nullptr;
    return rs ? (int32_t)rs->snapshot_positions().size() : 0;
}

uint64_t ember_context_state_bytes(const ember_context* ctx) {
    const RecurrentState* rs = ctx ? ctx->ctx->recurrent_state() : nullptr;
    return rs ? (uint64_t)rs->bytes() : 0;
}

void ember_context_set_cancel_flag(ember_context* ctx, const volatile int32_t* flag) {
    if (ctx) ctx->ctx->set_cancel_flag(flag);
}

ember_status ember_decode(ember_context* ctx, const ember_token* tokens, int32_t n_tokens, int32_t pos0,
                          bool all_logits) {
    return guarded(ctx ? &ctx->last_error : nullptr, [&] {
        require(ctx != nullptr, "context is NULL");
        ctx->ctx->decode(tokens, n_tokens, pos0, all_logits);
    });
}

const float* ember_get_logits(ember_context* ctx, int32_t i) { return ctx ? ctx->ctx->logits(i) : nullptr; }

// ---- sampler ------------------------------------------------------------------

ember_sampler_params ember_sampler_default_params(void) {
    SamplerParams d;
    ember_sampler_params p;
    p.temperature = d.temperature;
    p.top_k = d.top_k;
    p.top_p = d.top_p;
    p.min_p = d.min_p;
    p.repeat_penalty = d.repeat_penalty;
    p.presence_penalty = d.presence_penalty;
    p.frequency_penalty = d.frequency_penalty;
    p.penalty_last_n = d.penalty_last_n;
    p.seed = d.seed;
    return p;
}

ember_status ember_sampler_create(const ember_sampler_params* params, ember_sampler** out) {
    return guarded(nullptr, [&] {
        require(params && out, "params and out must not be NULL");
        *out = nullptr;
        require(params->repeat_penalty > 0.0f, "repeat_penalty must be positive");
        SamplerParams p;
        p.temperature = params->temperature;
        p.top_k = params->top_k;
        p.top_p = params->top_p;
        p.min_p = params->min_p;
        p.repeat_penalty = params->repeat_penalty;
        p.presence_penalty = params->presence_penalty;
        p.frequency_penalty = params->frequency_penalty;
        p.penalty_last_n = params->penalty_last_n;
        p.seed = params->seed;
        auto h = std::make_unique<ember_sampler>();
        h->sampler = std::make_unique<Sampler>(p);
        *out = h.release();
    });
}

void ember_sampler_free(ember_sampler* s) { delete s; }
void ember_sampler_reset(ember_sampler* s) {
    if (s) s->sampler->reset();
}
void ember_sampler_accept(ember_sampler* s, ember_token t) {
    if (s) s->sampler->accept(t);
}

ember_status ember_sampler_sample(ember_sampler* s, const float* logits, int32_t n_vocab, ember_token* out) {
    return guarded(nullptr, [&] {
        require(s && logits && out && n_vocab > 0, "sampler, logits and out must be valid");
        *out = s->sampler->sample(logits, n_vocab);
    });
}

ember_status ember_sampler_distribution(ember_sampler* s, const float* logits, int32_t n_vocab, ember_token* ids,
                                        float* probs, int32_t capacity, int32_t* n_kept) {
    return guarded(nullptr, [&] {
        require(s && logits && n_kept && n_vocab > 0, "sampler, logits and n_kept must be valid");
        require(capacity >= 0 && (capacity == 0 || (ids && probs)), "ids and probs must hold capacity entries");
        *n_kept = s->sampler->distribution(logits, n_vocab, ids, probs, capacity);
    });
}

// ---- grammar ------------------------------------------------------------------

ember_status ember_grammar_create(const ember_model* m, const char* gbnf, int32_t gbnf_len, const char* root_rule,
                                  ember_grammar** out) {
    ember_model* mm = const_cast<ember_model*>(m);
    return guarded(mm ? &mm->last_error : nullptr, [&] {
        require(out != nullptr && gbnf_len >= 0 && (gbnf || gbnf_len == 0), "invalid grammar text or out");
        *out = nullptr;
        auto grammar = std::make_shared<const CompiledGrammar>(
            parse_gbnf(std::string_view(gbnf ? gbnf : "", (size_t)gbnf_len), root_rule ? root_rule : "root"));
        std::shared_ptr<const GrammarVocab> vocab;
        if (m) {
            const Vocab& v = vocab_of(m);
            std::lock_guard<std::mutex> lock(mm->grammar_mutex);
            if (!mm->grammar_vocab) {
                std::vector<std::string> pieces((size_t)v.n_tokens());
                std::vector<bool> eog((size_t)v.n_tokens());
                for (int32_t id = 0; id < v.n_tokens(); ++id) {
                    pieces[(size_t)id] = v.token_to_piece(id, false);
                    eog[(size_t)id] = v.is_eog(id);
                }
                mm->grammar_vocab = GrammarVocab::build(std::move(pieces), eog);
            }
            vocab = mm->grammar_vocab;
        }
        auto h = std::make_unique<ember_grammar>();
        h->matcher = std::make_unique<GrammarMatcher>(std::move(grammar), std::move(vocab));
        *out = h.release();
    });
}

void ember_grammar_free(ember_grammar* g) { delete g; }

ember_status ember_grammar_reset(ember_grammar* g) {
    return guarded(nullptr, [&] {
        require(g != nullptr, "grammar is NULL");
        g->matcher->reset();
    });
}

ember_status ember_grammar_apply(ember_grammar* g, float* logits, int32_t n_vocab, int32_t* n_allowed) {
    return guarded(nullptr, [&] {
        require(g && logits && n_vocab > 0, "grammar, logits and n_vocab must be valid");
        const size_t n = g->matcher->apply(logits, n_vocab);
        if (n_allowed) *n_allowed = (int32_t)n;
    });
}

ember_status ember_grammar_accept(ember_grammar* g, ember_token token) {
    return guarded(nullptr, [&] {
        require(g != nullptr, "grammar is NULL");
        g->matcher->accept_token(token);
    });
}

ember_status ember_grammar_accept_text(ember_grammar* g, const char* text, int32_t text_len) {
    return guarded(nullptr, [&] {
        require(g != nullptr && text_len >= 0 && (text || text_len == 0), "invalid grammar or text");
        g->matcher->accept_bytes(std::string_view(text ? text : "", (size_t)text_len));
    });
}

bool ember_grammar_can_end(const ember_grammar* g) { return g && g->matcher->can_end(); }
bool ember_grammar_is_done(const ember_grammar* g) { return g && g->matcher->is_done(); }

}  // extern "C"
