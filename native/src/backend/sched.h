// Running a graph on a device and the CPU together. The graph stays backend-neutral:
// each node belongs to a layer (found from the weights and caches it reads: -1 the token
// embedding lookup, 0..n_layer-1 the blocks, n_layer the output head), a layer runs where
// the context placed it, and the topological order is cut into splits, each a run of
// nodes on one side. The graph's one memory plan is mirrored: the device has a compute
// buffer of the same size, and a tensor lives at the same offset on whichever side made
// it. A tensor read on the other side is copied there, to that same offset, before the
// split that reads it (the plan guarantees nothing else alive overlaps it, on either
// side), and the logits come back to the host buffer the same way.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "backend/registry.h"
#include "backend/weights.h"
#include "core/graph.h"
#include "cpu/ops.h"

namespace ember {

// "1.5 GiB", "34 MiB", "96 KiB", for messages
std::string bytes_text(uint64_t bytes);

constexpr int32_t kNoLayer = -1000;  // a leaf that says nothing about where a node runs

// Where a weight or cache leaf places the nodes that read it (kNoLayer: nowhere), from the
// layer its maker gave it (Tensor::layer): a block's weights and caches, layer N; the token
// embedding looked up by GET_ROWS: -1, read by a product (a tied head): n_layer; the
// output head: n_layer.
int32_t leaf_layer(const Tensor* leaf, const Tensor* reader, int32_t n_layer);
// Per node of the graph's order: its layer (the highest its sources give; -1 when none).
std::vector<int32_t> node_layers(const Graph& g, int32_t n_layer);

// The device side of a context: its compute state and buffers, the caches of its
// layers, references to the weights it reads, and each graph's split plan.
class Offload {
public:
    // weights: the model's device copies, shared with its other contexts
    Offload(const BackendRecord& be, int device, DeviceWeightCache& weights, std::vector<uint8_t> on_device,
            int64_t max_row, int64_t head_dim, int64_t group, int32_t n_batch);
    ~Offload();
    Offload(const Offload&) = delete;
    Offload& operator=(const Offload&) = delete;

    const BackendRecord& backend() const { return be_; }
    int device() const { return device_; }
    bool layer_on_device(int32_t il) const { return on_device_[(size_t)il] != 0; }
    // Device memory for a cache (zeroed) that this object frees.
    void* alloc_cache(size_t bytes);
    void add_cache_leaf(const Tensor* t) { caches_.insert(t); }
    // Uploads (and holds) the weights the device nodes of the graphs read, reporting the
    // fraction of their bytes on the device; progress returning false throws
    // EMBER_ERR_CANCELLED.
    void acquire_weights(const std::vector<const Graph*>& graphs, bool (*progress)(float, void*) = nullptr,
                         void* user = nullptr);
    // Grows the device compute buffer to the host one's size.
    void reserve(size_t bytes);

    // Runs g: the CPU splits on cpu, the device ones here. tokens/pos: the host inputs of
    // the n_tokens batch (tokens_leaf / pos_leaf their graph leaves); host_base: where the
    // graph is bound on the host. Returns false when cancelled; throws on failure.
    bool compute(const Graph& g, CpuBackend& cpu, const Tensor* tokens_leaf, const Tensor* pos_leaf,
                 const int32_t* tokens, const int32_t* pos, int32_t n_tokens, const Tensor* output,
                 uint8_t* host_base, const volatile int32_t* cancel, OpProfile* profile);

private:
    struct Copy {
        const Tensor* storage;
        bool to_device;
    };
    struct Split {
        bool on_device = false;
        size_t begin = 0, end = 0;            // CPU: the range of the order
        std::vector<const Tensor*> nodes;     // device: shadow nodes with device addresses
        std::vector<Copy> copies;             // before the split runs
    };
    struct Plan {
        uint8_t* host_base = nullptr;
        void* dev_base = nullptr;
        std::vector<Split> splits;
        std::vector<const Tensor*> to_host;  // after the last split
        bool reads_tokens = false, reads_pos = false;
        std::deque<Tensor> shadows;
    };
    Plan build_plan(const Graph& g, const Tensor* tokens_leaf, const Tensor* pos_leaf, const Tensor* output,
                    uint8_t* host_base);
    void* device_address(const Tensor* t, const Tensor* tokens_leaf, const Tensor* pos_leaf, uint8_t* host_base);
    void* weight_address(const Tensor* w, const std::function<bool(size_t)>& uploaded = nullptr);
    [[noreturn]] void device_failure(const char* what, const char* err) const;

    const BackendRecord& be_;
    const BackendIface* iface_;
    int device_;
    DeviceWeightCache& device_weights_;
    std::vector<uint8_t> on_device_;  // per layer 0..n_layer
    int32_t n_batch_;
    void* state_ = nullptr;
    void* compute_buf_ = nullptr;
    size_t compute_size_ = 0;
    void* inputs_ = nullptr;  // tokens, then positions: n_batch each
    std::vector<void*> caches_mem_;
    std::set<const Tensor*> caches_;
    std::map<const Tensor*, void*> weights_;  // held references
    std::map<uint64_t, Plan> plans_;          // by graph id
};

}  // namespace ember
