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

MemoryNeed model_memory_need(const std::string& path);  // the file's size as weights
MemoryNeed context_memory_need(const Model& model, const ContextOptions& opts);

}  // namespace ember
