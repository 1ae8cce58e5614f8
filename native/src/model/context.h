// An inference context: the KV cache (allocated once for n_ctx), graphs cached per
// batch shape with their intermediate buffer, the CPU backend, the layers offloaded to a
// device (backend/sched.h) with their caches there, and the logits.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/arena.h"
#include "backend/sched.h"
#include "core/graph.h"
#include "cpu/ops.h"
#include "model/kv_cache.h"
#include "model/recurrent_state.h"
#include "model/model.h"

namespace ember {

struct ContextOptions {
    int32_t n_ctx = 0;
    int32_t n_batch = 512;
    int32_t n_threads = 0;
    int32_t isa = -1;  // Isa value, or -1: active_isa()
    // "auto" (the best usable device), "cpu", or a backend name with an optional device
    // ("cuda", "cuda:1"); and how many layers go there (-1: as many as fit, counting the
    // output head as one, as llama.cpp does).
    std::string backend = "auto";
    int32_t n_gpu_layers = -1;
    // the weights' upload to the device: fraction done; false cancels (EMBER_ERR_CANCELLED)
    bool (*progress)(float, void*) = nullptr;
    void* progress_user_data = nullptr;
};

// Where a context runs, for users: "CUDA: NVIDIA H200, 31/31 layers" or "CPU (AVX2)",
// and a note on why not (all) on the device ("" when there is nothing to say).
struct PlacementInfo {
    std::string summary;
    std::string note;
    std::string backend = "cpu";
    int32_t device = -1;
    int32_t n_offloaded = 0;    // layers on the device, the output head counted as one
    int32_t n_layers = 0;       // n_layer + 1
    uint64_t device_bytes = 0;  // weights, caches and buffers the context placed there
};

enum class Outputs { NONE, LAST, ALL };

// A graph for one batch shape, with the leaves the context fills before each run.
struct BatchGraph {
    Graph graph;
    Tensor* tokens = nullptr;  // I32 [n_tokens]
    Tensor* pos = nullptr;     // I32 [n_tokens]
    Tensor* logits = nullptr;  // F32 [n_vocab, n_outputs] or null
    Tensor* embd = nullptr;    // an encoder's last hidden states F32 [n_embd, n_tokens] (model/encoder.h)
};

class Context {
public:
    Context(const Model& model, const ContextOptions& opts);

    int32_t n_ctx() const { return n_ctx_; }
    int32_t n_past() const { return n_past_; }
    int32_t rewind_limit() const;
    // The latest position at or before pos (clamped to 0..n_past) from which a decode may
    // start and keep what precedes it: any from rewind_limit() on for attention caches, a
    // snapshot's or the live position for recurrent layers, 0 always (model/memory.h).
    int32_t restart_point(int32_t pos) const;
    const RecurrentState* recurrent_state() const { return rs_.get(); }
    void set_cancel_flag(const volatile int32_t* flag) { cancel_ = flag; }

    // Throws ember::Error; on failure n_past() tells how much of the cache is valid.
    void decode(const int32_t* tokens, int32_t n_tokens, int32_t pos0, bool all_logits);
    const float* logits(int32_t i) const;  // nullptr when absent
    int32_t n_logits() const { return n_logits_; }
    void set_profiling(bool on) { backend_.set_profiling(on); }
    const OpProfile& profile() const { return backend_.profile(); }
    const PlacementInfo& placement() const { return placement_; }
    // The decode bound's bandwidth: how fast this context's CPU threads read the weights a
    // one-token decode reads (each matrix as its products read it: the four-row copy's
    // rows, the rest from the file), best pass over about `seconds`, in bytes per second;
    // *bytes gets the bytes of one pass. Unsupported (throws) when layers are offloaded.
    double weight_read_rate(double seconds, uint64_t* bytes);
    // The graph of a batch shape, built on first use and cached (decode's; also for tests
    // and traces, which read its nodes' names).
    BatchGraph& graph_for(int32_t n_tokens, Outputs outputs);
    ~Context();

private:
    std::unique_ptr<BatchGraph> build(int32_t n_tokens, Outputs outputs);
    void place(const ContextOptions& opts);
    bool try_offload(const BackendRecord& be, int device, int32_t n_wanted, const ContextOptions& opts,
                     std::string& why);

    const Model& model_;
    int32_t n_ctx_;
    int32_t n_batch_;
    int32_t n_past_ = 0;
    const volatile int32_t* cancel_ = nullptr;
    KVCache kv_;
    std::unique_ptr<RecurrentState> rs_;   // null: no recurrent layers
    std::vector<LayerMemory*> memories_;  // what the context keeps between decodes: kv_, rs_
    CpuBackend backend_;
    std::map<std::pair<int32_t, int>, std::unique_ptr<BatchGraph>> graphs_;
    AlignedBuffer compute_buffer_;
    std::vector<int32_t> in_tokens_, in_pos_;
    AlignedBuffer logits_;
    int32_t n_logits_ = 0;
    int32_t logits_first_ = 0;  // batch index of the first stored logits row
    PlacementInfo placement_;
    std::unique_ptr<Offload> offload_;  // null: everything on the CPU
};

}  // namespace ember
