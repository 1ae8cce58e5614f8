#include "model/encoder.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "core/error.h"
#include "core/threadpool.h"
#include "model/arch.h"
#include "model/build.h"

namespace ember {

namespace {

const HParams& encoder_hparams(const Model& model) {
    const HParams& h = model.hparams();
    if (!model.has_weights()) fail(EMBER_ERR_INVALID_ARGUMENT, "the model was loaded without weights");
    if (h.causal)
        fail(EMBER_ERR_UNSUPPORTED, "'" + h.arch +
                                        "' is a text-generation model; Ember makes embeddings with encoder models "
                                        "(bert: all-MiniLM, bge, e5)");
    return h;
}

int64_t encoder_max_row(const HParams& h) {
    return std::max<int64_t>({h.n_embd, h.n_ff, (int64_t)h.head_dim * h.n_head});
}

}  // namespace

Encoder::Encoder(const Model& model, const EncoderOptions& opts)
    : model_(model),
      n_seq_max_((int32_t)encoder_hparams(model).n_ctx_train),
      n_batch_(0),
      pooling_(opts.pooling >= 0 ? (Pooling)opts.pooling : model.hparams().pooling),
      no_cache_(model.hparams(), 1, 1),
      backend_(opts.n_threads > 0 ? opts.n_threads : ThreadPool::default_thread_count(),
               encoder_max_row(model.hparams()), opts.isa >= 0 ? (Isa)opts.isa : active_isa()) {
    const HParams& h = model.hparams();
    if (opts.pooling > (int32_t)Pooling::LAST)
        fail(EMBER_ERR_INVALID_ARGUMENT, "pooling " + std::to_string(opts.pooling) + " is not one of -1 (the file's), "
                                             "1 mean, 2 CLS, 3 last");
    if (pooling_ == Pooling::NONE)
        fail(EMBER_ERR_UNSUPPORTED, "the file says pooling_type none (per-token states, no sentence vector); "
                                    "choose a pooling (mean, CLS or last)");
    // a sequence is as long as the position table (and the trained context) allows
    n_seq_max_ = (int32_t)std::min<int64_t>(model.position_embd ? model.position_embd->ne[1] : h.n_ctx_train,
                                            h.n_ctx_train > 0 ? h.n_ctx_train : INT32_MAX);
    if (opts.n_batch < 0) fail(EMBER_ERR_INVALID_ARGUMENT, "n_batch must not be negative");
    n_batch_ = std::max(opts.n_batch > 0 ? opts.n_batch : 1024, n_seq_max_);
    in_tokens_.resize((size_t)n_batch_);
    in_pos_.resize((size_t)n_batch_);
    std::vector<Tensor*> cpu;  // the four-row copies of the matrices (model.h)
    for (const LayerWeights& L : model.layers)
        for (Tensor* t : {L.wq, L.wk, L.wv, L.wo, L.ffn_up, L.ffn_down})
            if (t) cpu.push_back(t);
    model.open_context(backend_.isa(), cpu);
}

Encoder::~Encoder() { model_.close_context(); }

BatchGraph& Encoder::graph_for(int32_t n_tokens) {
    auto it = graphs_.find(n_tokens);
    if (it == graphs_.end()) {
        // batches of many lengths come and go (a text's length decides its graph): a few
        // graphs are kept, the oldest shape dropped first
        if (graphs_.size() >= 8) graphs_.erase(graphs_.begin());
        auto bg = std::make_unique<BatchGraph>();
        GraphBuilder builder(model_, no_cache_, nullptr, *bg, n_tokens, Outputs::ALL, n_seq_max_, in_tokens_.data(),
                             in_pos_.data());
        model_.arch().build_graph(builder);
        if (!bg->embd) fail(EMBER_ERR_INTERNAL, "the encoder graph has no output");
        it = graphs_.emplace(n_tokens, std::move(bg)).first;
    }
    BatchGraph& bg = *it->second;
    compute_buffer_.resize(bg.graph.buffer_size());  // grows only
    bg.graph.bind(compute_buffer_.data());
    return bg;
}

void Encoder::embed(const int32_t* tokens, const int32_t* seq_lens, int32_t n_seqs, bool normalize, float* out) {
    const int32_t n_vocab = model_.hparams().n_vocab;
    if (n_seqs <= 0) fail(EMBER_ERR_INVALID_ARGUMENT, "embed needs at least one sequence");
    if (!tokens || !seq_lens || !out) fail(EMBER_ERR_INVALID_ARGUMENT, "tokens, seq_lens and out must not be NULL");
    // every sequence checked before anything runs
    int64_t total = 0;
    for (int32_t s = 0; s < n_seqs; ++s) {
        const int32_t n = seq_lens[s];
        if (n <= 0) fail(EMBER_ERR_INVALID_ARGUMENT, "sequence " + std::to_string(s) + " is empty");
        if (n > n_seq_max_)
            fail(EMBER_ERR_CONTEXT_FULL, "sequence " + std::to_string(s) + " has " + std::to_string(n) +
                                             " tokens; the model reads at most " + std::to_string(n_seq_max_));
        for (int32_t i = 0; i < n; ++i) {
            const int32_t id = tokens[total + i];
            if (id < 0 || id >= n_vocab)
                fail(EMBER_ERR_INVALID_ARGUMENT, "token id " + std::to_string(id) + " in sequence " +
                                                     std::to_string(s) + " is outside the vocabulary (0.." +
                                                     std::to_string(n_vocab - 1) + ")");
        }
        total += n;
    }
    // consecutive sequences, packed while they fit
    int64_t offset = 0;
    for (int32_t s = 0; s < n_seqs;) {
        int32_t count = 0;
        int64_t n_tok = 0;
        while (s + count < n_seqs && n_tok + seq_lens[s + count] <= n_batch_) n_tok += seq_lens[s + count++];
        run_batch(tokens + offset, seq_lens + s, count, normalize, out + (size_t)s * (size_t)n_embd());
        offset += n_tok;
        s += count;
    }
}

void Encoder::run_batch(const int32_t* tokens, const int32_t* seq_lens, int32_t n_seqs, bool normalize, float* out) {
    int32_t n_tok = 0;
    for (int32_t s = 0; s < n_seqs; ++s)
        for (int32_t i = 0; i < seq_lens[s]; ++i, ++n_tok) {
            in_tokens_[(size_t)n_tok] = tokens[n_tok];
            in_pos_[(size_t)n_tok] = i;  // each sequence from position 0: attention_bidir's boundaries
        }
    BatchGraph& bg = graph_for(n_tok);
    if (!backend_.compute(bg.graph, cancel_)) fail(EMBER_ERR_CANCELLED, "embedding cancelled");
    const int64_t n_embd = this->n_embd();
    int32_t first = 0;
    std::vector<double> acc((size_t)n_embd);
    for (int32_t s = 0; s < n_seqs; ++s) {
        const int32_t n = seq_lens[s];
        float* v = out + (size_t)s * (size_t)n_embd;
        if (pooling_ == Pooling::MEAN) {
            std::fill(acc.begin(), acc.end(), 0.0);
            for (int32_t i = 0; i < n; ++i) {
                const float* row = bg.embd->row<const float>(first + i);
                for (int64_t d = 0; d < n_embd; ++d) acc[(size_t)d] += row[d];
            }
            for (int64_t d = 0; d < n_embd; ++d) v[d] = (float)(acc[(size_t)d] / n);
        } else {
            const int32_t pick = pooling_ == Pooling::CLS ? first : first + n - 1;
            std::memcpy(v, bg.embd->row<const float>(pick), (size_t)n_embd * sizeof(float));
        }
        if (normalize) {
            double sum = 0.0;
            for (int64_t d = 0; d < n_embd; ++d) sum += (double)v[d] * v[d];
            // as sentence-transformers' Normalize (torch's F.normalize): x / max(|x|, 1e-12)
            const float inv = (float)(1.0 / std::max(std::sqrt(sum), 1e-12));
            for (int64_t d = 0; d < n_embd; ++d) v[d] *= inv;
        }
        first += n;
    }
}

}  // namespace ember
