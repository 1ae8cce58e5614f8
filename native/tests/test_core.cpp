// Core unit tests: aligned arena, views and transposes without copies, the graph's
// memory plan (reuse without overlap of live tensors), the thread pool and barrier,
// and elementwise ops against naive loops.
#if defined(__linux__)
#  include <pthread.h>
#  include <sched.h>
#endif
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "core/arena.h"
#include "core/error.h"
#include "core/graph.h"
#include "core/memory.h"
#include "core/thread_state.h"
#include "core/threadpool.h"
#include "cpu/ops.h"

using namespace ember;

static int g_failures = 0;
#define CHECK(cond)                                                        \
    do {                                                                   \
        if (!(cond)) {                                                     \
            std::printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);     \
            ++g_failures;                                                  \
        }                                                                  \
    } while (0)

static void test_arena() {
    Arena arena(1024);
    for (size_t n : {1, 63, 64, 65, 100}) {
        void* p = arena.allocate(n);
        CHECK(reinterpret_cast<uintptr_t>(p) % kAlignment == 0);
    }
    bool threw = false;
    try {
        arena.allocate(4096);
    } catch (const Error& e) {
        threw = e.status() == EMBER_ERR_OUT_OF_MEMORY;
    }
    CHECK(threw);
    arena.reset();
    CHECK(arena.used() == 0);
}

static void test_views() {
    std::vector<float> data(6 * 4);
    std::iota(data.begin(), data.end(), 0.0f);
    Graph g;
    Tensor* a = g.leaf(DType::F32, 6, 4, 1, 1, data.data());  // 4 rows of 6
    Tensor* t = g.transpose(a);
    CHECK(t->ne[0] == 4 && t->ne[1] == 6 && t->data == a->data);
    // element (i0=2, i1=5) of the transpose is element (5, 2) of a
    const float* e = reinterpret_cast<const float*>(static_cast<uint8_t*>(t->data) + 2 * t->nb[0] + 5 * t->nb[1]);
    CHECK(*e == data[2 * 6 + 5]);
    Tensor* col = g.column(a, 3);
    CHECK(col->data == data.data() + 18 && col->ne[0] == 6 && col->ne[1] == 1);
    Tensor* r = g.reshape(a, 12, 2);
    CHECK(r->data == a->data && r->nb[1] == 12 * sizeof(float));
}

// A chain of adds where each intermediate dies right after use: the plan must reuse memory,
// and tensors alive at the same time must not overlap.
static void test_memory_plan() {
    const int64_t n = 256;
    std::vector<float> x(n, 1.0f), w(n, 2.0f);
    Graph g;
    Tensor* in = g.leaf(DType::F32, n, 1, 1, 1, x.data());
    Tensor* bias = g.leaf(DType::F32, n, 1, 1, 1, w.data());
    std::vector<Tensor*> made;
    Tensor* cur = in;
    for (int i = 0; i < 20; ++i) {
        Tensor* a = g.add(cur, bias);
        Tensor* b = g.add(a, cur);  // keeps cur alive across a
        made.push_back(a);
        made.push_back(b);
        cur = b;
    }
    g.finalize({cur});
    size_t naive = 0;
    for (Tensor* t : made) naive += align_up(t->n_bytes());
    CHECK(g.buffer_size() < naive / 4);
    AlignedBuffer buf(g.buffer_size());
    g.bind(buf.data());
    // liveness by node index, then check pairwise overlap of simultaneously live tensors
    const auto& nodes = g.nodes();
    std::vector<size_t> first(nodes.size()), last(nodes.size());
    for (size_t i = 0; i < nodes.size(); ++i) {
        first[i] = last[i] = i;
        for (size_t j = i + 1; j < nodes.size(); ++j)
            for (Tensor* s : nodes[j]->src)
                if (s == nodes[i]) last[i] = j;
        if (nodes[i] == cur) last[i] = nodes.size();
    }
    int in_place = 0;
    for (size_t i = 0; i < nodes.size(); ++i)
        for (size_t j = i + 1; j < nodes.size(); ++j) {
            const bool live_together = first[j] <= last[i];
            // an elementwise op may write over the source whose last reader it is
            if (first[j] == last[i] && nodes[j]->src[0] == nodes[i] && nodes[j]->data == nodes[i]->data) {
                ++in_place;
                continue;
            }
            if (!live_together) continue;
            const uint8_t* a0 = static_cast<uint8_t*>(nodes[i]->data);
            const uint8_t* b0 = static_cast<uint8_t*>(nodes[j]->data);
            const bool disjoint = a0 + nodes[i]->n_bytes() <= b0 || b0 + nodes[j]->n_bytes() <= a0;
            CHECK(disjoint);
        }
    CHECK(in_place == 20);  // every b = a + cur lands on a, whose last reader it is
    // and the values are right: cur_{k+1} = (cur_k + 2) + cur_k
    CpuBackend cpu(2, n, Isa::SCALAR);
    CHECK(cpu.compute(g, nullptr));
    double want = 1.0;
    for (int i = 0; i < 20; ++i) want = 2 * want + 2;
    CHECK(static_cast<float*>(cur->data)[0] == (float)want && static_cast<float*>(cur->data)[n - 1] == (float)want);
}

