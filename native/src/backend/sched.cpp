#include "backend/sched.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "core/error.h"

namespace ember {

std::string bytes_text(uint64_t b) {
    char buf[32];
    if (b >= (1ull << 30)) std::snprintf(buf, sizeof(buf), "%.1f GiB", (double)b / (double)(1ull << 30));
    else if (b >= (1ull << 20)) std::snprintf(buf, sizeof(buf), "%.0f MiB", (double)b / (double)(1ull << 20));
    else std::snprintf(buf, sizeof(buf), "%.0f KiB", (double)b / 1024.0);
    return buf;
}

// ---- weights on devices -------------------------------------------------------

DeviceWeightCache::~DeviceWeightCache() {
    for (auto& [key, e] : entries_) std::get<0>(key)->free(std::get<1>(key), e.ptr);
}

void* DeviceWeightCache::acquire(const BackendIface* be, int device, const Tensor* w,
                                 const std::function<bool(size_t)>& uploaded) {
    std::lock_guard<std::mutex> lock(mu_);
    Entry& e = entries_[Key{be, device, w}];
    if (!e.ptr) {
        const size_t bytes = w->n_bytes();
        char err[512] = {0};
        void* p = be->alloc(device, bytes, err, sizeof(err));
        if (!p) {
            entries_.erase(Key{be, device, w});
            fail(EMBER_ERR_OUT_OF_MEMORY, std::string(be->label) + ": no memory for weight '" + w->name + "' (" +
                                              bytes_text(bytes) + "): " + err);
        }
        constexpr size_t kChunk = 64u << 20;  // progress (and cancel) every 64 MiB
        for (size_t done = 0; done < bytes;) {
            const size_t n = std::min(kChunk, bytes - done);
            if (be->upload(device, static_cast<uint8_t*>(p) + done, static_cast<const uint8_t*>(w->data) + done, n, err,
                           sizeof(err)) != 0) {
                be->free(device, p);
                entries_.erase(Key{be, device, w});
                fail(EMBER_ERR_INTERNAL, std::string(be->label) + ": uploading weight '" + w->name + "' failed: " + err);
            }
            done += n;
            if (uploaded && !uploaded(n)) {
                be->free(device, p);
                entries_.erase(Key{be, device, w});
                fail(EMBER_ERR_CANCELLED, "cancelled while copying the weights to the device");
            }
        }
        e.ptr = p;
    }
    ++e.refs;
    return e.ptr;
}

void DeviceWeightCache::release(const BackendIface* be, int device, const Tensor* w) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(Key{be, device, w});
    if (it == entries_.end()) return;
    if (--it->second.refs <= 0) {
        be->free(device, it->second.ptr);
        entries_.erase(it);
    }
}

// ---- which layer a node belongs to ----------------------------------------------

namespace {

bool has_storage(const Tensor* st) { return st->op != Op::NONE && st->op != Op::VIEW && st->op != Op::KV_STORE; }

}  // namespace

int32_t leaf_layer(const Tensor* leaf, const Tensor* reader, int32_t n_layer) {
    if (leaf->layer >= 0) return leaf->layer;
    if (leaf->layer == kLayerEmbedding) return reader->op == Op::GET_ROWS ? -1 : n_layer;
    if (leaf->layer == kLayerOutput) return n_layer;
    return kNoLayer;  // inputs, shared rope factors
}

std::vector<int32_t> node_layers(const Graph& g, int32_t n_layer) {
    const auto& order = g.nodes();
    std::map<const Tensor*, int32_t> of;
    std::vector<int32_t> out(order.size(), -1);
    for (size_t i = 0; i < order.size(); ++i) {
        const Tensor* t = order[i];
        int32_t il = kNoLayer;
        for (const Tensor* s : t->src) {
            if (!s) continue;
            auto it = of.find(s);
            const int32_t l = it != of.end() ? it->second : s->op == Op::NONE ? leaf_layer(s, t, n_layer) : kNoLayer;
            il = std::max(il, l);
        }
        if (il == kNoLayer) il = -1;
        of[t] = il;
        out[i] = il;
    }
    return out;
}

