// Op-by-op check of a backend against the CPU backend, in the spirit of llama.cpp's
// test-backend-ops: every op and weight type over shapes that hit the edges (odd rows,
// one token, a batch, a wrapped sliding-window cache, a full context), each as a one-node
// graph computed by the CPU at its best ISA level and by the backend under test on its
// device (inputs uploaded, result downloaded). Pass: normalized mean squared error
// NMSE = sum (x - ref)^2 / sum ref^2 <= 5e-4 for matrix products and attention, <= 1e-7
// for the elementwise ops.
//
//   test_backend_ops [LIBRARY]    default: $EMBER_BACKEND_OPS_LIB, else libember-test.so
//                                 (ember-test.dll) next to this program
// Exit 0 all passed, 1 a failure, 77 (ctest: skipped, and said so) no library to test.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/registry.h"
#include "core/arena.h"
#include "core/fp16.h"
#include "core/graph.h"
#include "cpu/kernels.h"
#include "cpu/ops.h"
#include "quant/types.h"

using namespace ember;

namespace {

std::mt19937 rng(1234);
int g_failures = 0, g_cases = 0;

float urand(float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(rng); }

// The pieces of one case: leaves with host data, the graph, its outputs.
struct Case {
    std::string name;
    Graph g;
    std::vector<std::unique_ptr<AlignedBuffer>> data;
    std::vector<Tensor*> leaves;
    std::vector<Tensor*> outputs;  // compared after both runs (F32 or F16, contiguous)
    double max_nmse = 1e-7;
    int64_t head_dim = 64, group = 1;

