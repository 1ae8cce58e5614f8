#include "sample/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace ember {

void Rng::reseed(uint64_t seed) {
    uint64_t z = seed;
    for (uint64_t& s : s_) {  // splitmix64
        z += 0x9e3779b97f4a7c15ull;
        uint64_t x = z;
        x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
        x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
        s = x ^ (x >> 31);
    }
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t Rng::next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
}

Sampler::Sampler(const SamplerParams& p) : params_(p), rng_(p.seed) {}

void Sampler::reset() {
    history_.clear();
    rng_.reseed(params_.seed);
}

void Sampler::accept(int32_t token) {
    if (params_.penalty_last_n <= 0) return;
    history_.push_back(token);
    while ((int32_t)history_.size() > params_.penalty_last_n) history_.pop_front();
}

void Sampler::apply_penalties() {
    const bool any = params_.repeat_penalty != 1.0f || params_.presence_penalty != 0.0f ||
                     params_.frequency_penalty != 0.0f;
    if (!any || history_.empty()) return;
    // candidates_ is still indexed by id here
    for (int32_t t : history_)
        if (t >= 0 && t < (int32_t)counts_.size()) counts_[(size_t)t]++;
    for (int32_t t : history_) {
        if (t < 0 || t >= (int32_t)counts_.size()) continue;
        const int32_t c = counts_[(size_t)t];
        if (c == 0) continue;  // already applied for this id
        float& l = candidates_[(size_t)t].logit;
        l = l > 0.0f ? l / params_.repeat_penalty : l * params_.repeat_penalty;
        l -= (float)c * params_.frequency_penalty + params_.presence_penalty;
        counts_[(size_t)t] = 0;
    }
}

void Sampler::softmax() {
    const float max = candidates_.empty() ? 0.0f : candidates_[0].logit;
    double sum = 0.0;
    for (auto& c : candidates_) {
        c.p = std::exp(c.logit - max);
        sum += c.p;
    }
    for (auto& c : candidates_) c.p = (float)(c.p / sum);
}

int32_t Sampler::sample(const float* logits, int32_t n_vocab) {
    candidates_.resize((size_t)n_vocab);
    if (counts_.size() != (size_t)n_vocab) counts_.assign((size_t)n_vocab, 0);
    for (int32_t i = 0; i < n_vocab; ++i) candidates_[(size_t)i] = {i, logits[i], 0.0f};
    apply_penalties();

    auto by_logit = [](const Candidate& a, const Candidate& b) {
        return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
    };
    if (params_.temperature <= 0.0f) {  // greedy: first maximum wins, as argmax does
        const Candidate* best = &candidates_[0];
        for (const auto& c : candidates_)
            if (c.logit > best->logit) best = &c;
        return best->id;
    }

    size_t keep = candidates_.size();
    if (params_.top_k > 0 && (size_t)params_.top_k < keep) keep = (size_t)params_.top_k;
    std::partial_sort(candidates_.begin(), candidates_.begin() + (std::ptrdiff_t)keep, candidates_.end(), by_logit);
    candidates_.resize(keep);

    if (params_.top_p < 1.0f) {
        softmax();
        double cum = 0.0;
        size_t n = 0;
        while (n < candidates_.size()) {
            cum += candidates_[n].p;
            ++n;
            if (cum >= params_.top_p) break;
        }
        candidates_.resize(n);
    }
    if (params_.min_p > 0.0f) {
        softmax();
        const float threshold = candidates_[0].p * params_.min_p;
        size_t n = 1;
        while (n < candidates_.size() && candidates_[n].p >= threshold) ++n;
        candidates_.resize(n);
    }
    for (auto& c : candidates_) c.logit /= params_.temperature;
    softmax();

    const double u = rng_.uniform();
    double cum = 0.0;
    for (const auto& c : candidates_) {
        cum += c.p;
        if (u < cum) return c.id;
    }
    return candidates_.back().id;
}

}  // namespace ember
