// The KV cache's shapes and memory per layer: sliding-window layers keep the window plus a
// batch, layers of their own head size and KV head count get caches of that shape, and
// Gemma 4's shared-KV layers get none (no rows, no bytes) and read the layer llama.cpp's
// `reuse` maps them to; the memory estimate counts the same bytes.
#include <cstdio>

#include "model/kv_cache.h"

using namespace ember;

static int g_failures = 0;
#define CHECK(cond)                                                        \
    do {                                                                   \
        if (!(cond)) {                                                     \
            std::printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);     \
            ++g_failures;                                                  \
        }                                                                  \
    } while (0)

// The synthetic gemma4 file's layout (tools/make_arch_models.py): 6 layers alternating
// sliding (heads of 32, 2 KV heads) and full (heads of 64, 1 KV head), the last 2 shared.
static HParams gemma4_like() {
    HParams h;
    h.n_layer = 6;
    h.n_head = 4;
    h.n_head_kv = 2;
    h.head_dim = 64;
    h.head_dim_swa = 32;
    h.n_swa = 64;
    h.swa_layers = {1, 0, 1, 0, 1, 0};
    h.n_head_layer.assign(6, 4);
    h.n_head_kv_layer = {2, 1, 2, 1, 2, 1};
    h.n_layer_kv = 4;
    return h;
}

static void test_shared_layers_have_no_cache() {
    const HParams h = gemma4_like();
    const int32_t n_ctx = 1024, n_batch = 16;
    KVCache kv(h, n_ctx, n_batch);
    kv.allocate_host([](int32_t) { return true; });
    size_t own = 0;
    for (int32_t il = 0; il < h.n_layer; ++il) {
        const bool swa = h.is_swa(il);
        if (il < 4) {
            CHECK(h.has_kv(il) && h.kv_layer(il) == il);
            CHECK(kv.k[(size_t)il].ne[0] == (swa ? 32 : 64));
            CHECK(kv.k[(size_t)il].ne[1] == (swa ? 2 : 1));
            CHECK(kv.k[(size_t)il].ne[2] == (swa ? 64 + n_batch : n_ctx));
            CHECK(kv.k[(size_t)il].data != nullptr && kv.v[(size_t)il].data != nullptr);
            const size_t want = (size_t)(swa ? 32 * 2 * (64 + n_batch) : 64 * 1 * n_ctx) * 2;
            CHECK(kv.layer_bytes(il) >= want && kv.layer_bytes(il) < want + 4096);
            own += 2 * kv.layer_bytes(il);
        } else {
            CHECK(!h.has_kv(il));
            CHECK(kv.layer_bytes(il) == 0);
            CHECK(kv.k[(size_t)il].ne[2] == 0 && kv.k[(size_t)il].data == nullptr);
            CHECK(kv.v[(size_t)il].data == nullptr);
        }
    }
    // llama.cpp's reuse: a sliding layer reads n_layer_kv - 2, a full one n_layer_kv - 1
    CHECK(h.kv_layer(4) == 2 && h.kv_layer(5) == 3);
    CHECK(kv.total_bytes() == own);
}

static void test_uniform_layers_unchanged() {
    HParams h;
    h.n_layer = 3;
    h.n_head = 4;
    h.n_head_kv = 2;
    h.head_dim = 16;
    KVCache kv(h, 128, 32);
    for (int32_t il = 0; il < 3; ++il) {
        CHECK(h.has_kv(il) && h.kv_layer(il) == il);
        CHECK(kv.k[(size_t)il].ne[0] == 16 && kv.k[(size_t)il].ne[1] == 2 && kv.k[(size_t)il].ne[2] == 128);
        CHECK(kv.layer_bytes(il) == (size_t)16 * 2 * 128 * 2);
    }
}

int main() {
    test_shared_layers_have_no_cache();
    test_uniform_layers_unchanged();
    std::printf("%s (%d failures)\n", g_failures ? "FAILED" : "ok", g_failures);
    return g_failures ? 1 : 0;
}
