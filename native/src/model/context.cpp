#include "model/context.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/error.h"
#include "core/threadpool.h"
#include "model/arch.h"
#include "model/build.h"

namespace ember {

namespace {

int32_t choose_n_ctx(const Model& model, int32_t requested) {
    if (requested > 0) return requested;
    const int32_t train = model.hparams().n_ctx_train;
    return train > 0 && train < 4096 ? train : 4096;
}

int32_t choose_threads(int32_t requested) {
    return requested > 0 ? requested : ThreadPool::default_thread_count();
}

}  // namespace

Context::Context(const Model& model, const ContextOptions& opts)
    : model_(model),
      n_ctx_(choose_n_ctx(model, opts.n_ctx)),
      n_batch_(opts.n_batch > 0 ? std::min(opts.n_batch, choose_n_ctx(model, opts.n_ctx)) : 512),
      backend_(choose_threads(opts.n_threads),
               std::max<int64_t>({model.hparams().n_embd, model.hparams().n_ff,
                                  (int64_t)model.hparams().head_dim * model.hparams().n_head,
                                  (int64_t)attention_scratch_floats(
                                      model.hparams().head_dim,
                                      model.hparams().n_head / std::max(1, (int)model.hparams().n_head_kv))}),
               opts.isa >= 0 ? (Isa)opts.isa : active_isa()) {
    if (!model.has_weights()) fail(EMBER_ERR_INVALID_ARGUMENT, "the model was loaded without weights");
    if (n_ctx_ < 1 || n_ctx_ > (1 << 20)) fail(EMBER_ERR_INVALID_ARGUMENT, "n_ctx must be in 1..1048576");
    const HParams& h = model.hparams();

    // KV cache: one allocation for every layer, F16; a full layer holds n_ctx positions, a
    // sliding-window layer its window plus a batch.
    if (h.n_swa > 0 && (int64_t)h.n_swa + n_batch_ < n_ctx_) swa_rows_ = h.n_swa + n_batch_;
    auto rows_of = [&](int32_t il) { return h.is_swa(il) && swa_rows_ ? swa_rows_ : n_ctx_; };
    const size_t per_row = (size_t)h.head_dim * (size_t)h.n_head_kv * 2;
    size_t total = 0;
    for (int32_t il = 0; il < h.n_layer; ++il) total += 2 * align_up(per_row * (size_t)rows_of(il));
    kv_.storage.resize(total);
    kv_.storage.zero();  // commit the pages now, so memory use does not creep up while generating
    kv_.k.resize((size_t)h.n_layer);
    kv_.v.resize((size_t)h.n_layer);
    uint8_t* base = kv_.storage.data();
    for (int32_t il = 0; il < h.n_layer; ++il) {
        for (Tensor* t : {&kv_.k[(size_t)il], &kv_.v[(size_t)il]}) {
            t->type = DType::F16;
            t->ne[0] = h.head_dim;
            t->ne[1] = h.n_head_kv;
            t->ne[2] = rows_of(il);
            tensor_set_contiguous_strides(t);
            t->data = base;
            base += align_up(per_row * (size_t)rows_of(il));
        }
    }
    in_tokens_.resize((size_t)n_batch_);
    in_pos_.resize((size_t)n_batch_);
}

BatchGraph& Context::graph_for(int32_t n_tokens, Outputs outputs) {
    auto key = std::make_pair(n_tokens, (int)outputs);
    auto it = graphs_.find(key);
    if (it == graphs_.end()) {
        // Prompt tails have arbitrary lengths: keep the cache small, but never drop
        // the one-token graphs the generation loop lives on.
        if (graphs_.size() >= 8) {
            for (auto g = graphs_.begin(); g != graphs_.end(); ++g)
                if (g->first.first != 1) {
                    graphs_.erase(g);
                    break;
                }
        }
        auto bg = std::make_unique<BatchGraph>();
        GraphBuilder builder(model_, kv_, *bg, n_tokens, outputs, n_ctx_, in_tokens_.data(), in_pos_.data());
        model_.arch().build_graph(builder);
        it = graphs_.emplace(key, std::move(bg)).first;
    }
    BatchGraph& bg = *it->second;
    compute_buffer_.resize(bg.graph.buffer_size());  // grows only; no-op in the token loop
    bg.graph.bind(compute_buffer_.data());
    return bg;
}

void Context::decode(const int32_t* tokens, int32_t n_tokens, int32_t pos0, bool all_logits) {
    const int32_t n_vocab = model_.hparams().n_vocab;
    if (n_tokens <= 0) fail(EMBER_ERR_INVALID_ARGUMENT, "decode needs at least one token");
    if (!tokens) fail(EMBER_ERR_INVALID_ARGUMENT, "tokens is NULL");
    if (pos0 < 0 || pos0 > n_past_)
        fail(EMBER_ERR_INVALID_ARGUMENT, "position " + std::to_string(pos0) + " is past the " +
                                             std::to_string(n_past_) + " tokens in the cache");
    if (pos0 > 0 && pos0 < rewind_limit())
        fail(EMBER_ERR_INVALID_ARGUMENT, "position " + std::to_string(pos0) +
                                             " is before the sliding-window cache's reach (" +
                                             std::to_string(rewind_limit()) + "); decode again from 0");
    if ((int64_t)pos0 + n_tokens > n_ctx_)
        fail(EMBER_ERR_CONTEXT_FULL, "context is full: " + std::to_string(pos0) + " + " +
                                         std::to_string(n_tokens) + " tokens exceed n_ctx = " +
                                         std::to_string(n_ctx_));
    for (int32_t i = 0; i < n_tokens; ++i)
        if (tokens[i] < 0 || tokens[i] >= n_vocab)
            fail(EMBER_ERR_INVALID_ARGUMENT, "token id " + std::to_string(tokens[i]) + " at index " +
                                                 std::to_string(i) + " is outside the vocabulary (0.." +
                                                 std::to_string(n_vocab - 1) + ")");

    const int32_t n_out = all_logits ? n_tokens : 1;
    logits_.resize((size_t)n_out * (size_t)n_vocab * sizeof(float));
    n_logits_ = 0;
    logits_first_ = all_logits ? 0 : n_tokens - 1;
    n_past_ = pos0;  // positions >= pos0 are overwritten from here on
    if (pos0 == 0) max_written_ = -1;

    for (int32_t done = 0; done < n_tokens;) {
        const int32_t n = std::min(n_batch_, n_tokens - done);
        const bool last_chunk = done + n == n_tokens;
        const Outputs outs = all_logits ? Outputs::ALL : last_chunk ? Outputs::LAST : Outputs::NONE;
        BatchGraph& bg = graph_for(n, outs);
        for (int32_t i = 0; i < n; ++i) {
            in_tokens_[(size_t)i] = tokens[done + i];
            in_pos_[(size_t)i] = pos0 + done + i;
        }
        // before computing: a cancelled batch may already have stored some of its rows
        max_written_ = std::max(max_written_, pos0 + done + n - 1);
        if (!backend_.compute(bg.graph, cancel_)) fail(EMBER_ERR_CANCELLED, "decoding cancelled");
        if (bg.logits) {
            const int64_t rows = bg.logits->ne[1];
            float* dst = reinterpret_cast<float*>(logits_.data()) + (size_t)n_logits_ * (size_t)n_vocab;
            for (int64_t r = 0; r < rows; ++r)
                std::memcpy(dst + r * n_vocab, bg.logits->row<float>(r), (size_t)n_vocab * sizeof(float));
            n_logits_ += (int32_t)rows;
        }
        done += n;
        n_past_ = pos0 + done;
    }
}

int32_t Context::rewind_limit() const {
    // Row p % rows holds the last position written there, so positions above
    // max_written - rows are intact; a decode from pos0 needs its window before pos0.
    if (!swa_rows_) return 0;
    const int32_t oldest = max_written_ - swa_rows_ + 1;
    return oldest <= 0 ? 0 : oldest + model_.hparams().n_swa - 1;
}

const float* Context::logits(int32_t i) const {
    const int32_t n_vocab = model_.hparams().n_vocab;
    if (n_logits_ == 0) return nullptr;
    if (i < 0) i = logits_first_ + n_logits_ + i;  // -1: the last token
    const int32_t row = i - logits_first_;
    if (row < 0 || row >= n_logits_) return nullptr;
    return reinterpret_cast<const float*>(logits_.data()) + (size_t)row * (size_t)n_vocab;
}

}  // namespace ember
