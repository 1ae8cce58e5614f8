// Sampler cost per token, one thread: microseconds for one Sampler::sample call over
// LLM-shaped logits (a few strong candidates over a Gaussian floor) at the vocabulary
// sizes of SmolLM2 (49152), Llama 3 (128256) and Gemma 3 (262144), for the parameter
// sets clients send. Built with the native tests:
//     build/bench_sampler [REPS]
// The mean over REPS calls is printed, cycling through several logit vectors so one
// vector's cache state does not flatter the figures.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "sample/sampler.h"

using namespace ember;

namespace {

struct Case {
    const char* name;
    SamplerParams params;
};

SamplerParams make(float temperature, int32_t top_k, float top_p, float min_p) {
    SamplerParams p;
    p.temperature = temperature;
    p.top_k = top_k;
    p.top_p = top_p;
    p.min_p = min_p;
    p.penalty_last_n = 0;
    p.seed = 1;
    return p;
}

std::vector<std::vector<float>> make_logits(int32_t n_vocab, int count) {
    std::mt19937 rng(7);
    std::normal_distribution<float> floor(0.0f, 2.0f);
    std::uniform_int_distribution<int32_t> pick(0, n_vocab - 1);
    std::vector<std::vector<float>> out((size_t)count, std::vector<float>((size_t)n_vocab));
    for (auto& v : out) {
        for (float& l : v) l = floor(rng);
        for (int i = 0; i < 16; ++i) v[(size_t)pick(rng)] = 10.0f + (float)i * 0.5f;
    }
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    const int reps = argc > 1 ? std::atoi(argv[1]) : 40;
    const Case cases[] = {
        {"greedy", make(0.0f, 0, 1.0f, 0.0f)},
        {"full vocab T=1", make(1.0f, 0, 1.0f, 0.0f)},
        {"full vocab T=0.7", make(0.7f, 0, 1.0f, 0.0f)},
        {"top_k=40", make(0.8f, 40, 1.0f, 0.0f)},
        {"top_p=0.95", make(0.8f, 0, 0.95f, 0.0f)},
        {"min_p=0.05", make(0.8f, 0, 1.0f, 0.05f)},
        {"k40 p0.95 minp0.05", make(0.8f, 40, 0.95f, 0.05f)},
    };
    std::printf("%-20s %12s %12s %12s   (us/token, mean of %d)\n", "params", "49152", "128256", "262144", reps);
    const int32_t vocabs[] = {49152, 128256, 262144};
    std::vector<std::vector<float>> logits[3];
    for (int v = 0; v < 3; ++v) logits[v] = make_logits(vocabs[v], 8);
    for (const Case& c : cases) {
        std::printf("%-20s", c.name);
        for (int v = 0; v < 3; ++v) {
            Sampler s(c.params);
            volatile int32_t sink = 0;
            sink = s.sample(logits[v][0].data(), vocabs[v]);  // warm the scratch buffers
            const auto t0 = std::chrono::steady_clock::now();
            for (int r = 0; r < reps; ++r) sink = s.sample(logits[v][(size_t)r % 8].data(), vocabs[v]);
            const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
            (void)sink;
            std::printf(" %12.1f", us / reps);
        }
        std::printf("\n");
    }
    return 0;
}
