// The architecture table: one row per family Ember runs. A row says how the family reads
// its hyper-parameters, which weights it binds and which graph it builds; each family's
// functions live in its own file (llama.cpp, which qwen2 and qwen3 share; gemma3.cpp, which
// gemma2 shares; gemma4.cpp; qwen35.cpp; phi3.cpp; bert.cpp, an encoder), built from the shared helpers in model/build.h. Adding a family
// is its file and one row in arch.cpp.
#pragma once

#include <string>
#include <string_view>

#include "model/model.h"

namespace ember {

class GraphBuilder;

struct ArchSpec {
    const char* name;    // general.architecture
    const char* models;  // the models users know it as (docs, README)
    RopeMode rope;
    // Family keys, read after the common ones (model.cpp). May be null.
    void (*read_hparams)(const GGUFFile& g, HParams& h);
    // Binds the family's model-wide weights beyond the embeddings, final norm and head
    // (which model.cpp binds for everyone). May be null.
    void (*bind_model)(Model& m);
    // Binds block il's weights (Model::layer_weight), given the hyper-parameters.
    void (*bind_layer)(Model& m, int32_t il);
    // Builds the forward graph of one batch and finishes it.
    void (*build_graph)(GraphBuilder& b);
};

const ArchSpec* find_arch(std::string_view name);
// "llama, qwen2, ..." in table order, for messages
std::string supported_arch_list();
// Every row, for the C API (ember_architectures) and the README check.
const ArchSpec* arch_table(size_t* count);

// Shared by the families' hyper-parameter readers: which blocks use the sliding window,
// from attention.sliding_window_pattern (a per-layer flag array, or "every n-th block
// global", n from the file, else default_period).
void read_swa_pattern(const GGUFFile& g, HParams& h, int64_t default_period);

// The families' entry points (one file each).
void llama_bind_model(Model& m);
void llama_bind_layer(Model& m, int32_t il);
void llama_build_graph(GraphBuilder& b);
void qwen3_bind_layer(Model& m, int32_t il);
void qwen3moe_read_hparams(const GGUFFile& g, HParams& h);
void smollm3_read_hparams(const GGUFFile& g, HParams& h);
void mistral3_read_hparams(const GGUFFile& g, HParams& h);
void qwen3moe_bind_layer(Model& m, int32_t il);
void gemma2_read_hparams(const GGUFFile& g, HParams& h);
void gemma2_bind_model(Model& m);
void gemma2_bind_layer(Model& m, int32_t il);
void gemma3_read_hparams(const GGUFFile& g, HParams& h);
void gemma3_bind_layer(Model& m, int32_t il);
void gemma3_build_graph(GraphBuilder& b);
void gemma4_read_hparams(const GGUFFile& g, HParams& h);
void gemma4_bind_model(Model& m);
void gemma4_bind_layer(Model& m, int32_t il);
void gemma4_build_graph(GraphBuilder& b);
void gpt_oss_read_hparams(const GGUFFile& g, HParams& h);
void gpt_oss_bind_layer(Model& m, int32_t il);
void lfm2_read_hparams(const GGUFFile& g, HParams& h);
void lfm2_bind_model(Model& m);
void lfm2_bind_layer(Model& m, int32_t il);
void lfm2_build_graph(GraphBuilder& b);
void qwen35_read_hparams(const GGUFFile& g, HParams& h);
void qwen35_bind_layer(Model& m, int32_t il);
void qwen35_build_graph(GraphBuilder& b);
void phi3_read_hparams(const GGUFFile& g, HParams& h);
void phi3_bind_model(Model& m);
void phi3_bind_layer(Model& m, int32_t il);
void bert_read_hparams(const GGUFFile& g, HParams& h);
void bert_bind_model(Model& m);
void bert_bind_layer(Model& m, int32_t il);
void bert_build_graph(GraphBuilder& b);

}  // namespace ember