    Tensor* leaf(DType type, int64_t ne0, int64_t ne1 = 1, int64_t ne2 = 1, float scale = 1.0f) {
        Tensor* t = g.leaf(type, ne0, ne1, ne2, 1, nullptr, ("leaf" + std::to_string(leaves.size())).c_str());
        const size_t bytes = t->n_bytes();
        data.push_back(std::make_unique<AlignedBuffer>(bytes));
        t->data = data.back()->data();
        const int64_t n = t->n_elements();
        if (type == DType::I32) {
            std::memset(t->data, 0, bytes);
        } else if (type == DType::F32) {
            float* f = static_cast<float*>(t->data);
            for (int64_t i = 0; i < n; ++i) f[i] = urand(-scale, scale);
        } else {
            std::vector<float> f((size_t)n);
            for (auto& x : f) x = urand(-scale, scale);
            const TypeTraits* tt = type_traits((uint32_t)type);
            tt->quantize(f.data(), t->data, n);
        }
        leaves.push_back(t);
        return t;
    }
    Tensor* ids(const std::vector<int32_t>& v) {
        Tensor* t = leaf(DType::I32, (int64_t)v.size());
        std::memcpy(t->data, v.data(), v.size() * sizeof(int32_t));
        return t;
    }
};

std::vector<float> as_floats(const Tensor* t, const void* data) {
    const int64_t n = t->n_elements();
    std::vector<float> out((size_t)n);
    if (t->type == DType::F32) std::memcpy(out.data(), data, (size_t)n * sizeof(float));
    else
        for (int64_t i = 0; i < n; ++i) out[(size_t)i] = fp16_to_fp32(static_cast<const uint16_t*>(data)[i]);
    return out;
}

double nmse(const std::vector<float>& x, const std::vector<float>& ref) {
    double num = 0, den = 0;
    for (size_t i = 0; i < x.size(); ++i) {
        if (!std::isfinite(x[i])) return INFINITY;
        const double d = (double)x[i] - (double)ref[i];
        num += d * d;
        den += (double)ref[i] * ref[i];
    }
    return den > 0 ? num / den : num;
}

void run_case(const BackendRecord& be, int device, Case& c, CpuBackend& cpu) {
    ++g_cases;
    const BackendIface* b = be.iface;
    c.g.finalize(c.outputs);
    AlignedBuffer host(std::max<size_t>(c.g.buffer_size(), 64));
    c.g.bind(host.data());
    char err[512] = {0};
    std::string failure;
    std::map<const Tensor*, void*> dev;
    void* dbuf = b->alloc(device, host.size(), err, sizeof(err));
    void* state = b->state_create(device, 16384, c.head_dim, c.group, err, sizeof(err));
    auto cleanup = [&] {
        for (auto& [t, p] : dev) b->free(device, p);
        if (dbuf) b->free(device, dbuf);
        if (state) b->state_free(state);
    };
    if (!dbuf || !state) {
        std::printf("FAIL %s: device setup: %s\n", c.name.c_str(), err);
        ++g_failures;
        cleanup();
        return;
    }
    // inputs to the device before the CPU runs (a KV_STORE writes its leaves in place)
    for (Tensor* l : c.leaves) {
        void* p = b->alloc(device, l->n_bytes(), err, sizeof(err));
        if (!p || b->upload(device, p, l->data, l->n_bytes(), err, sizeof(err)) != 0) {
            std::printf("FAIL %s: upload: %s\n", c.name.c_str(), err);
            ++g_failures;
            if (p) b->free(device, p);
            cleanup();
            return;
        }
        dev[l] = p;
    }
    for (const Tensor* t : c.g.nodes())
        if (t->op != Op::VIEW && !b->supports(device, t)) {
            std::printf("FAIL %s: the backend does not support the node\n", c.name.c_str());
            ++g_failures;
            cleanup();
            return;
        }

    cpu.compute(c.g, nullptr);

    auto resolve = [&](const Tensor* t) -> void* {
        const Tensor* st = storage_of(t);
        if (st->op == Op::KV_STORE) return nullptr;
        const size_t off = (size_t)(static_cast<const uint8_t*>(t->data) - static_cast<const uint8_t*>(st->data));
        if (st->op == Op::NONE) return static_cast<uint8_t*>(dev.at(st)) + off;
        return static_cast<uint8_t*>(dbuf) + (static_cast<const uint8_t*>(st->data) - host.data()) + off;
    };
    std::vector<Tensor> shadows;
    shadows.reserve(c.g.nodes().size() * (kMaxSrc + 1));
    std::map<const Tensor*, Tensor*> shadow_of;
    std::vector<const Tensor*> nodes;
    for (const Tensor* t : c.g.nodes()) {
        if (t->op == Op::VIEW) continue;
        shadows.push_back(*t);
        Tensor* sh = &shadows.back();
        sh->data = resolve(t);
        for (int j = 0; j < kMaxSrc; ++j) {
            const Tensor* s = t->src[j];
            if (!s) continue;
            auto it = shadow_of.find(s);
            if (it != shadow_of.end()) {
                sh->src[j] = it->second;
                continue;
            }
            shadows.push_back(*s);
            Tensor* ss = &shadows.back();
            for (Tensor*& q : ss->src) q = nullptr;
            ss->data = resolve(s);
            shadow_of[s] = ss;
            sh->src[j] = ss;
        }
        shadow_of[t] = sh;
        nodes.push_back(sh);
    }
    if (b->compute(state, nodes.data(), (int32_t)nodes.size(), nullptr, err, sizeof(err)) != 0) {
        std::printf("FAIL %s: compute: %s\n", c.name.c_str(), err);
        ++g_failures;
        cleanup();
        return;
    }
    double worst = 0;
    for (const Tensor* o : c.outputs) {
        const Tensor* out = o->op == Op::KV_STORE ? nullptr : o;
        std::vector<const Tensor*> compare = out ? std::vector<const Tensor*>{out}
                                                 : std::vector<const Tensor*>{o->src[2], o->src[3]};
        for (const Tensor* t : compare) {
            std::vector<uint8_t> got(t->n_bytes());
            if (b->download(device, got.data(), resolve(t), got.size(), err, sizeof(err)) != 0) {
                std::printf("FAIL %s: download: %s\n", c.name.c_str(), err);
                ++g_failures;
                cleanup();
                return;
            }
            worst = std::max(worst, nmse(as_floats(t, got.data()), as_floats(t, t->data)));
        }
    }
    const bool ok = worst <= c.max_nmse;
    if (!ok) ++g_failures;
    std::printf("%s %-48s NMSE %.3g (max %.0e)\n", ok ? "ok  " : "FAIL", c.name.c_str(), worst, c.max_nmse);
    cleanup();
}

std::string shape(std::initializer_list<int64_t> dims) {
    std::string s;
    for (int64_t d : dims) s += (s.empty() ? "" : "x") + std::to_string(d);
    return s;
}

using Builder = std::function<void(Case&)>;

void add(std::vector<std::pair<std::string, Builder>>& cases, std::string name, Builder b) {
    cases.emplace_back(std::move(name), std::move(b));
}

std::vector<std::pair<std::string, Builder>> all_cases() {
    std::vector<std::pair<std::string, Builder>> cases;
    const DType weight_types[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0, DType::Q4_1,
                                  DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q2_K, DType::Q3_K,
                                  DType::Q4_K, DType::Q5_K, DType::Q6_K};
    for (DType t : weight_types)
        for (int64_t k : {256, 768})
            for (int64_t m : {1, 7, 96})
                for (int64_t n : {1, 2, 9, 33}) {
                    add(cases, std::string("mul_mat ") + type_name((uint32_t)t) + " " + shape({k, m, n}), [=](Case& c) {
                        c.max_nmse = 5e-4;
                        Tensor* w = c.leaf(t, k, m, 1, 0.5f);
                        Tensor* x = c.leaf(DType::F32, k, n);
                        c.outputs = {c.g.mul_mat(w, x)};
                    });
                }
    for (DType t : {DType::F32, DType::F16, DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::Q6_K})
        add(cases, std::string("get_rows ") + type_name((uint32_t)t), [=](Case& c) {
            Tensor* table = c.leaf(t, 256, 11);
            c.outputs = {c.g.get_rows(table, c.ids({3, 0, 10, 3, 7}))};
        });
    for (int64_t n : {1, 7})
        add(cases, "rms_norm_mul " + shape({576, n}), [=](Case& c) {
            c.outputs = {c.g.rms_norm_mul(c.leaf(DType::F32, 576, n, 1, 3.0f), c.leaf(DType::F32, 576), 1e-5f)};
        });
    add(cases, "rms_norm_mul per head 64x9x3", [](Case& c) {
        c.outputs = {c.g.rms_norm_mul(c.leaf(DType::F32, 64, 9, 3), c.leaf(DType::F32, 64), 1e-6f)};
    });
    add(cases, "add 576x5", [](Case& c) { c.outputs = {c.g.add(c.leaf(DType::F32, 576, 5), c.leaf(DType::F32, 576, 5))}; });
    add(cases, "add bias 576x5 + 576", [](Case& c) {
        c.outputs = {c.g.add(c.leaf(DType::F32, 576, 5), c.leaf(DType::F32, 576))};
    });
    for (Activation act : {Activation::SILU, Activation::GELU_TANH}) {
        const char* an = act == Activation::SILU ? "silu" : "gelu";
        add(cases, std::string("glu ") + an + " 1536x3", [=](Case& c) {
            c.outputs = {c.g.glu(c.leaf(DType::F32, 1536, 3, 1, 4.0f), c.leaf(DType::F32, 1536, 3), act)};
        });
        add(cases, std::string("glu ") + an + " fused views 2x1536x3", [=](Case& c) {
            // one product's rows: gate then up (phi3's fused gate/up)
            Tensor* gu = c.leaf(DType::F32, 3072, 3, 1, 4.0f);
            const int64_t ne[4] = {1536, 3, 1, 1};
            const size_t nb[4] = {4, gu->nb[1], gu->nb[1] * 3, gu->nb[1] * 3};
            c.outputs = {c.g.glu(c.g.view(gu, ne, nb, 0), c.g.view(gu, ne, nb, 1536 * 4), act)};
        });
    }
    add(cases, "scale 640x3", [](Case& c) { c.outputs = {c.g.scale(c.leaf(DType::F32, 640, 3), 0.125f)}; });
    add(cases, "softcap 30 1000x2", [](Case& c) { c.outputs = {c.g.softcap(c.leaf(DType::F32, 1000, 2, 1, 90.0f), 30.0f)}; });
    struct RopeCase {
        const char* name;
        RopeMode mode;
        int n_rot;
        bool factors;
        float ext;
    };
    for (RopeCase rc : {RopeCase{"normal", RopeMode::NORMAL, 64, false, 0.0f}, RopeCase{"neox", RopeMode::NEOX, 64, false, 0.0f},
                        RopeCase{"neox partial 32", RopeMode::NEOX, 32, false, 0.0f},
                        RopeCase{"normal factors", RopeMode::NORMAL, 64, true, 0.0f},
                        RopeCase{"neox yarn", RopeMode::NEOX, 64, false, 1.0f}})
        add(cases, std::string("rope ") + rc.name + " 64x4x5", [=](Case& c) {
            RopeParams rp;
            rp.n_rot = rc.n_rot;
            rp.mode = rc.mode;
            rp.freq_base = 500000.0f;
            rp.ext_factor = rc.ext;
            if (rc.ext != 0.0f) {
                rp.freq_scale = 0.25f;
                rp.n_ctx_orig = 4096;
                rp.attn_factor = 1.1f;
            }
            Tensor* x = c.leaf(DType::F32, 64, 4, 5);
            Tensor* pos = c.ids({0, 1, 17, 4095, 70000});
            Tensor* f = rc.factors ? c.leaf(DType::F32, rc.n_rot / 2, 1, 1, 1.0f) : nullptr;
            if (f)
                for (int64_t i = 0; i < f->ne[0]; ++i) static_cast<float*>(f->data)[i] = 1.0f + (float)i;
            c.outputs = {c.g.rope(x, pos, rp, f)};
        });
    add(cases, "kv_store 64x2x3 into a ring of 16", [](Case& c) {
        Tensor* k = c.leaf(DType::F32, 64, 2, 3);
        Tensor* v = c.leaf(DType::F32, 64, 2, 3);
        Tensor* kc = c.leaf(DType::F16, 64, 2, 16);
        Tensor* vc = c.leaf(DType::F16, 64, 2, 16);
        c.outputs = {c.g.kv_store(k, v, kc, vc, c.ids({14, 15, 16}))};
    });
    struct AttnCase {
        const char* name;
        int64_t hd, n_head, n_kv, rows;
        std::vector<int32_t> pos;
        int32_t window;
        float softcap;
    };
    const AttnCase attn[] = {
        {"decode", 64, 8, 2, 64, {40}, 0, 0.0f},
        {"batch", 64, 8, 2, 64, {10, 11, 12, 13, 14, 15, 16}, 0, 0.0f},
        {"full context", 64, 4, 4, 48, {47}, 0, 0.0f},
        {"batch from 0", 128, 4, 1, 32, {0, 1, 2, 3, 4}, 0, 0.0f},
        {"window 8", 64, 8, 2, 64, {30, 31, 32}, 8, 0.0f},
        {"window ring", 64, 4, 2, 24, {40, 41}, 16, 0.0f},
        {"softcap 50", 64, 8, 8, 64, {20, 21}, 0, 50.0f},
        {"head 256", 256, 4, 1, 40, {33}, 0, 0.0f},
    };
    for (const AttnCase& a : attn)
        add(cases, std::string("attention ") + a.name + " hd" + std::to_string(a.hd) + " " +
                       std::to_string(a.n_head) + "/" + std::to_string(a.n_kv),
            [=](Case& c) {
                c.max_nmse = 5e-4;
                c.head_dim = a.hd;
                c.group = a.n_head / a.n_kv;
                Tensor* q = c.leaf(DType::F32, a.hd, a.n_head, (int64_t)a.pos.size(), 1.0f);
                Tensor* kc = c.leaf(DType::F16, a.hd, a.n_kv, a.rows, 1.0f);
                Tensor* vc = c.leaf(DType::F16, a.hd, a.n_kv, a.rows, 1.0f);
                c.outputs = {c.g.attention(q, kc, vc, c.ids(a.pos), nullptr, 1.0f / std::sqrt((float)a.hd), a.window,
                                           a.softcap)};
            });
    return cases;
}

std::string default_library(const char* argv0) {
    if (const char* e = std::getenv("EMBER_BACKEND_OPS_LIB")) return e;
    std::string dir(argv0);
    const size_t slash = dir.find_last_of("/\\");
    dir = slash == std::string::npos ? std::string("./") : dir.substr(0, slash + 1);
#ifdef _WIN32
    return dir + "ember-test.dll";
#elif defined(__APPLE__)
    return dir + "libember-test.dylib";
#else
    return dir + "libember-test.so";
#endif
}

}  // namespace

