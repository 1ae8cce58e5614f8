// What a model and a context will need in memory, computed before anything is mapped or
// allocated, for the check in core/memory.h. The KV cache figure follows context.cpp's
// layout (F16 K and V, n_ctx rows per full layer, window plus a batch per sliding-window
// layer); the compute buffer is an estimate from the widest activations of one batch.
#pragma once

#include <string>

#include "core/memory.h"
#include "model/context.h"
#include "model/model.h"

namespace ember {

// Before the file is opened: its size as the mapping (address space only).
MemoryNeed model_memory_need(const std::string& path);
// Once the header is read: the mapping and what a decode reads of it (decode_weight_bytes).
MemoryNeed model_memory_need(const Model& model);
MemoryNeed context_memory_need(const Model& model, const ContextOptions& opts);
// The weight bytes one decode reads: every tensor, except that of each expert tensor
// ([in, out, n_expert]) only n_expert_used of its n_expert experts.
uint64_t decode_weight_bytes(const Model& model);

}  // namespace ember