// ---- the device side of a context ---------------------------------------------------

Offload::Offload(const BackendRecord& be, int device, DeviceWeightCache& weights, std::vector<uint8_t> on_device,
                 int64_t max_row, int64_t head_dim, int64_t group, int32_t n_batch)
    : be_(be), iface_(be.iface), device_(device), device_weights_(weights), on_device_(std::move(on_device)), n_batch_(n_batch) {
    char err[512] = {0};
    state_ = iface_->state_create(device_, max_row, head_dim, group, err, sizeof(err));
    if (!state_) device_failure("creating its compute state", err);
    inputs_ = iface_->alloc(device_, 2 * (size_t)n_batch_ * sizeof(int32_t), err, sizeof(err));
    if (!inputs_) {
        iface_->state_free(state_);
        device_failure("allocating the input buffer", err);
    }
}

Offload::~Offload() {
    for (auto& [w, p] : weights_) device_weights_.release(iface_, device_, w);
    for (void* p : caches_mem_) iface_->free(device_, p);
    if (compute_buf_) iface_->free(device_, compute_buf_);
    if (inputs_) iface_->free(device_, inputs_);
    if (state_) iface_->state_free(state_);
}

void Offload::device_failure(const char* what, const char* err) const {
    fail(EMBER_ERR_OUT_OF_MEMORY, be_.label + ": failed " + what + ": " + (err && *err ? err : "no reason given"));
}

void* Offload::alloc_cache(size_t bytes) {
    char err[512] = {0};
    void* p = iface_->alloc(device_, bytes, err, sizeof(err));
    if (!p) device_failure(("allocating " + bytes_text(bytes) + " of KV cache").c_str(), err);
    caches_mem_.push_back(p);
    if (iface_->memset_zero(device_, p, bytes, err, sizeof(err)) != 0) device_failure("clearing the KV cache", err);
    return p;
}

void Offload::reserve(size_t bytes) {
    if (bytes <= compute_size_) return;
    if (compute_buf_) iface_->free(device_, compute_buf_);
    compute_buf_ = nullptr;
    compute_size_ = 0;
    plans_.clear();  // their addresses point into the old buffer
    char err[512] = {0};
    compute_buf_ = iface_->alloc(device_, bytes, err, sizeof(err));
    if (!compute_buf_) device_failure(("allocating a " + bytes_text(bytes) + " compute buffer").c_str(), err);
    compute_size_ = bytes;
}

void* Offload::weight_address(const Tensor* w, const std::function<bool(size_t)>& uploaded) {
    auto it = weights_.find(w);
    if (it != weights_.end()) return it->second;
    void* p = device_weights_.acquire(iface_, device_, w, uploaded);
    weights_[w] = p;
    return p;
}

void Offload::acquire_weights(const std::vector<const Graph*>& graphs, bool (*progress)(float, void*), void* user) {
    // the weights the device nodes read, in first-use order
    std::vector<const Tensor*> need;
    std::set<const Tensor*> seen;
    for (const Graph* g : graphs) {
        const auto layers = node_layers(*g, (int32_t)on_device_.size() - 1);
        const auto& order = g->nodes();
        for (size_t i = 0; i < order.size(); ++i) {
            const int32_t il = layers[i];
            if (il < 0 || !on_device_[(size_t)il] || order[i]->op == Op::VIEW) continue;
            for (const Tensor* s : order[i]->src) {
                if (!s) continue;
                const Tensor* st = storage_of(s);
                if (st->op == Op::NONE && !caches_.count(st) && std::strncmp(st->name, "inp_", 4) != 0 &&
                    seen.insert(st).second)
                    need.push_back(st);
            }
        }
    }
    uint64_t total = 0, done = 0;
    for (const Tensor* w : need) total += w->n_bytes();
    auto report = [&](size_t n) {
        done += n;
        return !progress || progress(total ? (float)((double)done / (double)total) : 1.0f, user);
    };
    for (const Tensor* w : need) {
        const uint64_t before = done;
        weight_address(w, report);
        if (done == before && !report(w->n_bytes())) {  // already on the device (another context's)
            fail(EMBER_ERR_CANCELLED, "cancelled while copying the weights to the device");
        }
    }
}

