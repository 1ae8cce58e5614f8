#include <cstdio>
#include <cstdlib>
#include <string>
// The CPU backend (ops.h: CpuBackend): runs a planned graph node by node on the thread
// pool, with barriers where the plan says, per-op profiling, and the read-rate probe.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/thread_state.h"
#include "cpu/ops.h"

namespace ember {

namespace {
// EMBER_PIN_THREADS=1 pins the workers (see ThreadPool); off by default, as in llama.cpp:
// on a shared machine a pinned thread cannot move away from a busy core.
bool pin_requested() {
    const char* env = std::getenv("EMBER_PIN_THREADS");
    return env && env[0] == '1';
}
}  // namespace

CpuBackend::CpuBackend(int n_threads, int64_t max_row, Isa isa)
    : pool_(n_threads, pin_requested()), isa_(isa), scratch_((size_t)pool_.size()) {
    // attention's accumulator: head_dim floats (the online softmax needs no per-key buffer)
    const size_t floats = (size_t)(max_row + 64);
    for (auto& s : scratch_) s.buf.resize(floats * sizeof(float));
}

OpProfile::Entry& OpProfile::at(const std::string& key) {
    for (auto& [k, e] : entries)
        if (k == key) return e;
    entries.emplace_back(key, Entry{});
    return entries.back().second;
}

void CpuBackend::set_profiling(bool on) {
    profiling_ = on;
    profile_.entries.clear();
}

namespace {

// "mul_mat ffn_down" for blk.N.ffn_down.weight; the op name for everything else
std::string profile_key(const Tensor* t) {
    std::string key = op_name(t->op);
    if (t->op != Op::MUL_MAT) return key;
    std::string w = t->src[0]->name;
    if (w.rfind("blk.", 0) == 0) {
        const size_t dot = w.find('.', 4);
        if (dot != std::string::npos) w = w.substr(dot + 1);
    }
    const size_t suffix = w.rfind(".weight");
    if (suffix != std::string::npos) w = w.substr(0, suffix);
    return key + " " + (w.empty() ? "?" : w);
}

double now_seconds() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

double CpuBackend::read_rate(const std::vector<std::pair<const uint8_t*, size_t>>& ranges, double seconds) {
    size_t total = 0;
    for (const auto& r : ranges) total += r.second;
    if (total == 0) return 0.0;
    std::atomic<uint64_t> sink{0};
    double best = 0.0;
    const double t_end = now_seconds() + seconds;
    for (int pass = 0; pass < 2 * kReadPatterns || now_seconds() < t_end; ++pass) {
        const ReadPattern how = kReadPattern[pass % kReadPatterns];
        const double t0 = now_seconds();
        pool_.run([&](int ith, int nth) {
            // this thread's share: bytes [from, to) of the ranges laid end to end
            const size_t from = total / (size_t)nth * (size_t)ith, to = ith + 1 == nth ? total : from + total / (size_t)nth;
            size_t at = 0;
            uint64_t h = 0;
            for (const auto& r : ranges) {
                const size_t b = std::max(at, from), e = std::min(at + r.second, to);
                if (b < e) h ^= read_bytes(r.first + (b - at), e - b, how);
                at += r.second;
            }
            sink.fetch_xor(h, std::memory_order_relaxed);
        });
        best = std::max(best, (double)total / (now_seconds() - t0));
    }
    return best;
}

bool CpuBackend::compute(const Graph& graph, const volatile int32_t* cancel) {
    return compute_range(graph, 0, graph.nodes().size(), cancel);
}

bool CpuBackend::compute_range(const Graph& graph, size_t begin, size_t end, const volatile int32_t* cancel) {
    work_.resize(work_size(graph, isa_, pool_.size()) + 64);  // grows only: no allocation in the token loop
    const auto& nodes = graph.nodes();
    // A barrier only where a node needs what another thread may still be producing or
    // reading. The plan compares byte ranges of the graph's tensors; rebinding the graph
    // to a grown buffer moves all intermediates together, so the plan stays valid.
    if (plan_graph_ != graph.id()) {
        plan_ = barrier_plan(graph, isa_);
        plan_graph_ = graph.id();
    }
    const std::vector<uint8_t>& plan = plan_;
    // per node, a row-chunk counter per thread (mul_mat's decoding split uses them all)
    const size_t per_node = (size_t)pool_.size();
    if (chunks_.size() < nodes.size() * per_node) chunks_ = std::vector<std::atomic<int64_t>>(nodes.size() * per_node);
    for (size_t i = begin * per_node; i < end * per_node; ++i) chunks_[i].store(0, std::memory_order_relaxed);
    // Cancellation: thread 0 polls the flag and names the barrier after which everyone
    // stops; every thread checks right after passing a barrier, so all stop at the same one.
    constexpr int64_t kNever = INT64_MAX;
    std::atomic<int64_t> stop_at{kNever};
    pool_.run([&](int ith, int nth) {
        ComputeParams p;
        p.ith = ith;
        p.nth = nth;
        p.scratch = reinterpret_cast<float*>(scratch_[(size_t)ith].buf.data());
        p.scratch_floats = scratch_[(size_t)ith].buf.size() / sizeof(float);
        p.work = work_.data();
        p.isa = isa_;
        p.pool = nth > 1 ? &pool_ : nullptr;
        int64_t passed = 0;  // barriers passed, the same count on every thread
        const bool timed = profiling_ && ith == 0;
        auto sync = [&]() {
            if (ith == 0 && cancel && *cancel && stop_at.load(std::memory_order_relaxed) == kNever)
                stop_at.store(passed, std::memory_order_relaxed);
            pool_.barrier();
            return stop_at.load(std::memory_order_relaxed) <= passed++;
        };
        for (size_t i = begin; i < end; ++i) {
            if (nodes[i]->op == Op::VIEW) continue;  // no work, so no barrier either
            double t0 = timed ? now_seconds() : 0.0;
            if (plan[i] && i != begin) {  // a range starts with every thread lined up
                if (sync()) return;
                if (timed) {
                    const double t1 = now_seconds();
                    OpProfile::Entry& e = profile_.at("barrier wait");
                    ++e.count;
                    e.seconds += t1 - t0;
                    t0 = t1;
                }
            }
            p.next_chunk = &chunks_[i * per_node];
            compute_node(nodes[i], p);
            if (std::getenv("EMBER_DUMP") && nth == 1 && nodes[i]->name[0]) {  // DEBUG-TEMP
                const Tensor* t = nodes[i];
                std::string f = std::string("/tmp/dump/") + t->name + ".bin";
                if (FILE* fp = std::fopen(f.c_str(), "wb")) {
                    for (int64_t r = 0; r < t->n_rows(); ++r) {
                        const size_t es = t->type == DType::I32 ? 4 : 4;
                        int64_t i1 = r % t->ne[1], i2 = (r / t->ne[1]) % t->ne[2];
                        const uint8_t* rowp = (const uint8_t*)t->data + i1 * t->nb[1] + i2 * t->nb[2];
                        std::fwrite(rowp, es, (size_t)t->ne[0], fp);
                    }
                    std::fclose(fp);
                }
            }
            if (timed) {
                OpProfile::Entry& e = profile_.at(profile_key(nodes[i]));
                ++e.count;
                e.seconds += now_seconds() - t0;
            }
        }
    });
    return stop_at.load() == kNever;
}

}  // namespace ember