// Pinning: each worker's affinity is exactly one CPU, the i-th the process may use.
static void test_thread_pinning() {
#if defined(__linux__)
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    CHECK(sched_getaffinity(0, sizeof allowed, &allowed) == 0);
    std::vector<int> cpus;
    for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
    const int n = cpus.size() >= 2 ? 2 : 1;
    ThreadPool pool(n, /*pin=*/true);
    CHECK(pool.pinned() == (n == 2));
    std::vector<int> only(2, -1);  // the single CPU a worker may run on, else -2
    pool.run([&](int ith, int) {
        cpu_set_t mine;
        CPU_ZERO(&mine);
        pthread_getaffinity_np(pthread_self(), sizeof mine, &mine);
        only[(size_t)ith] = CPU_COUNT(&mine) == 1 ? -3 : -2;
        for (int c = 0; c < CPU_SETSIZE && only[(size_t)ith] == -3; ++c)
            if (CPU_ISSET(c, &mine)) only[(size_t)ith] = c;
    });
    if (n == 2) CHECK(only[1] == cpus[1]);           // the worker: pinned to the second CPU
    CHECK(only[0] == -2 || cpus.size() == 1);         // the caller: left alone
    ThreadPool unpinned(n);
    CHECK(!unpinned.pinned());
#endif
}

static void test_thread_pool() {
    ThreadPool pool(4);
    std::vector<int> hits(4, 0);
    std::vector<int> stage(4 * 100, 0);
    pool.run([&](int ith, int nth) {
        CHECK(nth == 4);
        hits[(size_t)ith]++;
        for (int phase = 0; phase < 100; ++phase) {
            stage[(size_t)(phase * 4 + ith)] = phase;
            pool.barrier();
            // after the barrier every thread's write of this phase is visible
            for (int t = 0; t < 4; ++t) CHECK(stage[(size_t)(phase * 4 + t)] == phase);
            pool.barrier();
        }
    });
    for (int h : hits) CHECK(h == 1);
    bool caught = false;
    try {
        pool.run([&](int ith, int) {
            if (ith == 2) fail(EMBER_ERR_INTERNAL, "boom");
        });
    } catch (const Error& e) {
        caught = std::string(e.what()) == "boom";
    }
    CHECK(caught);
}

// Per-thread scratch (core/thread_state.h): aligned, zeroed when it grows, kept per call
// site and per thread, and freed when the thread exits (no thread_local destructors).
struct SiteA;
struct SiteB;
static void test_thread_scratch() {
    float* a = thread_scratch<float, SiteA>(10);
    CHECK(reinterpret_cast<uintptr_t>(a) % 64 == 0);
    for (int i = 0; i < 10; ++i) CHECK(a[i] == 0.0f);
    for (int i = 0; i < 10; ++i) a[i] = (float)i;
    float* again = thread_scratch<float, SiteA>(5);  // smaller: the same array, as left
    CHECK(again == a && again[9] == 9.0f);
    int* b = thread_scratch<int, SiteB>(10);
    CHECK(reinterpret_cast<void*>(b) != reinterpret_cast<void*>(a));
    float* big = thread_scratch<float, SiteA>(1 << 18);  // grows: zero-filled again
    CHECK(reinterpret_cast<uintptr_t>(big) % 64 == 0);
    bool zero = true;
    for (int i = 0; i < (1 << 18); ++i) zero = zero && big[i] == 0.0f;
    CHECK(zero);
    thread_last_error() = "main thread's error";
    const int live = detail::live_thread_states();
    float* other = nullptr;
    std::thread t([&] {
        other = thread_scratch<float, SiteA>(10);
        CHECK(other != big && other[0] == 0.0f);
        CHECK(thread_last_error().empty());
        thread_last_error() = std::string(1000, 'x');  // on the heap: freed at exit
        CHECK(detail::live_thread_states() == live + 1);
    });
    t.join();
    CHECK(detail::live_thread_states() == live);  // the thread's state went with it
    CHECK(thread_last_error() == "main thread's error");
    {
        ThreadPool pool(4);
        pool.run([&](int, int) { thread_scratch<float, SiteB>(1000)[999] = 1.0f; });
        CHECK(detail::live_thread_states() == live + 3);  // the caller's state was there already
    }
    CHECK(detail::live_thread_states() == live);
}