void* Offload::device_address(const Tensor* t, const Tensor* tokens_leaf, const Tensor* pos_leaf, uint8_t* host_base) {
    const Tensor* st = storage_of(t);
    if (st->op == Op::KV_STORE) return nullptr;  // writes into the caches; no data of its own
    const size_t off = (size_t)(static_cast<const uint8_t*>(t->data) - static_cast<const uint8_t*>(st->data));
    uint8_t* base;
    if (has_storage(st)) {
        base = static_cast<uint8_t*>(compute_buf_) + (static_cast<const uint8_t*>(st->data) - host_base);
    } else if (st == tokens_leaf) {
        base = static_cast<uint8_t*>(inputs_);
    } else if (st == pos_leaf) {
        base = static_cast<uint8_t*>(inputs_) + (size_t)n_batch_ * sizeof(int32_t);
    } else if (caches_.count(st)) {
        base = static_cast<uint8_t*>(st->data);  // the cache's data is its device memory
    } else if (st->op == Op::NONE) {
        base = static_cast<uint8_t*>(weight_address(st));
    } else {
        fail(EMBER_ERR_INTERNAL, std::string("offload: no device address for '") + t->name + "'");
    }
    return base + off;
}

Offload::Plan Offload::build_plan(const Graph& g, const Tensor* tokens_leaf, const Tensor* pos_leaf,
                                  const Tensor* output, uint8_t* host_base) {
    Plan p;
    p.host_base = host_base;
    p.dev_base = compute_buf_;
    const auto& order = g.nodes();
    const auto layers = node_layers(g, (int32_t)on_device_.size() - 1);
    auto on_dev = [&](size_t i) {
        const int32_t il = layers[i];
        return il >= 0 && on_device_[(size_t)il] != 0;
    };
    // where each storage tensor is valid: bit 1 host, bit 2 device
    std::map<const Tensor*, int> valid;
    std::map<const Tensor*, const Tensor*> shadow_of;
    for (size_t i = 0; i < order.size(); ++i) {
        const Tensor* t = order[i];
        if (t->op == Op::VIEW) {
            if (!p.splits.empty() && !p.splits.back().on_device) p.splits.back().end = i + 1;
            continue;
        }
        const bool dev = on_dev(i);
        if (dev && !iface_->supports(device_, t))
            fail(EMBER_ERR_UNSUPPORTED, be_.label + " cannot compute node '" + t->name + "' of layer " +
                                            std::to_string(layers[i]));
        if (p.splits.empty() || p.splits.back().on_device != dev) {
            Split s;
            s.on_device = dev;
            s.begin = i;
            p.splits.push_back(s);
        }
        Split& s = p.splits.back();
        s.end = i + 1;
        const int side = dev ? 2 : 1;
        for (const Tensor* src : t->src) {
            if (!src) continue;
            const Tensor* st = storage_of(src);
            if (st->op == Op::NONE) {
                if (dev && st == tokens_leaf) p.reads_tokens = true;
                if (dev && st == pos_leaf) p.reads_pos = true;
                if (!dev && caches_.count(st))
                    fail(EMBER_ERR_INTERNAL, "offload: a CPU node reads a device cache");
                continue;
            }
            if (!has_storage(st)) continue;  // KV_STORE: an ordering edge only
            int& v = valid[st];
            if (!(v & side)) {
                s.copies.push_back(Copy{st, dev});
                v |= side;
            }
        }
        if (has_storage(t)) valid[t] = side;
        if (dev) {
            // the node's shadow: device addresses, sources shadowed (shallow for leaves
            // and for what earlier splits made)
            p.shadows.push_back(*t);
            Tensor* sh = &p.shadows.back();
            sh->data = device_address(t, tokens_leaf, pos_leaf, host_base);
            sh->extra = nullptr;  // the CPU's, not the device's
            for (int j = 0; j < kMaxSrc; ++j) {
                const Tensor* src = t->src[j];
                if (!src) continue;
                auto it = shadow_of.find(src);
                if (it != shadow_of.end()) {
                    sh->src[j] = const_cast<Tensor*>(it->second);
                    continue;
                }
                p.shadows.push_back(*src);
                Tensor* ss = &p.shadows.back();
                for (Tensor*& q : ss->src) q = nullptr;
                ss->data = device_address(src, tokens_leaf, pos_leaf, host_base);
                ss->extra = nullptr;
                shadow_of[src] = ss;
                sh->src[j] = ss;
            }
            shadow_of[t] = sh;
            s.nodes.push_back(sh);
        }
    }
    if (output) {
        const Tensor* st = storage_of(output);
        if (has_storage(st) && !(valid[st] & 1)) p.to_host.push_back(st);
    }
    return p;
}

