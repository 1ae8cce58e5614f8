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

namespace {

// The order every step walks: larger logit first, smaller id first among equals. It is a
// strict total order, so any partial sort agrees with the full sort on every position it
// fixes, and a draw does not depend on how much of the vocabulary was sorted.
template <typename C>
bool ranks_before(const C& a, const C& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

// Most of the mass sits in the first few ranks: sort that many first, bisect past them.
constexpr size_t kHead = 64;

}  // namespace

// The maximum is found by a scan, not taken from a sorted head: it is the same value, and
// the probabilities are the same floats whatever the order (only the double sum's rounding
// can differ from a sum in rank order, in its last bits). The logits are divided by the
// temperature here rather than in place so the rank order stays that of the raw logits:
// a division can round two neighbouring logits to one value, and the order must not change.
void Sampler::softmax(float temperature) {
    float max = candidates_.empty() ? 0.0f : candidates_[0].logit;
    for (const auto& c : candidates_) max = std::max(max, c.logit);
    const float top = max / temperature;
    double sum = 0.0;
    for (auto& c : candidates_) {
        c.p = std::exp(c.logit / temperature - top);
        sum += c.p;
    }
    for (auto& c : candidates_) c.p = (float)(c.p / sum);
}

void Sampler::sort_head(size_t k) {
    k = std::min(k, candidates_.size());
    if (k <= sorted_) return;
    const auto first = candidates_.begin() + (std::ptrdiff_t)sorted_;
    const auto kth = candidates_.begin() + (std::ptrdiff_t)k;
    // A short head (top-k, the draw's first look) is cheapest as a heap that most
    // candidates fail to enter on one comparison; a long one as a selection, then a sort.
    if (k - sorted_ <= 1024) {
        std::partial_sort(first, kth, candidates_.end(), ranks_before<Candidate>);
    } else {
        if (kth != candidates_.end()) std::nth_element(first, kth, candidates_.end(), ranks_before<Candidate>);
        std::sort(first, kth, ranks_before<Candidate>);
    }
    sorted_ = k;
}

// How many candidates, counted in rank order, it takes for their probabilities to reach
// `mass` (cum >= mass when inclusive, cum > mass otherwise); all of them when none does.
// On return candidates_[n - 1] is the candidate of rank n - 1, so a draw can read it. Past
// the sorted head the range is bisected with nth_element, halving each time, so a cut deep
// in a flat distribution costs O(n) too, not a sort of everything above it.
size_t Sampler::rank_reaching(double mass, bool inclusive) {
    auto reached = [&](double cum) { return inclusive ? cum >= mass : cum > mass; };
    sort_head(kHead);
    double cum = 0.0;
    for (size_t i = 0; i < sorted_; ++i) {
        cum += candidates_[i].p;
        if (reached(cum)) return i + 1;
    }
    size_t lo = sorted_, hi = candidates_.size();
    while (hi - lo > kHead) {
        const size_t mid = lo + (hi - lo) / 2;
        std::nth_element(candidates_.begin() + (std::ptrdiff_t)lo, candidates_.begin() + (std::ptrdiff_t)mid,
                         candidates_.begin() + (std::ptrdiff_t)hi, ranks_before<Candidate>);
        double upper = 0.0;
        for (size_t i = lo; i < mid; ++i) upper += candidates_[i].p;
        if (reached(cum + upper)) {
            hi = mid;
        } else {
            cum += upper;
            lo = mid;
        }
    }
    std::sort(candidates_.begin() + (std::ptrdiff_t)lo, candidates_.begin() + (std::ptrdiff_t)hi,
              ranks_before<Candidate>);
    for (size_t i = lo; i < hi; ++i) {
        cum += candidates_[i].p;
        if (reached(cum)) return i + 1;
    }
    return hi;  // the half's sum reached the mass but its running sum rounded just short
}

// min-p keeps the candidates whose probability is at least min_p times the largest. The
// probability falls with rank, so the kept set is a rank prefix: a partition finds it
// without ordering it.
void Sampler::keep_min_p() {
    softmax();
    sort_head(1);  // rank 0 is kept whatever min_p is
    const float threshold = candidates_[0].p * params_.min_p;
    size_t n = 1;
    while (n < sorted_ && candidates_[n].p >= threshold) ++n;
    if (n == sorted_) {
        const auto kept = std::partition(candidates_.begin() + (std::ptrdiff_t)n, candidates_.end(),
                                         [&](const Candidate& c) { return c.p >= threshold; });
        n = (size_t)(kept - candidates_.begin());
    }
    candidates_.resize(n);
    sorted_ = std::min(sorted_, n);
}

// Fills candidates_ with the distribution a draw picks from: penalties, top-k, top-p,
// min-p, then the temperature's softmax; at temperature 0 only the first maximum is kept,
// with probability 1.
void Sampler::prepare(const float* logits, int32_t n_vocab) {
    candidates_.resize((size_t)n_vocab);
    sorted_ = 0;
    if (counts_.size() != (size_t)n_vocab) counts_.assign((size_t)n_vocab, 0);
    for (int32_t i = 0; i < n_vocab; ++i) candidates_[(size_t)i] = {i, logits[i], 0.0f};
    apply_penalties();

    if (params_.temperature <= 0.0f) {  // greedy: first maximum wins, as argmax does
        size_t best = 0;
        for (size_t i = 1; i < candidates_.size(); ++i)
            if (candidates_[i].logit > candidates_[best].logit) best = i;
        candidates_[0] = candidates_[best];
        candidates_[0].p = 1.0f;
        candidates_.resize(1);
        sorted_ = 1;
        return;
    }

    if (params_.top_k > 0 && (size_t)params_.top_k < candidates_.size()) {
        sort_head((size_t)params_.top_k);
        candidates_.resize((size_t)params_.top_k);
    }
    if (params_.top_p < 1.0f) {
        softmax();
        candidates_.resize(rank_reaching(params_.top_p, true));
        sorted_ = std::min(sorted_, candidates_.size());
    }
    if (params_.min_p > 0.0f) keep_min_p();
    softmax(params_.temperature);
}

int32_t Sampler::sample(const float* logits, int32_t n_vocab) {
    prepare(logits, n_vocab);
    if (params_.temperature <= 0.0f) return candidates_[0].id;
    // The draw walks the kept distribution in rank order, as it always has, so a seed
    // picks the same token it did when the whole vocabulary was sorted first.
    const double u = rng_.uniform();
    return candidates_[rank_reaching(u, false) - 1].id;
}

int32_t Sampler::distribution(const float* logits, int32_t n_vocab, int32_t* ids, float* probs,
                              int32_t capacity) {
    prepare(logits, n_vocab);
    const int32_t n = std::min(capacity, (int32_t)candidates_.size());
    for (int32_t i = 0; i < n; ++i) {
        ids[i] = candidates_[(size_t)i].id;
        probs[i] = candidates_[(size_t)i].p;
    }
    return (int32_t)candidates_.size();
}

}  // namespace ember
