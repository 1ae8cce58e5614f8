#include "model/kv_cache.h"

#include <algorithm>
#include <string>

namespace ember {

KVCache::KVCache(const HParams& h, int32_t n_ctx, int32_t n_batch) : hp_(h), n_ctx_(n_ctx) {
    if (h.n_swa > 0 && (int64_t)h.n_swa + n_batch < n_ctx) swa_rows_ = h.n_swa + n_batch;
    k.resize((size_t)h.n_layer);
    v.resize((size_t)h.n_layer);
    for (int32_t il = 0; il < h.n_layer; ++il) {
        for (int kv = 0; kv < 2; ++kv) {
            Tensor* t = kv == 0 ? &k[(size_t)il] : &v[(size_t)il];
            t->type = DType::F16;
            t->ne[0] = h.head_dim_of(il);
            t->ne[1] = h.n_head_kv_of(il);
            t->ne[2] = h.has_kv(il) ? rows(il) : 0;  // a shared-KV layer reads h.kv_layer(il)'s
            tensor_set_contiguous_strides(t);
            t->set_name(((kv == 0 ? "cache_k_l" : "cache_v_l") + std::to_string(il)).c_str());
            t->layer = il;
        }
    }
}

int32_t KVCache::rows(int32_t il) const { return hp_.is_swa(il) && swa_rows_ ? swa_rows_ : n_ctx_; }

size_t KVCache::layer_bytes(int32_t il) const {
    if (!hp_.has_kv(il)) return 0;
    return align_up((size_t)hp_.head_dim_of(il) * (size_t)hp_.n_head_kv_of(il) * 2 * (size_t)rows(il));
}

size_t KVCache::total_bytes() const {
    size_t total = 0;
    for (size_t il = 0; il < k.size(); ++il) total += 2 * layer_bytes((int32_t)il);
    return total;
}

void KVCache::allocate_host(const std::function<bool(int32_t)>& on_host_fn) {
    std::vector<uint8_t> on_host(k.size());
    size_t total = 0;
    for (size_t il = 0; il < k.size(); ++il) {
        on_host[il] = hp_.has_kv((int32_t)il) && on_host_fn((int32_t)il) ? 1 : 0;
        if (on_host[il]) total += 2 * layer_bytes((int32_t)il);
    }
    // The CPU's caches head-major: a head's keys (and values) at consecutive positions are
    // consecutive rows, so attention reads each head as one stream. Position-major (all
    // heads of a position together, as the device backends keep theirs) it read 128 of
    // every n_head_kv * 128 bytes, and at a depth of 4096 (1B) spent a third more time.
    // The shape stays [head_dim, n_head_kv, rows]; only the strides say so.
    for (size_t il = 0; il < k.size(); ++il) {
        if (!on_host[il]) continue;
        for (Tensor* t : {&k[il], &v[il]}) {
            t->nb[2] = t->nb[1];                     // position: one head_dim row on
            t->nb[1] = t->nb[2] * (size_t)t->ne[2];  // head: a whole cache of rows on
        }
    }
    storage_.resize(total);
    storage_.zero();  // commit the pages now, so memory use does not creep up while generating
    uint8_t* base = storage_.data();
    for (size_t il = 0; il < k.size(); ++il) {
        if (!on_host[il]) continue;
        for (Tensor* t : {&k[il], &v[il]}) {
            t->data = base;
            base += layer_bytes((int32_t)il);
        }
    }
}

void KVCache::storing(int32_t pos0, int32_t n) {
    if (pos0 == 0) max_written_ = -1;
    if (n > 0) max_written_ = std::max(max_written_, pos0 + n - 1);
}

int32_t KVCache::rewind_limit() const {
    // Row p % rows holds the last position written there, so positions above
    // max_written - rows are intact; a decode from pos0 needs its window before pos0.
    if (!swa_rows_) return 0;
    const int32_t oldest = max_written_ - swa_rows_ + 1;
    return oldest <= 0 ? 0 : oldest + hp_.n_swa - 1;
}

}  // namespace ember
