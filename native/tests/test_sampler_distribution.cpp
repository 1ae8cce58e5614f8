// The sampler's distribution (ember_sampler_distribution): what a draw picks from, read
// without drawing. Speculative decoding's accept/reject rule trusts it, so it must be the
// distribution sample() really draws from, leave the RNG where it was, and see the
// penalties' history.
#include <cmath>
#include <cstdio>
#include <vector>

#include "ember.h"

static int g_failures = 0;
#define CHECK(cond)                                                             \
    do {                                                                        \
        if (!(cond)) {                                                          \
            std::printf("%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            ++g_failures;                                                       \
        }                                                                       \
    } while (0)

namespace {

constexpr int32_t kVocab = 50;

std::vector<float> logits_row() {
    std::vector<float> row(kVocab);
    for (int32_t i = 0; i < kVocab; ++i) row[(size_t)i] = 2.0f * std::sin(0.7f * (float)i) - 0.02f * (float)i;
    return row;
}

ember_sampler* make(float temperature, int32_t top_k, float top_p, float min_p, float repeat, uint64_t seed) {
    ember_sampler_params p = ember_sampler_default_params();
    p.temperature = temperature;
    p.top_k = top_k;
    p.top_p = top_p;
    p.min_p = min_p;
    p.repeat_penalty = repeat;
    p.seed = seed;
    ember_sampler* s = nullptr;
    CHECK(ember_sampler_create(&p, &s) == EMBER_OK);
    return s;
}

// dense probabilities from the sparse output
std::vector<double> dist(ember_sampler* s, const std::vector<float>& row, int32_t* n_kept) {
    std::vector<ember_token> ids(kVocab);
    std::vector<float> probs(kVocab);
    CHECK(ember_sampler_distribution(s, row.data(), kVocab, ids.data(), probs.data(), kVocab, n_kept) == EMBER_OK);
    std::vector<double> dense(kVocab, 0.0);
    for (int32_t i = 0; i < *n_kept; ++i) dense[(size_t)ids[(size_t)i]] += probs[(size_t)i];
    return dense;
}

void test_greedy_is_the_first_maximum() {
    std::vector<float> row = logits_row();
    row[7] = 9.0f;
    row[31] = 9.0f;  // a tie: the smaller id wins, as argmax and sample() choose
    ember_sampler* s = make(0.0f, 40, 0.95f, 0.05f, 1.0f, 1);
    int32_t n = 0;
    std::vector<double> d = dist(s, row, &n);
    CHECK(n == 1);
    CHECK(d[7] == 1.0);
    ember_token t = -1;
    CHECK(ember_sampler_sample(s, row.data(), kVocab, &t) == EMBER_OK && t == 7);
    ember_sampler_free(s);
}

void test_truncation_and_sum() {
    const std::vector<float> row = logits_row();
    ember_sampler* s = make(0.8f, 5, 1.0f, 0.0f, 1.0f, 1);
    int32_t n = 0;
    std::vector<double> d = dist(s, row, &n);
    CHECK(n == 5);
    double sum = 0.0;
    int nonzero = 0;
    for (double p : d) {
        sum += p;
        nonzero += p > 0.0;
    }
    CHECK(std::fabs(sum - 1.0) < 1e-5);
    CHECK(nonzero == 5);
    // the 5 kept are the 5 largest logits
    for (int32_t i = 0; i < kVocab; ++i)
        if (d[(size_t)i] == 0.0)
            for (int32_t j = 0; j < kVocab; ++j)
                if (d[(size_t)j] > 0.0) CHECK(row[(size_t)j] >= row[(size_t)i]);
    // capacity short of the kept count: n_kept still says how many were kept
    ember_token id = -1;
    float pr = 0.0f;
    int32_t n_small = 0;
    CHECK(ember_sampler_distribution(s, row.data(), kVocab, &id, &pr, 1, &n_small) == EMBER_OK && n_small == 5);
    CHECK(ember_sampler_distribution(s, row.data(), kVocab, nullptr, nullptr, 0, &n_small) == EMBER_OK);
    CHECK(ember_sampler_distribution(s, row.data(), kVocab, nullptr, nullptr, 3, &n_small) != EMBER_OK);
    ember_sampler_free(s);
}

// the frequencies of 40,000 draws against the distribution: a chi-square with 8 degrees of
// freedom (top-k 9) is above 26.1 once in a thousand times; the seed is fixed
void test_draws_follow_the_distribution() {
    const std::vector<float> row = logits_row();
    ember_sampler* s = make(1.3f, 9, 1.0f, 0.0f, 1.0f, 12345);
    int32_t n = 0;
    const std::vector<double> d = dist(s, row, &n);
    const int draws = 40000;
    std::vector<int> counts(kVocab, 0);
    for (int i = 0; i < draws; ++i) {
        ember_token t = -1;
        CHECK(ember_sampler_sample(s, row.data(), kVocab, &t) == EMBER_OK);
        counts[(size_t)t]++;
    }
    double chi2 = 0.0;
    for (int32_t i = 0; i < kVocab; ++i) {
        if (d[(size_t)i] == 0.0) {
            CHECK(counts[(size_t)i] == 0);
            continue;
        }
        const double e = d[(size_t)i] * draws;
        chi2 += (counts[(size_t)i] - e) * (counts[(size_t)i] - e) / e;
    }
    std::printf("chi2 %.2f over %d kept\n", chi2, n);
    CHECK(chi2 < 26.1);
    ember_sampler_free(s);
}

// reading the distribution leaves the RNG alone: the draws that follow are those of a
// sampler that never read it
void test_reading_does_not_move_the_rng() {
    const std::vector<float> row = logits_row();
    ember_sampler* a = make(1.0f, 0, 1.0f, 0.0f, 1.0f, 99);
    ember_sampler* b = make(1.0f, 0, 1.0f, 0.0f, 1.0f, 99);
    for (int i = 0; i < 50; ++i) {
        int32_t n = 0;
        dist(a, row, &n);
        CHECK(n == kVocab);
        ember_token ta = -1, tb = -1;
        ember_sampler_sample(a, row.data(), kVocab, &ta);
        ember_sampler_sample(b, row.data(), kVocab, &tb);
        CHECK(ta == tb);
    }
    ember_sampler_free(a);
    ember_sampler_free(b);
}

void test_penalties_count() {
    const std::vector<float> row = logits_row();
    ember_sampler* s = make(1.0f, 0, 1.0f, 0.0f, 1.5f, 1);
    int32_t n = 0;
    const std::vector<double> before = dist(s, row, &n);
    int32_t top = 0;
    for (int32_t i = 1; i < kVocab; ++i)
        if (before[(size_t)i] > before[(size_t)top]) top = i;
    ember_sampler_accept(s, top);
    const std::vector<double> after = dist(s, row, &n);
    CHECK(after[(size_t)top] < before[(size_t)top]);
    ember_sampler_free(s);
}

}  // namespace

int main() {
    test_greedy_is_the_first_maximum();
    test_truncation_and_sum();
    test_draws_follow_the_distribution();
    test_reading_does_not_move_the_rng();
    test_penalties_count();
    if (g_failures) {
        std::printf("%d check(s) failed\n", g_failures);
        return 1;
    }
    std::printf("ok\n");
    return 0;
}
