// The compute graph: ops record their sources as they are built (lazily, nothing
// runs), then finalize() puts the nodes in topological order and plans one buffer
// for all intermediates, reusing memory of tensors that are no longer needed.
// A graph is built once per batch shape and then executed any number of times.
#pragma once

#include <cstddef>
#include <deque>
#include <vector>

#include "core/tensor.h"

namespace ember {

class Graph {
public:
    // ---- building -------------------------------------------------------------
    // A leaf whose data its owner provides (weights, inputs, caches).
    Tensor* leaf(DType type, int64_t ne0, int64_t ne1 = 1, int64_t ne2 = 1, int64_t ne3 = 1,
                 void* data = nullptr, const char* name = nullptr);
    // Shares a's data: new shape and strides, byte offset into a.
    Tensor* view(Tensor* a, const int64_t ne[4], const size_t nb[4], size_t offset);
    Tensor* reshape(Tensor* a, int64_t ne0, int64_t ne1, int64_t ne2 = 1, int64_t ne3 = 1);
    // The i-th column (row of dim 1) of a 2-D tensor, as a 1-row view.
    Tensor* column(Tensor* a, int64_t i);
    // Swaps dimensions 0 and 1 by swapping ne/nb: no data moves.
    Tensor* transpose(Tensor* a);

    Tensor* get_rows(Tensor* table, Tensor* ids);
    Tensor* rms_norm_mul(Tensor* x, Tensor* weight, float eps);
    Tensor* mul_mat(Tensor* w, Tensor* x);
    Tensor* add(Tensor* a, Tensor* b);
    Tensor* swiglu(Tensor* gate, Tensor* up);
    Tensor* rope(Tensor* x, Tensor* pos, int n_rot, RopeMode mode, float freq_base, float freq_scale);
    Tensor* kv_store(Tensor* k, Tensor* v, Tensor* k_cache, Tensor* v_cache, Tensor* pos);
    // q: [head_dim, n_head, N]; caches [head_dim, n_head_kv, n_ctx] F16; `after` orders it
    // after the KV_STORE of the same batch.
    Tensor* attention(Tensor* q, Tensor* k_cache, Tensor* v_cache, Tensor* pos, Tensor* after,
                      float scale);

    // ---- planning -------------------------------------------------------------
    // Orders the nodes reachable from outputs and plans the intermediate buffer.
    void finalize(const std::vector<Tensor*>& outputs);
    size_t buffer_size() const { return buffer_size_; }
    // Points every planned tensor (and view) into base, which has buffer_size() bytes.
    void bind(uint8_t* base);
    const std::vector<Tensor*>& nodes() const { return order_; }
    size_t node_count() const { return order_.size(); }
    // Unique per finalize() in this process (never 0): lets a backend cache what it
    // derives from a graph, such as its barrier plan, without hashing the nodes.
    uint64_t id() const { return id_; }

private:
    Tensor* new_tensor(DType type, const int64_t ne[4]);
    Tensor* new_op(Op op, DType type, const int64_t ne[4], std::initializer_list<Tensor*> srcs);

    std::deque<Tensor> tensors_;       // stable addresses
    std::vector<Tensor*> order_;       // topological order, ops only (no leaves)
    std::vector<Tensor*> planned_;     // tensors with a planned offset
    std::vector<size_t> offsets_;
    size_t buffer_size_ = 0;
    uint64_t id_ = 0;
};

}  // namespace ember
