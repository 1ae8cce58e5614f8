// CPU backend: executes a planned graph node by node, every node's work split
// across the thread pool's threads.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/arena.h"
#include "core/graph.h"
#include "core/threadpool.h"
#include "cpu/kernels.h"

namespace ember {

// Per-thread scratch, sized once per context (attention scores and accumulators).
struct ThreadScratch {
    AlignedBuffer buf;
};

struct Range {
    int64_t begin, end;
};

// Even split of n items over nth threads.
inline Range split(int64_t n, int ith, int nth) {
    const int64_t per = (n + nth - 1) / nth;
    int64_t b = per * ith;
    int64_t e = b + per;
    if (b > n) b = n;
    if (e > n) e = n;
    return {b, e};
}

// What a node's computation sees on one thread.
struct ComputeParams {
    int ith = 0, nth = 1;
    float* scratch = nullptr;       // this thread's scratch
    size_t scratch_floats = 0;
    uint8_t* work = nullptr;        // shared by all threads: converted activations
    Isa isa = Isa::SCALAR;
    ThreadPool* pool = nullptr;     // for barriers inside a node (null: single thread)
    // The activation tensor and format currently in `work`, so Q/K/V (and gate/up)
    // products of the same input convert it once.
    const Tensor* converted = nullptr;
    DType converted_type = DType::F32;
    std::atomic<int64_t>* next_chunk = nullptr;  // this node's shared row-chunk counters, one per thread
};

// Where a graph's time goes, per kind of node (op name; matrix products by weight name
// with the block number dropped, "mul_mat ffn_down"), measured on thread 0: its own
// compute, and separately its waits at barriers (the other threads' lag plus the
// barrier's cost).
struct OpProfile {
    struct Entry {
        int64_t count = 0;
        double seconds = 0.0;
    };
    std::vector<std::pair<std::string, Entry>> entries;  // first-seen order
    Entry& at(const std::string& key);
};

class CpuBackend {
public:
    // max_row: the longest activation row (elements), for per-thread scratch.
    CpuBackend(int n_threads, int64_t max_row, Isa isa);
    int n_threads() const { return pool_.size(); }
    Isa isa() const { return isa_; }
    // Runs every node in order. cancel (may be null) is polled between nodes;
    // returns false when cancelled.
    bool compute(const Graph& graph, const volatile int32_t* cancel);
    // The same for the nodes [begin, end) of the graph's order (the CPU's share of a graph
    // that also runs on a device).
    bool compute_range(const Graph& graph, size_t begin, size_t end, const volatile int32_t* cancel);
    OpProfile* profile_if_on() { return profiling_ ? &profile_ : nullptr; }
    // Profiling (off by default): on resets the counts.
    void set_profiling(bool on);
    const OpProfile& profile() const { return profile_; }
    // The rate at which this backend's threads read the byte ranges from memory: passes
    // over all of them (each thread a contiguous share of their concatenation), repeated
    // for about `seconds` (two passes at least); bytes per second of the fastest pass.
    // The decode bound `ember bench` reports: the very bytes a decode reads, by the same
    // threads, right beside the timed runs (a probe buffer of its own, measured minutes
    // away, read a third faster or slower on a shared machine).
    double read_rate(const std::vector<std::pair<const uint8_t*, size_t>>& ranges, double seconds);

private:
    ThreadPool pool_;
    Isa isa_;
    std::vector<ThreadScratch> scratch_;
    AlignedBuffer work_;
    std::vector<std::atomic<int64_t>> chunks_;  // per node, for dynamic row splits
    // barrier_plan of the graph last computed (the token loop reuses one graph, so the
    // plan is made once per shape, not per token)
    uint64_t plan_graph_ = 0;
    std::vector<uint8_t> plan_;
    bool profiling_ = false;
    OpProfile profile_;
};

// Bytes of the work buffer a graph needs at an ISA level: converted activations,
// shared by the threads, or for one-row products a slot per thread.
size_t work_size(const Graph& graph, Isa isa, int n_threads);
// Per node: whether the threads must meet at a barrier before it (1) because it reads
// what a node since the last barrier wrote, or overwrites what one read or wrote
// (the memory plan reuses buffers), or needs the shared work buffer another product
// still reads. The first node never needs one.
std::vector<uint8_t> barrier_plan(const Graph& graph, Isa isa);
// One node on one thread.
void compute_node(const Tensor* t, ComputeParams& p);
// Bytes of the shared work buffer one node needs (0: none); work_size is the largest.
size_t node_work_size(const Tensor* t, Isa isa, int n_threads);

// The mixture-of-experts ops (cpu/moe.cpp).
void op_moe_route(const Tensor* t, int ith, int nth);
void op_moe_weights(const Tensor* t, int ith, int nth);
void op_mul_mat_id(const Tensor* t, ComputeParams& p);
void op_moe_sum(const Tensor* t, int ith, int nth);
size_t mul_mat_id_work_size(const Tensor* t, Isa isa, int n_threads);
// The recurrent-layer ops (cpu/recurrent.cpp).
void op_ssm_conv(const Tensor* t, int ith, int nth);
void op_gdn_gates(const Tensor* t, int ith, int nth);
void op_delta_net(const Tensor* t, ComputeParams& p);
// The encoder ops (cpu/encoder_ops.cpp).
void op_layer_norm(const Tensor* t, int ith, int nth);
void op_gelu(const Tensor* t, int ith, int nth);
void op_attention_bidir(const Tensor* t, ComputeParams& p);
// Whether a MUL_MAT node converts its activations into the work buffer, given what the
// previous product left there (updated in converted / converted_type): op_mul_mat's
// decision, which the barrier plan mirrors.
bool mul_mat_converts(const Tensor* t, Isa isa, const Tensor*& converted, DType& converted_type);

// The read-rate probe's loops (CpuBackend::read_rate): read_bytes reads n bytes at p once,
// as `streams` (1-4) runs of n / streams bytes side by side, each front to back, with or
// without a software prefetch 2 KiB ahead, and returns a value made from all of them, so
// that no load is dropped. The probe's rate is its fastest pass, the passes taking the
// patterns in turn: which pattern reads fastest depends on the CPU. On a Sapphire
// Rapids-class Xeon one stream with the prefetch kept up with every decode kernel; on Zen
// 3 (EPYC) the decode kernels' three streams read 1.2-1.35x faster than that at one thread
// (bench_decode_stream), and three or four streams with no software prefetch as fast as
// they did, so a one-stream probe was no bound there.
struct ReadPattern {
    int streams;
    bool prefetch;
};
constexpr ReadPattern kReadPattern[] = {{1, true}, {3, false}, {4, false}};
constexpr int kReadPatterns = (int)(sizeof kReadPattern / sizeof kReadPattern[0]);
uint64_t read_bytes(const uint8_t* p, size_t n, ReadPattern how = kReadPattern[0]);

// Floats of per-thread scratch the attention op needs (a group of query heads per key head).
size_t attention_scratch_floats(int64_t head_dim, int64_t group);

}  // namespace ember
