// Decoding's read rate, kernel by kernel. A stack of same-shaped matrices larger than the
// last-level cache, in the loader's four-row layout on 2 MiB pages, is streamed by the
// engine's thread pool three ways, alternated within each round:
//   probe   the read-rate probe's loops over the same bytes, each thread a contiguous share,
//           the fastest of its read patterns (what `ember bench` divides by: its decode bound);
//   read    the probe's loop in the products' split (each thread its share of every
//           matrix, a barrier after each): what the split and the barriers cost;
//   decode  one-token products (mul_mat with its decoding claims, a barrier after each
//           matrix, as in a decode graph): what the type's decode kernel reaches.
// decode / probe is the share of the bound a kernel can reach with nothing else in the
// graph; the gap between it and `ember bench --profile`'s matrices is the model's (small
// ops, barriers, smaller matrices). Machines are shared and drift by a third over minutes,
// so compare the per-round ratios, not rates from different runs.
//   build/bench_decode_stream [TYPES [M K [MATRICES [THREADS [ROUNDS [PREFETCH]]]]]]
//   TYPES: comma-separated type names (default Q4_0,Q4_K,Q5_K,Q6_K,Q8_0); EMBER_ISA and
//   EMBER_AMX apply as in the engine. PREFETCH: comma-separated software prefetch distances
//   in bytes (0: none), each a decode row alternated within the rounds (default: the one the
//   engine picks for this CPU, kernels.h decode_prefetch()).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "core/tensor.h"
#include "core/threadpool.h"
#include "cpu/kernels.h"
#include "cpu/ops.h"
#include "quant/types.h"

using namespace ember;

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

const TypeTraits* type_named(const std::string& name) {
    for (uint32_t i = 0; i < 64; ++i) {
        const TypeTraits* t = type_traits(i);
        if (t && t->name && name == t->name) return t;
    }
    return nullptr;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
}

void run_type(const TypeTraits* tt, DType t, int64_t M, int64_t K, int L, ThreadPool& pool, int rounds, Isa isa,
              const std::vector<size_t>& ahead) {
    if (K % tt->block_size || !tt->quantize || M % 4) {
        std::printf("%-6s skipped (no reference quantizer, or K not a multiple of its block)\n", tt->name);
        return;
    }
    const size_t wrow = (size_t)row_bytes(*tt, K), mbytes = wrow * (size_t)M;
    const size_t huge = 2u << 20, per = (mbytes + huge - 1) / huge * huge;
    std::unique_ptr<uint8_t[]> raw(new uint8_t[per * (size_t)L + huge]);  // untouched until laid out
    uint8_t* base = reinterpret_cast<uint8_t*>(((uintptr_t)raw.get() + huge - 1) & ~(uintptr_t)(huge - 1));
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    madvise(base, per * (size_t)L, MADV_HUGEPAGE);  // as the loader's copy
#endif
    std::vector<uint8_t> q(mbytes);
    std::mt19937 rng(1);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> f((size_t)K);
    for (int64_t r = 0; r < M; ++r) {
        for (auto& x : f) x = 0.05f * nd(rng);
        tt->quantize(f.data(), q.data() + (size_t)r * wrow, K);
    }
    const DotKernels& k = dot_kernels(t, isa);
    const bool x4 = four_row_layout_read(t, isa);
    std::vector<Tensor> ws;
    std::vector<RowGroups> groups((size_t)L);  // sized once: the tensors point into it
    for (int l = 0; l < L; ++l) {
        uint8_t* dst = base + per * (size_t)l;
        Tensor w = tensor_2d(t, K, M, q.data());
        if (x4) {
            four_row_layout(w, dst, 0, M);
            groups[(size_t)l] = RowGroups{dst, nullptr};
            w.extra = &groups[(size_t)l];
        } else {
            std::memcpy(dst, q.data(), mbytes);
            w.data = dst;
        }
        ws.push_back(w);
    }
    const TypeTraits* at = type_traits((uint32_t)k.act_type);
    std::vector<uint8_t> act((size_t)row_bytes(*at, K));
    for (auto& x : f) x = nd(rng);
    if (k.convert) k.convert(f.data(), act.data(), K);
    else std::memcpy(act.data(), f.data(), act.size());
    std::vector<float> out((size_t)M);
    const Tensor xa = tensor_2d(k.act_type, K, 1, act.data());
    const Tensor o = tensor_2d(DType::F32, M, 1, out.data());
    const int nth = pool.size();
    std::vector<std::atomic<int64_t>> chunks((size_t)L * (size_t)nth);
    std::atomic<uint64_t> sink{0};
    const double total = (double)mbytes * L;
    const size_t ndist = ahead.size();
    std::vector<double> probe, read;
    std::vector<std::vector<double>> decode(ndist), ratio(ndist);
    for (int round = 0; round <= rounds; ++round) {  // round 0 warms up and is not counted
        std::vector<double> s(2 + ndist, 0.0);
        s[0] = 1e30;
        // mode 0 once per read pattern (the probe's rate is its fastest), then 1, then 2 + j:
        // decoding with the j-th prefetch distance
        for (int step = 0; step < kReadPatterns + 1 + (int)ndist; ++step) {
            const int mode = std::max(0, step - kReadPatterns + 1);
            const ReadPattern how = kReadPattern[std::min(step, kReadPatterns - 1)];
            if (mode >= 2) set_decode_prefetch(ahead[(size_t)mode - 2]);
            for (auto& c : chunks) c.store(0, std::memory_order_relaxed);
            const double t0 = now();
            pool.run([&](int ith, int n) {
                uint64_t h = 0;
                if (mode == 0) {  // the probe: a contiguous share of the matrices laid end to end
                    const size_t from = (size_t)(total / n * ith), to = ith + 1 == n ? (size_t)total : (size_t)(total / n * (ith + 1));
                    for (int l = 0; l < L; ++l) {
                        const size_t b = std::max(from, mbytes * (size_t)l), e = std::min(to, mbytes * (size_t)(l + 1));
                        if (b < e) h ^= read_bytes(base + per * (size_t)l + (b - mbytes * (size_t)l), e - b, how);
                    }
                } else {
                    for (int l = 0; l < L; ++l) {
                        if (mode == 1) {
                            const size_t share = mbytes / (size_t)n, b = share * (size_t)ith;
                            h ^= read_bytes(base + per * (size_t)l + b, ith + 1 == n ? mbytes - b : share);
                        } else {
                            mul_mat(&ws[(size_t)l], &xa, &o, ith, n, isa, &chunks[(size_t)l * (size_t)n]);
                        }
                        pool.barrier();
                    }
                }
                sink.fetch_xor(h, std::memory_order_relaxed);
            });
            s[mode] = mode ? now() - t0 : std::min(s[0], now() - t0);
        }
        if (round == 0) continue;
        probe.push_back(total / s[0] * 1e-9);
        read.push_back(total / s[1] * 1e-9);
        for (size_t j = 0; j < ndist; ++j) {
            decode[j].push_back(total / s[2 + j] * 1e-9);
            ratio[j].push_back(s[0] / s[2 + j]);
        }
    }
    for (size_t j = 0; j < ndist; ++j) {
        const std::vector<double>& r = ratio[j];
        std::printf("%-6s %-7s %8zu %8.1f %8.1f %8.1f %9.1f%%   (%.1f%%..%.1f%%)\n", tt->name, isa_name(isa), ahead[j],
                    median(probe), median(read), median(decode[j]), 100.0 * median(r),
                    100.0 * *std::min_element(r.begin(), r.end()), 100.0 * *std::max_element(r.begin(), r.end()));
    }
    if (sink.load() == 1) std::printf("\n");  // keeps the reads
}

}  // namespace

