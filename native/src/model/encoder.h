// An embedding context: runs an encoder model (the bert family) over batches of whole
// sequences and pools each sequence's last hidden states into one vector (mean, first
// token, last token), L2-normalised on request. No KV cache: each batch is evaluated from
// nothing, every token seeing every other token of its sequence.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "core/arena.h"
#include "cpu/ops.h"
#include "model/context.h"
#include "model/kv_cache.h"
#include "model/model.h"

namespace ember {

struct EncoderOptions {
    int32_t n_threads = 0;
    int32_t isa = -1;          // Isa value, or -1: active_isa()
    int32_t n_batch = 0;       // tokens per graph evaluation (whole sequences); 0: 1024
    int32_t pooling = -1;      // Pooling value, or -1: the file's
};

class Encoder {
public:
    // Throws EMBER_ERR_UNSUPPORTED for a model that makes no vectors (a causal LM).
    Encoder(const Model& model, const EncoderOptions& opts);
    ~Encoder();
    Encoder(const Encoder&) = delete;
    Encoder& operator=(const Encoder&) = delete;

    int32_t n_embd() const { return model_.hparams().n_embd; }
    // The longest sequence the model reads: its position table's rows.
    int32_t n_seq_max() const { return n_seq_max_; }
    int32_t n_batch() const { return n_batch_; }
    Pooling pooling() const { return pooling_; }
    int n_threads() const { return backend_.n_threads(); }
    void set_cancel_flag(const volatile int32_t* flag) { cancel_ = flag; }

    // tokens: the n_seqs sequences one after another, seq_lens[i] tokens each (1..n_seq_max);
    // out: n_seqs * n_embd floats, sequence i's vector at i * n_embd. Consecutive sequences
    // share a graph evaluation as long as they fit in n_batch tokens.
    void embed(const int32_t* tokens, const int32_t* seq_lens, int32_t n_seqs, bool normalize, float* out);

private:
    BatchGraph& graph_for(int32_t n_tokens);
    void run_batch(const int32_t* tokens, const int32_t* seq_lens, int32_t n_seqs, bool normalize, float* out);

    const Model& model_;
    int32_t n_seq_max_;
    int32_t n_batch_;
    Pooling pooling_;
    const volatile int32_t* cancel_ = nullptr;
    KVCache no_cache_;  // GraphBuilder's signature wants one; an encoder's graph never reads it
    CpuBackend backend_;
    std::map<int32_t, std::unique_ptr<BatchGraph>> graphs_;
    AlignedBuffer compute_buffer_;
    std::vector<int32_t> in_tokens_, in_pos_;
};

}  // namespace ember
