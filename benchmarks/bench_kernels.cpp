// Kernel throughput, one thread: the tile (prefill) and one-column (decode) matrix
// products for every weight type at every ISA level this CPU has, in GOP/s (2 x M x K x
// N operations over the best of several timed runs). Built with the native tests:
//     build/bench_kernels [M K N [TYPE [REPS]]]   (TYPE: one type name, e.g. F16)
// Numbers are for comparing kernels with each other on one machine in one run; the
// end-to-end comparison with llama.cpp is benchmarks/compare_llamacpp.py.
#include <chrono>
#include <functional>
#include <memory>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "core/fp16.h"
#include "core/tensor.h"
#include "cpu/kernels.h"
#include "quant/types.h"

using namespace ember;

namespace {

double best_seconds(int reps, const std::function<void()>& f) {
    double best = 1e30;
    for (int r = 0; r < reps; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        f();
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (s < best) best = s;
    }
    return best;
}

}  // namespace

int main(int argc, char** argv) {
    const int64_t M = argc > 3 ? std::atoll(argv[1]) : 1536;
    const int64_t K = argc > 3 ? std::atoll(argv[2]) : 576;
    const int64_t N = argc > 3 ? std::atoll(argv[3]) : 128;
    const char* only = argc > 4 ? argv[4] : nullptr;  // one type, for perf stat / perf record
    const int reps_fast = argc > 5 ? std::atoi(argv[5]) : 5;
    std::mt19937 rng(1);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::printf("M=%lld K=%lld N=%lld, one thread, GOP/s\n", (long long)M, (long long)K, (long long)N);
    std::printf("%-6s %-7s %10s %10s %10s %10s\n", "type", "isa", "tile", "one-col", "x4 tile", "x4 col");
    const DType types[] = {DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q5_0,
                           DType::Q5_1, DType::Q8_0, DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K,
                           DType::Q6_K, DType::MXFP4, DType::IQ4_NL, DType::IQ4_XS};
    for (DType t : types) {
        const TypeTraits* tt = type_traits((uint32_t)t);
        if (K % tt->block_size || (only && std::strcmp(only, tt->name) != 0)) continue;
        const size_t wrow = (size_t)row_bytes(*tt, K);
        std::vector<uint8_t> wbuf(wrow * (size_t)M);
        std::vector<float> f((size_t)K);
        for (int64_t r = 0; r < M; ++r) {
            for (auto& x : f) x = 0.05f * nd(rng);
            if (tt->quantize) tt->quantize(f.data(), wbuf.data() + r * wrow, K);
            else if (t == DType::F32) std::memcpy(wbuf.data() + r * wrow, f.data(), wrow);
            else if (t != DType::F16 && t != DType::BF16)  // no reference quantizer: random blocks
                for (size_t b = 0; b < wrow; ++b) wbuf[r * wrow + b] = (uint8_t)(rng() & 0x7f);
            else
                for (int64_t i = 0; i < K; ++i) {
                    const uint16_t h = fp32_to_fp16(f[(size_t)i]);  // F16 and BF16: finite 16-bit values
                    std::memcpy(wbuf.data() + r * wrow + 2 * i, &h, 2);
                }
        }
        for (Isa isa : {Isa::SCALAR, Isa::AVX2, Isa::AVX512, Isa::NEON}) {
            if (!isa_supported(isa) || (isa != Isa::SCALAR && !dot_kernels_exact(t, isa))) continue;
            const DotKernels& k = dot_kernels(t, isa);
            const TypeTraits* at = type_traits((uint32_t)k.act_type);
            const size_t arow = (size_t)row_bytes(*at, K);
            std::vector<uint8_t> act(arow * (size_t)N);
            for (int64_t c = 0; c < N; ++c) {
                for (auto& x : f) x = nd(rng);
                if (k.convert) k.convert(f.data(), act.data() + c * arow, K);
                else std::memcpy(act.data() + c * arow, f.data(), arow);
            }
            std::vector<float> out((size_t)(M * N));
            const Tensor w = tensor_2d(t, K, M, wbuf.data());
            Tensor x = tensor_2d(k.act_type, K, N, act.data());
            Tensor o = tensor_2d(DType::F32, M, N, out.data());
            if (only && isa == Isa::SCALAR) continue;
            const int reps = isa == Isa::SCALAR ? 1 : reps_fast;
            const double s_tile = best_seconds(reps, [&] { mul_mat(&w, &x, &o, 0, 1, isa); });
            x.ne[1] = o.ne[1] = 1;
            const double s_one = best_seconds(reps * 20, [&] { mul_mat(&w, &x, &o, 0, 1, isa); });
            // the same products on the four-row layout (RowGroups), where this level reads it
            double x4_tile = 0.0, x4_one = 0.0;
            if (four_row_layout_read(t, isa)) {
                // as the loader's copy: 2 MiB pages where the system gives them (EMBER_BENCH_4K=1: not),
                // asked for before the first touch
                const size_t huge = 2u << 20, bytes = (wbuf.size() + huge - 1) / huge * huge;
                std::unique_ptr<uint8_t[]> wx4(new uint8_t[bytes + huge]);  // not value-initialized: untouched
                uint8_t* x4p = reinterpret_cast<uint8_t*>(((uintptr_t)wx4.get() + huge - 1) & ~(uintptr_t)(huge - 1));
#if defined(__linux__) && defined(MADV_HUGEPAGE)
                const char* small = std::getenv("EMBER_BENCH_4K");
                if (!(small && *small == '1')) madvise(x4p, bytes, MADV_HUGEPAGE);
#endif
                four_row_layout(w, x4p, 0, M);
                Tensor w4 = w;
                const RowGroups groups{x4p, nullptr};
                w4.extra = &groups;
                x.ne[1] = o.ne[1] = N;
                x4_tile = 2e-9 * M * K * N / best_seconds(reps, [&] { mul_mat(&w4, &x, &o, 0, 1, isa); });
                x.ne[1] = o.ne[1] = 1;
                x4_one = 2e-9 * M * K / best_seconds(reps * 20, [&] { mul_mat(&w4, &x, &o, 0, 1, isa); });
            }
            std::printf("%-6s %-7s %10.1f %10.1f %10.1f %10.1f\n", tt->name, isa_name(isa), 2e-9 * M * K * N / s_tile,
                        2e-9 * M * K / s_one, x4_tile, x4_one);
        }
    }
    return 0;
}
