// The read-rate probe's loops (ops.h: read_bytes), which CpuBackend::read_rate runs on the
// context's threads for the decode bound.
#include <cstdint>
#include <cstring>

#if defined(__SSE2__) || defined(_M_X64)
#include <emmintrin.h>
#elif defined(__aarch64__) || defined(_M_ARM64)
#include <arm_neon.h>
#endif

#include "cpu/ops.h"

namespace ember {

// Reads n bytes at p once, front to back, four independent 16-byte streams per 64-byte
// line (the baseline vector loads of each architecture: enough to keep up with DRAM on
// one core), and returns a value made from all of them, so that no load is dropped. A
// software prefetch runs 2 KiB ahead, as in the decode kernels (cpu/kpanel_x86.h): on a
// Sapphire Rapids-class Xeon it read 17-18 GB/s on one thread and 33-34 on two, where
// without it (and numpy's reduce) read 16 and 31.
namespace {

// S runs of n / S bytes each, read side by side 64 bytes at a time (each with a software
// prefetch 2 KiB ahead where Prefetch), then the tail.
template <int S, bool Prefetch>
uint64_t read_runs(const uint8_t* p, size_t n) {
    const size_t run = n / S / 64 * 64;
    size_t i = 0;
    uint64_t h = 0;
#if defined(__SSE2__) || defined(_M_X64)
    __m128i acc[S][2];
    for (int s = 0; s < S; ++s) acc[s][0] = acc[s][1] = _mm_setzero_si128();
    for (; i < run; i += 64)
        for (int s = 0; s < S; ++s) {
            const uint8_t* q = p + run * (size_t)s + i;
            if (Prefetch) _mm_prefetch(reinterpret_cast<const char*>(q + 2048), _MM_HINT_T0);
            const __m128i x0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
            const __m128i x1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 16));
            const __m128i x2 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 32));
            const __m128i x3 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 48));
            acc[s][0] = _mm_xor_si128(acc[s][0], _mm_xor_si128(x0, x1));
            acc[s][1] = _mm_xor_si128(acc[s][1], _mm_xor_si128(x2, x3));
        }
    __m128i x = _mm_setzero_si128();
    for (int s = 0; s < S; ++s) x = _mm_xor_si128(x, _mm_xor_si128(acc[s][0], acc[s][1]));
    uint64_t lanes[2];
    _mm_storeu_si128(reinterpret_cast<__m128i*>(lanes), x);
    h = lanes[0] ^ lanes[1];
#elif defined(__aarch64__) || defined(_M_ARM64)
    uint64x2_t acc[S][2];
    for (int s = 0; s < S; ++s) acc[s][0] = acc[s][1] = vdupq_n_u64(0);
    for (; i < run; i += 64)
        for (int s = 0; s < S; ++s) {
            const uint8_t* q = p + run * (size_t)s + i;
#if defined(__GNUC__)
            if (Prefetch) __builtin_prefetch(q + 2048);
#endif
            const uint64_t* w = reinterpret_cast<const uint64_t*>(q);
            acc[s][0] = veorq_u64(acc[s][0], veorq_u64(vld1q_u64(w), vld1q_u64(w + 2)));
            acc[s][1] = veorq_u64(acc[s][1], veorq_u64(vld1q_u64(w + 4), vld1q_u64(w + 6)));
        }
    uint64x2_t x = vdupq_n_u64(0);
    for (int s = 0; s < S; ++s) x = veorq_u64(x, veorq_u64(acc[s][0], acc[s][1]));
    h = vgetq_lane_u64(x, 0) ^ vgetq_lane_u64(x, 1);
#else
    for (; i < run; i += 64)
        for (int s = 0; s < S; ++s)
            for (int k = 0; k < 64; k += 8) {
                uint64_t v;
                std::memcpy(&v, p + run * (size_t)s + i + k, 8);
                h ^= v;
            }
#endif
    for (size_t t = run * S; t < n; ++t) h ^= p[t];
    return h;
}

}  // namespace

uint64_t read_bytes(const uint8_t* p, size_t n, ReadPattern how) {
    const bool f = how.prefetch;
    switch (how.streams) {
        case 4: return f ? read_runs<4, true>(p, n) : read_runs<4, false>(p, n);
        case 3: return f ? read_runs<3, true>(p, n) : read_runs<3, false>(p, n);
        case 2: return f ? read_runs<2, true>(p, n) : read_runs<2, false>(p, n);
        default: return f ? read_runs<1, true>(p, n) : read_runs<1, false>(p, n);
    }
}

}  // namespace ember