int main(int argc, char** argv) {
    const std::string lib = argc > 1 ? argv[1] : default_library(argv[0]);
    if (!std::fopen(lib.c_str(), "rb")) {
        std::printf("SKIP: no backend library at %s (build the ember-test target, or pass one)\n", lib.c_str());
        return 77;
    }
#ifdef _WIN32
    _putenv_s("EMBER_BACKEND_PATH", lib.c_str());
#else
    setenv("EMBER_BACKEND_PATH", lib.c_str(), 1);
#endif
    const BackendRecord* be = nullptr;
    for (const BackendRecord& r : backend_registry())
        if (r.path == lib) be = &r;
    if (!be || !be->usable) {
        std::printf("FAIL: %s cannot be used: %s\n", lib.c_str(), be ? be->reason.c_str() : "not loaded");
        return 1;
    }
    std::printf("backend %s (%s), device 0, against the CPU at %s\n", be->name.c_str(), lib.c_str(),
                isa_name(active_isa()));
    // one CPU backend for every case, with scratch for the largest attention group
    CpuBackend cpu(2, 16384 + (int64_t)attention_scratch_floats(256, 8), active_isa());
    for (auto& [name, build] : all_cases()) {
        Case c;
        c.name = name;
        build(c);
        run_case(*be, 0, c, cpu);
    }
    std::printf("%d of %d cases passed\n", g_cases - g_failures, g_cases);
    std::fflush(stdout);
    // Ends without joining the CPU backend's worker: a MinGW build's worker thread exiting
    // while ember-test.dll (a second static copy of the MinGW runtime) is loaded faults in
    // the runtime's thread-exit path (seen under wine 8, after every case had passed). The
    // engine alone (ember.dll, dll_smoke) frees its pools cleanly.
    std::_Exit(g_failures ? 1 : 0);
}