static void test_elementwise_ops() {
    std::mt19937 rng(7);
    std::normal_distribution<float> nd;
    const int64_t n = 64, rows = 3;
    std::vector<float> x(n * rows), w(n), u(n * rows);
    for (auto& v : x) v = nd(rng);
    for (auto& v : w) v = nd(rng);
    for (auto& v : u) v = nd(rng);
    Graph g;
    Tensor* tx = g.leaf(DType::F32, n, rows, 1, 1, x.data());
    Tensor* tw = g.leaf(DType::F32, n, 1, 1, 1, w.data());
    Tensor* tu = g.leaf(DType::F32, n, rows, 1, 1, u.data());
    Tensor* norm = g.rms_norm_mul(tx, tw, 1e-5f);
    Tensor* sw = g.swiglu(norm, tu);
    g.finalize({sw});
    AlignedBuffer buf(g.buffer_size());
    g.bind(buf.data());
    CpuBackend cpu(2, n, Isa::SCALAR);
    CHECK(cpu.compute(g, nullptr));
    for (int64_t r = 0; r < rows; ++r) {
        double ss = 0;
        for (int64_t i = 0; i < n; ++i) ss += (double)x[r * n + i] * x[r * n + i];
        const double scale = 1.0 / std::sqrt(ss / n + 1e-5);
        for (int64_t i = 0; i < n; ++i) {
            const double nv = x[r * n + i] * scale * w[i];
            const double want = nv / (1.0 + std::exp(-nv)) * u[r * n + i];
            const float got = sw->row<float>(r)[i];
            CHECK(std::fabs(got - want) < 1e-4 * (1.0 + std::fabs(want)));
        }
    }
}

// In-place writing must not happen when the op also reads its first source through
// another view: c = a + a[row 0] broadcast would read a row 0 after writing over it.
static void test_in_place_needs_sole_reader() {
    const int64_t n = 8;
    std::vector<float> x(2 * n), w(2 * n, 1.0f);
    for (int64_t i = 0; i < 2 * n; ++i) x[(size_t)i] = (float)i;
    Graph g;
    Tensor* in = g.leaf(DType::F32, n, 2, 1, 1, x.data());
    Tensor* one = g.leaf(DType::F32, n, 2, 1, 1, w.data());
    Tensor* a = g.add(in, one);                // a[r][i] = x + 1
    Tensor* c = g.add(a, g.column(a, 0));      // c[r][i] = a[r][i] + a[0][i]
    g.finalize({c});
    AlignedBuffer buf(g.buffer_size());
    g.bind(buf.data());
    CHECK(c->data != a->data);
    CpuBackend cpu(1, n, Isa::SCALAR);
    CHECK(cpu.compute(g, nullptr));
    const float* cv = static_cast<const float*>(c->data);
    for (int64_t i = 0; i < n; ++i) {
        CHECK(cv[i] == 2.0f * (x[(size_t)i] + 1.0f));
        CHECK(cv[n + i] == (x[(size_t)(n + i)] + 1.0f) + (x[(size_t)i] + 1.0f));
    }
}

// The memory check judges a mixture of experts by what a decode reads, the mapping by the
// address space (core/memory.h): a 30 GiB file whose tokens read 3 GiB fits a 24 GiB machine,
// a dense 25 GiB one does not, and no file maps past RLIMIT_AS.
static void test_memory_check() {
    constexpr uint64_t GiB = 1ull << 30;
    MemoryLimits limits;
    limits.address_space = {100 * GiB, "RLIMIT_AS"};
    limits.available = {10 * GiB, "MemAvailable"};
    limits.total = {24 * GiB, "MemTotal"};
    auto refusal = [&](const MemoryNeed& need) -> std::string {
        try {
            check_memory_fits(need, limits);
        } catch (const Error& e) {
            CHECK(e.status() == EMBER_ERR_OUT_OF_MEMORY);
            return e.what();
        }
        return "";
    };
    MemoryNeed moe;
    moe.mapped = 30 * GiB;
    moe.weights = 3 * GiB;
    moe.kv_cache = GiB;
    moe.compute = GiB / 2;
    moe.n_ctx = 4096;
    CHECK(refusal(moe).empty());
    MemoryNeed dense = moe;
    dense.mapped = dense.weights = 25 * GiB;
    const std::string msg = refusal(dense);
    CHECK(msg.find("weights 25.00 GiB") != std::string::npos && msg.find("MemTotal") != std::string::npos);
    CHECK(msg.find("mapped") == std::string::npos);  // a dense file reads all it maps
    MemoryNeed big_moe = moe;
    big_moe.weights = 23 * GiB;  // the used experts alone do not fit
    const std::string m2 = refusal(big_moe);
    CHECK(m2.find("read per token, of 30.00 GiB mapped") != std::string::npos);
    limits.address_space = {20 * GiB, "RLIMIT_AS"};
    const std::string m3 = refusal(moe);
    CHECK(m3.find("weights 30.00 GiB") != std::string::npos && m3.find("RLIMIT_AS") != std::string::npos);
}

int main() {
    test_memory_check();
    test_arena();
    test_views();
    test_memory_plan();
    test_in_place_needs_sole_reader();
    test_thread_pool();
    test_thread_scratch();
    test_thread_pinning();
    test_elementwise_ops();
    std::printf("%s (%d failures)\n", g_failures ? "FAILED" : "ok", g_failures);
    return g_failures ? 1 : 0;
}
