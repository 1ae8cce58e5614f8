// Two contexts of one model decoding at once in two threads, as the server's slots do:
// each thread's greedy continuation must equal the one the same context gives alone, and
// under ThreadSanitizer (scripts/test.sh builds this test with -fsanitize=thread) the run
// must be race-free. The model is $EMBER_TEST_MODEL (the starter, fetched by
// tools/fetch_assets.py); without it the test exits 77, which ctest reports as skipped.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "ember.h"

namespace {

const int kTokens = 24;

// Greedy continuation of prompt in ctx, from position 0.
std::vector<ember_token> continue_greedy(ember_model* model, ember_context* ctx, const std::string& prompt,
                                         ember_status& status) {
    std::vector<ember_token> ids(512);
    int32_t n = 0;
    status = ember_tokenize(model, prompt.data(), (int32_t)prompt.size(), true, false, ids.data(), 512, &n);
    if (status != EMBER_OK) return {};
    ids.resize((size_t)n);
    ember_sampler_params sp = ember_sampler_default_params();
    sp.temperature = 0.0f;
    ember_sampler* smpl = nullptr;
    if ((status = ember_sampler_create(&sp, &smpl)) != EMBER_OK) return {};
    std::vector<ember_token> out;
    status = ember_decode(ctx, ids.data(), n, 0, false);
    for (int32_t pos = n; status == EMBER_OK && (int)out.size() < kTokens; ++pos) {
        ember_token next = 0;
        status = ember_sampler_sample(smpl, ember_get_logits(ctx, -1), ember_model_n_vocab(model), &next);
        if (status != EMBER_OK) break;
        out.push_back(next);
        status = ember_decode(ctx, &next, 1, pos, false);
    }
    ember_sampler_free(smpl);
    return out;
}

}  // namespace

int main() {
    const char* path = std::getenv("EMBER_TEST_MODEL");
    if (!path || !*path) {
        std::printf("EMBER_TEST_MODEL not set: not run\n");
        return 77;
    }
    ember_model* model = nullptr;
    if (ember_model_load(path, nullptr, &model) != EMBER_OK) {
        std::printf("cannot load %s: %s\n", path, ember_last_error());
        return 1;
    }
    const std::string prompts[2] = {"The capital of France is", "Once upon a time, a dragon"};
    ember_context* ctx[2] = {nullptr, nullptr};
    ember_context_params cp = ember_context_default_params();
    cp.n_ctx = 256;
    cp.n_threads = 2;  // each context has its own pool: four workers on two decodes at once
    for (auto& c : ctx)
        if (ember_context_create(model, &cp, &c) != EMBER_OK) {
            std::printf("context: %s\n", ember_model_last_error(model));
            return 1;
        }

    std::vector<ember_token> alone[2], together[2];
    ember_status st_alone[2], st_together[2];
    for (int i = 0; i < 2; ++i) alone[i] = continue_greedy(model, ctx[i], prompts[i], st_alone[i]);
    std::thread t0([&] { together[0] = continue_greedy(model, ctx[0], prompts[0], st_together[0]); });
    std::thread t1([&] { together[1] = continue_greedy(model, ctx[1], prompts[1], st_together[1]); });
    t0.join();
    t1.join();

    int failures = 0;
    for (int i = 0; i < 2; ++i) {
        const bool ok = st_alone[i] == EMBER_OK && st_together[i] == EMBER_OK && (int)alone[i].size() == kTokens &&
                        alone[i] == together[i];
        std::printf("%s context %d: %zu tokens alone, %zu in parallel, %s\n", ok ? "ok  " : "FAIL", i,
                    alone[i].size(), together[i].size(), alone[i] == together[i] ? "equal" : "different");
        failures += !ok;
    }
    if (alone[0] == alone[1]) {
        std::printf("FAIL the two prompts gave the same continuation: the check would not see a mix-up\n");
        ++failures;
    }
    if (ember_model_layout_progress(model, true) != 1.0) {
        std::printf("FAIL the layout copy did not report done after waiting for it\n");
        ++failures;
    }
    for (auto* c : ctx) ember_context_free(c);
    ember_model_free(model);

    // A model freed while its background layout copy runs (model.h): the copier stops
    // between two pieces and is joined before its buffers go; ASan and TSan run this.
    for (int round = 0; round < 3; ++round) {
        ember_model* m = nullptr;
        ember_context* c = nullptr;
        if (ember_model_load(path, nullptr, &m) != EMBER_OK || ember_context_create(m, &cp, &c) != EMBER_OK) {
            std::printf("FAIL reload: %s\n", ember_last_error());
            return 1;
        }
        const ember_token bos = 1;
        const bool ok = ember_decode(c, &bos, 1, 0, false) == EMBER_OK;
        const double done = ember_model_layout_progress(m, false);
        ember_context_free(c);
        ember_model_free(m);
        std::printf("%s freed a model with its layout copy %.0f%% done\n", ok ? "ok  " : "FAIL", 100 * done);
        failures += !ok;
    }
    return failures ? 1 : 0;
}