int main(int argc, char** argv) {
    const std::string types = argc > 1 ? argv[1] : "Q4_0,Q4_K,Q5_K,Q6_K,Q8_0";
    const int64_t M = argc > 3 ? std::atoll(argv[2]) : 8192;  // a Llama-3.2-1B FFN matrix
    const int64_t K = argc > 3 ? std::atoll(argv[3]) : 2048;
    const int L = argc > 4 ? std::atoi(argv[4]) : 48;  // 48 of them: 450-650 MiB for the 4-8 bit types
    const int threads = argc > 5 ? std::atoi(argv[5]) : 2;
    const int rounds = argc > 6 ? std::atoi(argv[6]) : 5;
    // decode prefetch distances to alternate within each round (bytes, 0 = none; default:
    // the one this CPU gets, decode_prefetch())
    std::vector<size_t> ahead;
    for (const char* p = argc > 7 ? argv[7] : ""; *p;) {
        char* end = nullptr;
        ahead.push_back((size_t)std::strtoull(p, &end, 10));
        p = *end == ',' ? end + 1 : end;
        if (end == p && *p) break;
    }
    if (ahead.empty()) ahead.push_back(decode_prefetch());
    const Isa isa = active_isa();
    ThreadPool pool(threads);
    std::printf("%d x (%lld x %lld), %d thread(s), %d rounds; GB/s medians, decode / probe per round\n", L,
                (long long)M, (long long)K, threads, rounds);
    std::printf("%-6s %-7s %8s %8s %8s %8s %10s\n", "type", "isa", "prefetch", "probe", "read", "decode", "decode/probe");
    size_t at = 0;
    while (at <= types.size()) {
        const size_t comma = std::min(types.find(',', at), types.size());
        const std::string name = types.substr(at, comma - at);
        at = comma + 1;
        if (name.empty()) continue;
        const TypeTraits* tt = type_named(name);
        if (!tt) {
            std::fprintf(stderr, "unknown type %s\n", name.c_str());
            return 2;
        }
        for (uint32_t i = 0; i < 64; ++i)
            if (type_traits(i) == tt) run_type(tt, (DType)i, M, K, L, pool, rounds, isa, ahead);
    }
    return 0;
}
