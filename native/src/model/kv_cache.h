// The attention layers' memory: per layer, F16 keys and values [head_dim, n_head_kv, rows],
// position p in row p % rows. Full layers have rows = n_ctx; sliding-window layers only the
// window plus a batch (a batch's first query still sees its window after the whole batch
// is stored), as llama.cpp's iSWA cache, which limits how far back a decode may restart.
// Layers past HParams::n_layer_kv (Gemma 4's shared KV) have no cache of their own: their
// tensors have no rows and no memory, and their attention reads HParams::kv_layer(il)'s.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/arena.h"
#include "core/tensor.h"
#include "model/memory.h"
#include "model/model.h"

namespace ember {

class KVCache : public LayerMemory {
public:
    // The shapes only (the graphs refer to them); memory comes with allocate_host, or from
    // a device for the layers placed there.
    KVCache(const HParams& h, int32_t n_ctx, int32_t n_batch);

    std::vector<Tensor> k, v;  // per layer: the graphs' cache leaves

    int32_t rows(int32_t il) const;
    size_t layer_bytes(int32_t il) const;  // of one of k, v (aligned); 0 for a shared-KV layer
    size_t total_bytes() const;            // of every layer's k and v
    // Host memory, zeroed, for the layers where on_host(il); their caches head-major.
    void allocate_host(const std::function<bool(int32_t)>& on_host);

    void storing(int32_t pos0, int32_t n) override;
    int32_t rewind_limit() const override;

private:
    const HParams& hp_;
    int32_t n_ctx_;
    int32_t swa_rows_ = 0;      // rows of the sliding-window layers' caches (0: none)
    int32_t max_written_ = -1;  // the highest position stored since decoding last began at 0
    AlignedBuffer storage_;
};

}  // namespace ember
