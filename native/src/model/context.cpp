#include "model/context.h"

#include <algorithm>
#include <set>
#include <cstring>
#include <string>

#include "backend/placement.h"
#include "core/error.h"
#include "core/threadpool.h"
#include "model/arch.h"
#include "model/build.h"
#include "quant/types.h"

namespace ember {

namespace {

int32_t choose_n_ctx(const Model& model, int32_t requested) {
    if (requested > 0) return requested;
    const int32_t train = model.hparams().n_ctx_train;
    return train > 0 && train < 4096 ? train : 4096;
}

int32_t choose_threads(int32_t requested) {
    return requested > 0 ? requested : ThreadPool::default_thread_count();
}

// The longest activation row, for per-thread scratch (attention's included).
int64_t max_row_of(const HParams& h) {
    int64_t row = std::max<int64_t>({h.n_embd, (int64_t)h.n_embd_per_layer * h.n_layer,
                                     (int64_t)attention_scratch_floats(h.max_head_dim(), h.max_group())});
    for (int32_t il = 0; il < h.n_layer; ++il)
        row = std::max<int64_t>({row, h.n_ff_of(il), (int64_t)h.head_dim_of(il) * h.n_head_of(il)});
    return row;
}


}  // namespace

Context::Context(const Model& model, const ContextOptions& opts)
    : model_(model),
      n_ctx_(choose_n_ctx(model, opts.n_ctx)),
      n_batch_(opts.n_batch > 0 ? std::min(opts.n_batch, choose_n_ctx(model, opts.n_ctx)) : 512),
      kv_(model.hparams(), n_ctx_, n_batch_),
      backend_(choose_threads(opts.n_threads), max_row_of(model.hparams()),
               opts.isa >= 0 ? (Isa)opts.isa : active_isa()) {
    if (!model.has_weights()) fail(EMBER_ERR_INVALID_ARGUMENT, "the model was loaded without weights");
    if (!model.hparams().causal)
        fail(EMBER_ERR_UNSUPPORTED, "'" + model.hparams().arch +
                                        "' is an embedding model: it turns text into vectors for search (ember embed, "
                                        "/v1/embeddings, the document library), it does not generate text");
    if (n_ctx_ < 1 || n_ctx_ > (1 << 20)) fail(EMBER_ERR_INVALID_ARGUMENT, "n_ctx must be in 1..1048576");
    const HParams& h = model.hparams();

    // The KV cache's shapes first (the graphs refer to them), its memory once the layers
    // are placed: one host allocation for the CPU's layers, the device's own for the rest.
    memories_.push_back(&kv_);
    if (h.has_recurrent()) {
        rs_ = std::make_unique<RecurrentState>(h, RecurrentState::kDefaultSnapshots);
        memories_.push_back(rs_.get());
    }
    in_tokens_.resize((size_t)n_batch_);
    in_pos_.resize((size_t)n_batch_);

    place(opts);

    kv_.allocate_host([&](int32_t il) { return !offload_ || !offload_->layer_on_device(il); });

    // the matrices the CPU multiplies by (model.h: four-row copies); last, so that the
    // destructor, which closes, runs whenever this opened
    std::vector<Tensor*> cpu;
    for (int32_t il = 0; il < h.n_layer; ++il) {
        if (offload_ && offload_->layer_on_device(il)) continue;
        const LayerWeights& L = model.layers[(size_t)il];
        for (Tensor* t : {L.wq, L.wk, L.wv, L.wqkv, L.wo, L.ffn_gate, L.ffn_up, L.ffn_down, L.per_layer_inp_gate,
                          L.per_layer_proj, L.ssm_in, L.ssm_z, L.ssm_beta, L.ssm_alpha, L.ssm_out})
            cpu.push_back(t);
    }
    if (model.per_layer_model_proj) cpu.push_back(model.per_layer_model_proj);
    if (!offload_ || !offload_->layer_on_device(h.n_layer)) cpu.push_back(model.output);
    model.open_context(backend_.isa(), cpu);
}

Context::~Context() { model_.close_context(); }

std::unique_ptr<BatchGraph> Context::build(int32_t n_tokens, Outputs outputs) {
    auto bg = std::make_unique<BatchGraph>();
    GraphBuilder builder(model_, kv_, rs_.get(), *bg, n_tokens, outputs, n_ctx_, in_tokens_.data(), in_pos_.data());
    model_.arch().build_graph(builder);
    return bg;
}

void Context::place(const ContextOptions& opts) {
    const int32_t n_layers = model_.hparams().n_layer + 1;
    placement_ = PlacementInfo{};
    placement_.n_layers = n_layers;
    placement_.summary = std::string("CPU (") + isa_label(backend_.isa()) + ")";
    DeviceChoice choice = choose_devices(opts.backend);
    if (opts.n_gpu_layers < -1) fail(EMBER_ERR_INVALID_ARGUMENT, "n_gpu_layers must be -1 (auto) or >= 0");
    if (choice.name == "cpu") return;
    if (model_.hparams().has_recurrent()) {
        // the recurrent ops and their state have no device kernels yet
        if (!choice.candidates.empty())
            placement_.note = "the recurrent layers of " + model_.hparams().arch +
                              " (delta-net or short convolutions) run on the CPU only";
        return;
    }
    if (opts.n_gpu_layers == 0) {
        if (!choice.candidates.empty()) placement_.note = "no layers offloaded (0 GPU layers asked for)";
        return;
    }
    for (const auto& [be, dev] : choice.candidates) {
        std::string why;
        if (try_offload(*be, dev, opts.n_gpu_layers, opts, why)) return;
        choice.reasons.push_back(why);
    }
    for (const std::string& r : choice.reasons) placement_.note += (placement_.note.empty() ? "" : "; ") + r;
    if (placement_.note.empty() && choice.name == "auto") placement_.note = "no GPU backend";
}

bool Context::try_offload(const BackendRecord& be, int device, int32_t n_wanted, const ContextOptions& opts,
                          std::string& why) {
    const HParams& h = model_.hparams();
    const int32_t n_layer = h.n_layer, n_layers = n_layer + 1;
    BackendDeviceInfo info{};
    if (be.iface->device_info(device, &info) != 0) {
        why = be.label + ": device " + std::to_string(device) + " did not answer";
        return false;
    }
    info.name[sizeof(info.name) - 1] = 0;

    // The graphs decoding lives on (one token, and a full batch), built now: what each layer
    // runs and reads decides whether the device can take it and how much memory it needs.
    // They stay in the cache.
    std::vector<BatchGraph*> probes;
    for (int32_t n : {1, n_batch_}) {
        auto key = std::make_pair(n, (int)Outputs::LAST);
        auto it = graphs_.find(key);
        if (it == graphs_.end()) it = graphs_.emplace(key, build(n, Outputs::LAST)).first;
        probes.push_back(it->second.get());
        if (n_batch_ == 1) break;
    }
    // what each layer needs on the device, measured on those graphs
    LayerNeeds needs;
    needs.supported.assign((size_t)n_layers, 1);
    needs.lacks.assign((size_t)n_layers, std::string());
    needs.bytes.assign((size_t)n_layers, 0);
    std::set<const Tensor*> counted;
    size_t compute_bytes = 0;
    for (BatchGraph* bg : probes) {
        compute_bytes = std::max(compute_bytes, bg->graph.buffer_size());
        const auto layers = node_layers(bg->graph, n_layer);
        const auto& order = bg->graph.nodes();
        for (size_t i = 0; i < order.size(); ++i) {
            const int32_t il = layers[i];
            const Tensor* t = order[i];
            if (il < 0 || t->op == Op::VIEW) continue;
            if (needs.supported[(size_t)il] && !be.iface->supports(device, t)) {
                needs.supported[(size_t)il] = 0;
                const Tensor* w = t->src[0] && t->src[0]->op == Op::NONE ? t->src[0] : nullptr;
                needs.lacks[(size_t)il] = std::string(op_name(t->op)) +
                                          (w ? std::string(" of ") + type_name((uint32_t)w->type) : std::string());
            }
            for (const Tensor* s : t->src) {
                if (!s) continue;
                s = storage_of(s);
                if (s->op != Op::NONE || !counted.insert(s).second) continue;
                if (std::strncmp(s->name, "inp_", 4) == 0) continue;
                needs.bytes[(size_t)il] +=
                    std::strncmp(s->name, "cache_", 6) == 0 ? kv_.layer_bytes(s->layer) : align_up(s->n_bytes(), 256);
            }
        }
    }
    needs.fixed_bytes = compute_bytes + 2 * (uint64_t)n_batch_ * sizeof(int32_t) + (1ull << 20);
    LayerPlan plan = plan_layers(needs, info, n_wanted, be.label);
    if (plan.count == 0) {
        why = plan.why;
        return false;
    }
    // A shared-KV layer reads its source layer's cache where that cache lives: the two stay
    // on one device. The layers go from the end, so a plan that splits a pair keeps only
    // the output head there (every shorter run of layers still holds the last, shared one).
    for (int32_t il = 0; il < n_layer; ++il) {
        if (plan.on[(size_t)il] == plan.on[(size_t)h.kv_layer(il)]) continue;
        const std::string split = std::to_string(plan.count) + " layers would put layer " + std::to_string(il) +
                                  " on another device than layer " + std::to_string(h.kv_layer(il)) +
                                  ", whose KV cache it reads; the layers from " + std::to_string(h.n_layer_kv - 2) +
                                  " on go together";
        plan = plan_layers(needs, info, 1, be.label);
        if (plan.count == 0) {
            why = be.label + ": " + split;
            return false;
        }
        plan.note = split + (plan.note.empty() ? "" : "; " + plan.note);
        break;
    }
    const std::vector<uint8_t>& on = plan.on;
    try {
        auto off = std::make_unique<Offload>(be, device, model_.device_weights(), on, max_row_of(h),
                                             h.max_head_dim(), h.max_group(), n_batch_);
        for (int32_t il = 0; il < n_layer; ++il) {
            if (!on[(size_t)il] || !h.has_kv(il)) continue;
            for (Tensor* t : {&kv_.k[(size_t)il], &kv_.v[(size_t)il]}) {
                t->data = off->alloc_cache(kv_.layer_bytes(il));
                off->add_cache_leaf(t);
            }
        }
        std::vector<const Graph*> graphs;
        for (BatchGraph* bg : probes) graphs.push_back(&bg->graph);
        off->acquire_weights(graphs, opts.progress, opts.progress_user_data);
        off->reserve(compute_bytes);
        offload_ = std::move(off);
    } catch (const Error& e) {
        for (int32_t il = 0; il < n_layer; ++il) kv_.k[(size_t)il].data = kv_.v[(size_t)il].data = nullptr;
        if (e.status() == EMBER_ERR_CANCELLED) throw;  // the caller's choice, not the device's limit
        const std::string what = e.what();
        why = what.rfind(be.label + " ", 0) == 0 || what.rfind(be.label + ":", 0) == 0 ? what : be.label + ": " + what;
        return false;
    } catch (const std::exception& e) {
        for (int32_t il = 0; il < n_layer; ++il) kv_.k[(size_t)il].data = kv_.v[(size_t)il].data = nullptr;
        const std::string what = e.what();
        why = what.rfind(be.label + " ", 0) == 0 || what.rfind(be.label + ":", 0) == 0 ? what : be.label + ": " + what;
        return false;
    }
    placement_.backend = be.name;
    placement_.device = device;
    placement_.n_offloaded = plan.count;
    placement_.device_bytes = plan.used;
    placement_.summary = be.label + ": " + info.name + ", " + std::to_string(plan.count) + "/" +
                         std::to_string(n_layers) + " layers";
    placement_.note = plan.note;
    return true;
}

BatchGraph& Context::graph_for(int32_t n_tokens, Outputs outputs) {
    auto key = std::make_pair(n_tokens, (int)outputs);
    auto it = graphs_.find(key);
    if (it == graphs_.end()) {
        // Prompt tails have arbitrary lengths: keep the cache small, but never drop
        // the one-token graphs the generation loop lives on.
        if (graphs_.size() >= 8) {
            for (auto g = graphs_.begin(); g != graphs_.end(); ++g)
                if (g->first.first != 1) {
                    graphs_.erase(g);
                    break;
                }
        }
        it = graphs_.emplace(key, build(n_tokens, outputs)).first;
    }
    BatchGraph& bg = *it->second;
    compute_buffer_.resize(bg.graph.buffer_size());  // grows only; no-op in the token loop
    bg.graph.bind(compute_buffer_.data());
    return bg;
}

double Context::weight_read_rate(double seconds, uint64_t* bytes) {
    if (offload_) fail(EMBER_ERR_UNSUPPORTED, "the read-rate probe measures the CPU; this context offloads layers");
    const BatchGraph& bg = graph_for(1, Outputs::LAST);
    std::vector<std::pair<const uint8_t*, size_t>> ranges;
    std::vector<const void*> seen;
    for (const Tensor* node : bg.graph.nodes()) {
        if (node->op != Op::MUL_MAT && node->op != Op::MUL_MAT_ID) continue;
        const Tensor* w = node->src[0];
        if (std::find(seen.begin(), seen.end(), w->data) != seen.end()) continue;
        seen.push_back(w->data);
        if (node->op == Op::MUL_MAT_ID) {
            // a decode reads the chosen k of the experts: the first k stand in for them
            ranges.emplace_back(static_cast<const uint8_t*>(w->data), (size_t)node->src[2]->ne[0] * w->nb[2]);
            continue;
        }
        const size_t row = w->nb[1], rows = (size_t)w->n_rows(), x4 = (size_t)four_row_rows(w);
        if (x4) ranges.emplace_back(static_cast<const uint8_t*>(row_groups(w)->data), x4 * row);
        if (rows > x4) ranges.emplace_back(static_cast<const uint8_t*>(w->data) + x4 * row, (rows - x4) * row);
    }
    if (bytes) {
        *bytes = 0;
        for (const auto& r : ranges) *bytes += r.second;  // what a pass reads
    }
    return backend_.read_rate(ranges, seconds);
}

void Context::decode(const int32_t* tokens, int32_t n_tokens, int32_t pos0, bool all_logits) {
    const int32_t n_vocab = model_.hparams().n_vocab;
    if (n_tokens <= 0) fail(EMBER_ERR_INVALID_ARGUMENT, "decode needs at least one token");
    if (!tokens) fail(EMBER_ERR_INVALID_ARGUMENT, "tokens is NULL");
    if (pos0 < 0 || pos0 > n_past_)
        fail(EMBER_ERR_INVALID_ARGUMENT, "position " + std::to_string(pos0) + " is past the " +
                                             std::to_string(n_past_) + " tokens in the cache");
    if (pos0 > 0 && pos0 < rewind_limit())
        fail(EMBER_ERR_INVALID_ARGUMENT, "position " + std::to_string(pos0) +
                                             " is before the sliding-window cache's reach (" +
                                             std::to_string(rewind_limit()) + "); decode again from 0");
    if (restart_point(pos0) != pos0)
        fail(EMBER_ERR_INVALID_ARGUMENT, "position " + std::to_string(pos0) +
                                             " has no recurrent-state snapshot; decode again from " +
                                             std::to_string(restart_point(pos0)) + " (ember_context_restart_point)");
    if ((int64_t)pos0 + n_tokens > n_ctx_)
        fail(EMBER_ERR_CONTEXT_FULL, "context is full: " + std::to_string(pos0) + " + " +
                                         std::to_string(n_tokens) + " tokens exceed n_ctx = " +
                                         std::to_string(n_ctx_));
    for (int32_t i = 0; i < n_tokens; ++i)
        if (tokens[i] < 0 || tokens[i] >= n_vocab)
            fail(EMBER_ERR_INVALID_ARGUMENT, "token id " + std::to_string(tokens[i]) + " at index " +
                                                 std::to_string(i) + " is outside the vocabulary (0.." +
                                                 std::to_string(n_vocab - 1) + ")");

    const int32_t n_out = all_logits ? n_tokens : 1;
    logits_.resize((size_t)n_out * (size_t)n_vocab * sizeof(float));
    n_logits_ = 0;
    logits_first_ = all_logits ? 0 : n_tokens - 1;
    n_past_ = pos0;  // positions >= pos0 are overwritten from here on

    for (int32_t done = 0; done < n_tokens;) {
        int32_t n = std::min(n_batch_, n_tokens - done);
        // Recurrent layers: a prompt's last token runs on its own, so that a snapshot of the
        // state before it is kept: regenerating the reply, which re-evaluates the prompt's
        // last token for its logits, restarts there (model/recurrent_state.h).
        const bool prompt = rs_ && n_tokens > 1;
        if (prompt && n > 1 && done + n == n_tokens) --n;
        const bool keep = prompt && done + n < n_tokens;
        const bool last_chunk = done + n == n_tokens;
        const Outputs outs = all_logits ? Outputs::ALL : last_chunk ? Outputs::LAST : Outputs::NONE;
        BatchGraph& bg = graph_for(n, outs);
        for (int32_t i = 0; i < n; ++i) {
            in_tokens_[(size_t)i] = tokens[done + i];
            in_pos_[(size_t)i] = pos0 + done + i;
        }
        // before computing: a cancelled batch may already have stored some of its rows
        for (LayerMemory* m : memories_) m->storing(pos0 + done, n);
        const bool done_ok =
            offload_ ? offload_->compute(bg.graph, backend_, bg.tokens, bg.pos, in_tokens_.data(), in_pos_.data(), n,
                                         bg.logits, compute_buffer_.data(), cancel_, backend_.profile_if_on())
                     : backend_.compute(bg.graph, cancel_);
        if (!done_ok) fail(EMBER_ERR_CANCELLED, "decoding cancelled");
        if (bg.logits) {
            const int64_t rows = bg.logits->ne[1];
            float* dst = reinterpret_cast<float*>(logits_.data()) + (size_t)n_logits_ * (size_t)n_vocab;
            for (int64_t r = 0; r < rows; ++r)
                std::memcpy(dst + r * n_vocab, bg.logits->row<float>(r), (size_t)n_vocab * sizeof(float));
            n_logits_ += (int32_t)rows;
        }
        for (LayerMemory* m : memories_) m->stored(pos0 + done, n, keep);
        done += n;
        n_past_ = pos0 + done;
    }
}

int32_t Context::restart_point(int32_t pos) const {
    pos = std::max(0, std::min(pos, n_past_));
    for (;;) {  // the latest position every memory accepts: each step only moves down
        int32_t q = pos;
        for (const LayerMemory* m : memories_) q = std::min(q, m->restart_point(q));
        if (q == pos) return q;
        pos = q;
    }
}

int32_t Context::rewind_limit() const {
    int32_t limit = 0;
    for (const LayerMemory* m : memories_) limit = std::max(limit, m->rewind_limit());
    return limit;
}

const float* Context::logits(int32_t i) const {
    const int32_t n_vocab = model_.hparams().n_vocab;
    if (n_logits_ == 0) return nullptr;
    if (i < 0) i = logits_first_ + n_logits_ + i;  // -1: the last token
    const int32_t row = i - logits_first_;
    if (row < 0 || row >= n_logits_) return nullptr;
    return reinterpret_cast<const float*>(logits_.data()) + (size_t)row * (size_t)n_vocab;
}

}  // namespace ember
