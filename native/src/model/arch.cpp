#include "model/arch.h"

#include "model/build.h"

namespace ember {

namespace {

const ArchSpec kArchs[] = {
    // name     what users know it as                                 rope mode
    //          hyper-parameters     model-wide weights  block weights      graph
    {"llama", "Llama 1-3.x, TinyLlama, SmolLM, Mistral (as converted)", RopeMode::NORMAL,
     nullptr,             llama_bind_model,   llama_bind_layer,  llama_build_graph},
    {"qwen2", "Qwen2, Qwen2.5", RopeMode::NEOX,
     nullptr,             nullptr,            llama_bind_layer,  llama_build_graph},
    {"qwen3", "Qwen3 (dense)", RopeMode::NEOX,
     nullptr,             nullptr,            qwen3_bind_layer,  llama_build_graph},
    {"qwen3moe", "Qwen3-MoE (30B-A3B, Coder-30B-A3B, 235B-A22B)", RopeMode::NEOX,
     qwen3moe_read_hparams, nullptr,          qwen3moe_bind_layer, llama_build_graph},
    {"mistral3", "Ministral 3, Mistral Small 3.x (text, as converted in 2026)", RopeMode::NORMAL,
     mistral3_read_hparams, llama_bind_model, llama_bind_layer,  llama_build_graph},
    {"smollm3", "SmolLM3", RopeMode::NORMAL,
     smollm3_read_hparams, llama_bind_model,  llama_bind_layer,  llama_build_graph},
    {"gpt-oss", "gpt-oss (20b, 120b)", RopeMode::NEOX,
     gpt_oss_read_hparams, nullptr,           gpt_oss_bind_layer, llama_build_graph},
    {"gemma2", "Gemma 2", RopeMode::NEOX,
     gemma2_read_hparams, gemma2_bind_model,  gemma2_bind_layer, gemma3_build_graph},
    {"gemma3", "Gemma 3 (text)", RopeMode::NEOX,
     gemma3_read_hparams, nullptr,            gemma3_bind_layer, gemma3_build_graph},
    {"gemma4", "Gemma 4 (E2B, E4B, 31B, 26B-A4B; text)", RopeMode::NEOX,
     gemma4_read_hparams, gemma4_bind_model,  gemma4_bind_layer, gemma4_build_graph},
    {"qwen35", "Qwen3.5, Qwen3.6 (dense: 0.8B-27B; text)", RopeMode::NEOX,
     qwen35_read_hparams, nullptr,            qwen35_bind_layer, qwen35_build_graph},
    {"qwen35moe", "Qwen3.5-MoE, Qwen3.6-MoE (35B-A3B, 122B-A10B, 397B-A17B; text)", RopeMode::NEOX,
     qwen35_read_hparams, nullptr,            qwen35_bind_layer, qwen35_build_graph},
    {"lfm2", "LFM2, LFM2.5 (350M-2.6B; text)", RopeMode::NEOX,
     lfm2_read_hparams,   lfm2_bind_model,    lfm2_bind_layer,   lfm2_build_graph},
    {"lfm2moe", "LFM2-MoE (8B-A1B, 24B-A2B; text)", RopeMode::NEOX,
     lfm2_read_hparams,   lfm2_bind_model,    lfm2_bind_layer,   lfm2_build_graph},
    {"phi3", "Phi-3, Phi-3.5, Phi-4 (dense)", RopeMode::NEOX,
     phi3_read_hparams,   phi3_bind_model,    phi3_bind_layer,   llama_build_graph},
    {"bert", "BERT sentence encoders: all-MiniLM, bge, e5 (embeddings only)", RopeMode::NORMAL,
     bert_read_hparams,   bert_bind_model,    bert_bind_layer,   bert_build_graph},
};

}  // namespace

const ArchSpec* find_arch(std::string_view name) {
    for (const ArchSpec& a : kArchs)
        if (name == a.name) return &a;
    return nullptr;
}

std::string supported_arch_list() {
    std::string s;
    for (const ArchSpec& a : kArchs) s += (s.empty() ? "" : ", ") + std::string(a.name);
    return s;
}

const ArchSpec* arch_table(size_t* count) {
    *count = sizeof(kArchs) / sizeof(kArchs[0]);
    return kArchs;
}

}  // namespace ember
