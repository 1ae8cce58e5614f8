// Sampler chain: repetition/presence/frequency penalties over the last N tokens,
// then top-k, top-p, min-p, temperature, and a seeded draw (greedy at temperature 0).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

namespace ember {

struct SamplerParams {
    float temperature = 0.8f;
    int32_t top_k = 40;
    float top_p = 0.95f;
    float min_p = 0.05f;
    float repeat_penalty = 1.0f;
    float presence_penalty = 0.0f;
    float frequency_penalty = 0.0f;
    int32_t penalty_last_n = 64;
    uint64_t seed = 0;
};

// xoshiro256** seeded by splitmix64: the same seed gives the same stream everywhere.
class Rng {
public:
    explicit Rng(uint64_t seed) { reseed(seed); }
    void reseed(uint64_t seed);
    uint64_t next();
    double uniform() { return (double)(next() >> 11) * (1.0 / 9007199254740992.0); }  // [0, 1)

private:
    uint64_t s_[4];
};

class Sampler {
public:
    explicit Sampler(const SamplerParams& p);
    void reset();
    void accept(int32_t token);
    int32_t sample(const float* logits, int32_t n_vocab);
    // The distribution sample() would draw from, without drawing (the RNG does not move):
    // up to capacity kept candidates' ids and probabilities, in no particular order; returns
    // how many were kept (speculative decoding's accept/reject rule reads it).
    int32_t distribution(const float* logits, int32_t n_vocab, int32_t* ids, float* probs, int32_t capacity);

private:
    struct Candidate {
        int32_t id;
        float logit;
        float p;
    };
    void prepare(const float* logits, int32_t n_vocab);
    void apply_penalties();
    void softmax(float temperature = 1.0f);  // over candidates_, in any order
    void sort_head(size_t k);  // puts the first k candidates in rank order
    size_t rank_reaching(double mass, bool inclusive);
    void keep_min_p();

    SamplerParams params_;
    Rng rng_;
    std::deque<int32_t> history_;
    std::vector<Candidate> candidates_;
    // candidates_[0, sorted_) are in rank order (larger logit first, then smaller id) and
    // every later candidate ranks after all of them: each step sorts only as far as it
    // needs, so no path sorts the whole vocabulary.
    size_t sorted_ = 0;
    std::vector<int32_t> counts_;  // scratch, per vocab id
};

}  // namespace ember
