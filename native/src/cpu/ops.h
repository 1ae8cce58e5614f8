// CPU backend: executes a planned graph node by node, every node's work split
// across the thread pool's threads.
#pragma once

#include <cstdint>
#include <vector>

#include "core/arena.h"
#include "core/graph.h"
#include "core/threadpool.h"

namespace ember {

// Per-thread scratch, sized once per context (dequantized weight rows, attention scores).
struct ThreadScratch {
    AlignedBuffer buf;
};

class CpuBackend {
public:
    // max_row: the longest weight row (elements); max_ctx: KV length for attention scores.
    CpuBackend(int n_threads, int64_t max_row, int64_t max_ctx);
    int n_threads() const { return pool_.size(); }
    // Runs every node in order. cancel (may be null) is polled between nodes;
    // returns false when cancelled.
    bool compute(const Graph& graph, const volatile int32_t* cancel);

private:
    ThreadPool pool_;
    std::vector<ThreadScratch> scratch_;
};

// Single node on thread ith of nth (exposed for the unit tests).
void compute_node(const Tensor* t, int ith, int nth, float* scratch, size_t scratch_floats);

}  // namespace ember
