// The test backend: a "device" that runs the CPU's scalar kernels on one thread, built as
// its own shared library (libember-test.so) and loaded like a GPU backend, so that
// loading, scoring, device buffers and copies, graph splits, partial offload and every
// fallback path are exercised on machines without a GPU. Its memory is separate host
// memory, filled with NaN bytes when allocated: a copy the scheduler forgot shows up as
// NaN logits, not as a lucky read of the host's buffer.
//
// Environment (read at init), to play the situations a real GPU runs into:
//   EMBER_TEST_BACKEND_DEVICES      number of devices (default 1; 0: "no device")
//   EMBER_TEST_BACKEND_MEMORY       bytes of memory per device (default 64 GiB)
//   EMBER_TEST_BACKEND_FAIL_INIT    a reason: init fails with it ("no driver")
//   EMBER_TEST_BACKEND_ABI          the ABI version the table claims (a mismatch is refused)
//   EMBER_TEST_BACKEND_UNSUPPORTED  comma-separated weight types its products refuse ("Q4_K,Q6_K")
//   EMBER_TEST_BACKEND_FAIL_ALLOC_AFTER  allocations that succeed before every later one fails
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/arena.h"
#include "cpu/kernels.h"
#include "cpu/ops.h"
#include "quant/types.h"


namespace {

using namespace ember;

struct Device {
    uint64_t capacity = 64ull << 30;
    std::atomic<uint64_t> used{0};
};

std::vector<Device>* g_devices = nullptr;
std::vector<std::string> g_unsupported;
long g_alloc_budget = -1;  // allocations left before failing (-1: never fail)
std::mutex g_mu;
std::vector<std::pair<void*, size_t>> g_allocs;  // live allocations and their sizes

void set_err(char* err, size_t n, const std::string& msg) {
    if (!err || n == 0) return;
    std::snprintf(err, n, "%s", msg.c_str());
}

int tb_init(char* err, size_t n) {
    if (const char* r = std::getenv("EMBER_TEST_BACKEND_FAIL_INIT")) {
        set_err(err, n, r);
        return 1;
    }
    int count = 1;
    if (const char* d = std::getenv("EMBER_TEST_BACKEND_DEVICES")) count = std::atoi(d);
    g_devices = new std::vector<Device>((size_t)(count > 0 ? count : 0));
    if (const char* m = std::getenv("EMBER_TEST_BACKEND_MEMORY"))
        for (Device& d : *g_devices) d.capacity = std::strtoull(m, nullptr, 10);
    if (const char* u = std::getenv("EMBER_TEST_BACKEND_UNSUPPORTED")) {
        std::string s(u);
        size_t start = 0;
        while (start <= s.size()) {
            size_t end = s.find(',', start);
            if (end == std::string::npos) end = s.size();
            if (end > start) g_unsupported.push_back(s.substr(start, end - start));
            start = end + 1;
        }
    }
    if (const char* a = std::getenv("EMBER_TEST_BACKEND_FAIL_ALLOC_AFTER")) g_alloc_budget = std::atol(a);
    return 0;
}

int tb_device_count() { return g_devices ? (int)g_devices->size() : 0; }

int tb_device_info(int device, BackendDeviceInfo* info) {
    if (!g_devices || device < 0 || device >= (int)g_devices->size()) return 1;
    std::memset(info, 0, sizeof(*info));
    std::snprintf(info->name, sizeof(info->name), "Ember test device %d", device);
    const Device& d = (*g_devices)[(size_t)device];
    info->memory_total = d.capacity;
    const uint64_t used = d.used.load();
    info->memory_free = used < d.capacity ? d.capacity - used : 0;
    return 0;
}

void* tb_alloc(int device, size_t bytes, char* err, size_t n) {
    if (!g_devices || device < 0 || device >= (int)g_devices->size()) {
        set_err(err, n, "no such device");
        return nullptr;
    }
    Device& d = (*g_devices)[(size_t)device];
    std::lock_guard<std::mutex> lock(g_mu);
    if (g_alloc_budget == 0) {
        set_err(err, n, "allocation failed (EMBER_TEST_BACKEND_FAIL_ALLOC_AFTER)");
        return nullptr;
    }
    if (d.used.load() + bytes > d.capacity) {
        set_err(err, n, "out of memory: " + std::to_string(bytes) + " bytes asked for, " +
                            std::to_string(d.capacity - d.used.load()) + " free");
        return nullptr;
    }
    void* p = nullptr;
    try {
        p = aligned_malloc(bytes ? bytes : 1);
    } catch (const std::exception& e) {
        set_err(err, n, e.what());
        return nullptr;
    }
    std::memset(p, 0xff, bytes);  // NaN in every float type: forgotten copies show
    if (g_alloc_budget > 0) --g_alloc_budget;
    d.used += bytes;
    g_allocs.emplace_back(p, bytes);
    return p;
}

void tb_free(int device, void* ptr) {
    if (!ptr || !g_devices || device < 0 || device >= (int)g_devices->size()) return;
    std::lock_guard<std::mutex> lock(g_mu);
    for (size_t i = 0; i < g_allocs.size(); ++i)
        if (g_allocs[i].first == ptr) {
            (*g_devices)[(size_t)device].used -= g_allocs[i].second;
            g_allocs.erase(g_allocs.begin() + (long)i);
            break;
        }
    aligned_free(ptr);
}

int tb_copy(int, void* dst, const void* src, size_t bytes, char*, size_t) {
    std::memcpy(dst, src, bytes);
    return 0;
}

int tb_memset_zero(int, void* dst, size_t bytes, char*, size_t) {
    std::memset(dst, 0, bytes);
    return 0;
}

bool tb_supports(int, const Tensor* t) {
    if (t->op == Op::MUL_MAT || t->op == Op::GET_ROWS) {
        const char* name = type_name((uint32_t)t->src[0]->type);
        for (const std::string& u : g_unsupported)
            if (u == name) return false;
    }
    return t->op > Op::NONE && t->op < Op::COUNT;
}

struct State {
    AlignedBuffer scratch;
    AlignedBuffer work;
};

void* tb_state_create(int, int64_t max_row, int64_t head_dim, int64_t group, char* err, size_t n) {
    try {
        auto* s = new State;
        const size_t floats = std::max<size_t>((size_t)max_row, attention_scratch_floats(head_dim, group)) + 64;
        s->scratch.resize(floats * sizeof(float));
        return s;
    } catch (const std::exception& e) {
        set_err(err, n, e.what());
        return nullptr;
    }
}

void tb_state_free(void* s) { delete static_cast<State*>(s); }

int tb_compute(void* state, const Tensor* const* nodes, int32_t n_nodes, const volatile int32_t* cancel, char* err,
               size_t n) {
    auto* s = static_cast<State*>(state);
    try {
        // the work buffer for converted activations, as the CPU backend sizes it for one thread
        size_t need = 0;
        for (int32_t i = 0; i < n_nodes; ++i) need = std::max(need, node_work_size(nodes[i], Isa::SCALAR, 1) + 64);
        s->work.resize(std::max(need, s->work.size()));
        ComputeParams p;
        p.ith = 0;
        p.nth = 1;
        p.scratch = reinterpret_cast<float*>(s->scratch.data());
        p.scratch_floats = s->scratch.size() / sizeof(float);
        p.work = s->work.data();
        p.isa = Isa::SCALAR;
        std::atomic<int64_t> chunk{0};
        for (int32_t i = 0; i < n_nodes; ++i) {
            if (cancel && *cancel) return 1;
            chunk.store(0);
            p.next_chunk = &chunk;
            compute_node(nodes[i], p);
        }
        return 0;
    } catch (const std::exception& e) {
        set_err(err, n, e.what());
        return 2;
    }
}

BackendIface g_iface = {
    kBackendAbiVersion, (uint32_t)sizeof(Tensor), "test", "Test", 10,
    tb_init, tb_device_count, tb_device_info,
    tb_alloc, tb_free, tb_copy, tb_copy, tb_memset_zero,
    tb_supports, tb_state_create, tb_state_free, tb_compute,
};

}  // namespace

EMBER_BACKEND_EXPORT const ember::BackendIface* ember_backend_entry(void) {
    if (const char* a = std::getenv("EMBER_TEST_BACKEND_ABI")) g_iface.abi_version = (uint32_t)std::atoi(a);
    return &g_iface;
}
