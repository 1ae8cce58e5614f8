#include "model/footprint.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "model/recurrent_state.h"

namespace ember {

MemoryNeed model_memory_need(const std::string& path) {
    MemoryNeed need;
    std::error_code ec;
    const auto size = std::filesystem::file_size(std::filesystem::u8path(path), ec);
    if (!ec) need.mapped = (uint64_t)size;  // an unreadable file is the loader's error to report
    return need;
}

uint64_t decode_weight_bytes(const Model& model) {
    const HParams& h = model.hparams();
    uint64_t bytes = 0;
    for (const GGUFTensorInfo& t : model.gguf().tensors()) {
        const bool experts = h.n_expert > 0 && t.n_dims == 3 && t.ne[2] == h.n_expert;
        bytes += experts ? t.n_bytes / (uint64_t)h.n_expert * (uint64_t)h.n_expert_used : t.n_bytes;
    }
    return bytes;
}

MemoryNeed model_memory_need(const Model& model) {
    MemoryNeed need;
    need.mapped = model.gguf().file_size();
    need.weights = decode_weight_bytes(model);
    return need;
}

MemoryNeed context_memory_need(const Model& model, const ContextOptions& opts) {
    const HParams& h = model.hparams();
    MemoryNeed need = model_memory_need(model);
    // as context.cpp chooses them
    const int64_t train = h.n_ctx_train;
    const int64_t n_ctx = opts.n_ctx > 0 ? opts.n_ctx : (train > 0 && train < 4096 ? train : 4096);
    const int64_t n_batch = opts.n_batch > 0 ? std::min<int64_t>(opts.n_batch, n_ctx) : 512;
    need.n_ctx = (int32_t)std::min<int64_t>(n_ctx, INT32_MAX);
    for (int32_t il = 0; il < h.n_layer; ++il) {
        if (!h.has_kv(il)) continue;  // shared KV: the source layer's cache
        const uint64_t row = (uint64_t)h.head_dim_of(il) * (uint64_t)h.n_head_kv_of(il) * 2;  // F16
        const int64_t rows = h.is_swa(il) && h.n_swa > 0 ? std::min<int64_t>(n_ctx, h.n_swa + n_batch) : n_ctx;
        need.kv_cache += 2 * row * (uint64_t)rows;
    }
    // the recurrent layers' state as context.cpp makes it: the live copy and its snapshot
    // slots (address space reserved at once; a slot's pages committed on its first use)
    if (const uint64_t one = RecurrentState::bytes_for(h)) {
        need.n_state_copies = 1 + RecurrentState::kDefaultSnapshots;
        need.state = one * (uint64_t)need.n_state_copies;
    }
    // One batch's widest intermediates (the plan reuses buffers, so a few of each live at
    // once: residual, norm, Q/K/V, attention output, FFN gate/up/down), in F32, plus one
    // row of logits.
    // (a mixture of experts' gate/up/down products are k experts wide per token, with a
    // shared expert's beside them)
    uint64_t ff = (uint64_t)h.n_expert_used * (uint64_t)h.n_ff_exp + (uint64_t)h.n_ff_shexp, qkv = 0;
    for (int32_t il = 0; il < h.n_layer; ++il) {
        ff = std::max<uint64_t>(ff, (uint64_t)h.n_ff_of(il));
        qkv = std::max<uint64_t>(qkv, (uint64_t)h.head_dim_of(il) * (uint64_t)(h.n_head_of(il) + 2 * h.n_head_kv_of(il)));
    }
    const uint64_t per_token = 4ull * (4ull * (uint64_t)h.n_embd + 3ull * ff + 2ull * qkv +
                                       2ull * (uint64_t)h.n_embd_per_layer * (uint64_t)h.n_layer);
    need.compute = per_token * (uint64_t)n_batch + 4ull * (uint64_t)h.n_vocab;
    return need;
}

}  // namespace ember