bool Offload::compute(const Graph& g, CpuBackend& cpu, const Tensor* tokens_leaf, const Tensor* pos_leaf,
                      const int32_t* tokens, const int32_t* pos, int32_t n_tokens, const Tensor* output,
                      uint8_t* host_base, const volatile int32_t* cancel, OpProfile* profile) {
    reserve(g.buffer_size());
    auto it = plans_.find(g.id());
    if (it != plans_.end() && (it->second.host_base != host_base || it->second.dev_base != compute_buf_)) {
        plans_.erase(it);
        it = plans_.end();
    }
    if (it == plans_.end()) {
        if (plans_.size() >= 16) plans_.clear();  // graphs evicted by the context leave stale plans
        it = plans_.emplace(g.id(), build_plan(g, tokens_leaf, pos_leaf, output, host_base)).first;
    }
    Plan& p = it->second;
    char err[512] = {0};
    auto now = [] { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); };
    auto account = [&](const std::string& key, double t0) {
        if (!profile) return;
        OpProfile::Entry& e = profile->at(key);
        ++e.count;
        e.seconds += now() - t0;
    };
    double t0 = profile ? now() : 0.0;
    if (p.reads_tokens &&
        iface_->upload(device_, inputs_, tokens, (size_t)n_tokens * sizeof(int32_t), err, sizeof(err)) != 0)
        device_failure("copying the tokens", err);
    if (p.reads_pos &&
        iface_->upload(device_, static_cast<uint8_t*>(inputs_) + (size_t)n_batch_ * sizeof(int32_t), pos,
                       (size_t)n_tokens * sizeof(int32_t), err, sizeof(err)) != 0)
        device_failure("copying the positions", err);
    for (const Split& s : p.splits) {
        if (profile) t0 = now();
        for (const Copy& c : s.copies) {
            void* dev = device_address(c.storage, tokens_leaf, pos_leaf, host_base);
            const size_t bytes = c.storage->n_bytes();
            const int rc = c.to_device ? iface_->upload(device_, dev, c.storage->data, bytes, err, sizeof(err))
                                       : iface_->download(device_, c.storage->data, dev, bytes, err, sizeof(err));
            if (rc != 0) device_failure("copying an activation", err);
        }
        if (!s.copies.empty()) account("copies", t0);
        if (!s.on_device) {
            if (!cpu.compute_range(g, s.begin, s.end, cancel)) return false;
            continue;
        }
        if (profile) t0 = now();
        const int rc = iface_->compute(state_, s.nodes.data(), (int32_t)s.nodes.size(), cancel, err, sizeof(err));
        account(be_.name + " compute", t0);
        if (rc == 1) return false;
        if (rc != 0) fail(EMBER_ERR_INTERNAL, be_.label + " failed computing the graph: " + err);
        if (cancel && *cancel) return false;
    }
    if (profile) t0 = now();
    for (const Tensor* st : p.to_host) {
        void* dev = device_address(st, tokens_leaf, pos_leaf, host_base);
        if (iface_->download(device_, st->data, dev, st->n_bytes(), err, sizeof(err)) != 0)
            device_failure("copying the logits back", err);
    }
    if (!p.to_host.empty()) account("copies", t0);
    return true;
}

}  // namespace ember
