// Decoding Q6_K on its re-encoded four-row groups (cpu/kernels.h) with 512-bit registers,
// a pair of 32-groups per register: the layout keeps groups 2q and 2q + 1 side by side
// (X X Y Y Z Z from byte 72 + 192q), so each of X, Y, Z is one 64-byte load for the pair.
// Included by kernels_avx512.cpp (AVX-512 F/BW/VL and VNNI), and by
// native/tests/test_kquant512_emulated.cpp, which runs it on any x86-64 CPU through SIMDe's
// AVX-512 emulation against the AVX2 decode, bit for bit.
//
// Per group the integers are q6_k_group_col's (kernels_avx2.cpp): the steps' maddubs
// against the activations with dword k broadcast per 128-bit half, the -32 taken off in
// int16 (32 x the covered activation sums; the wrapped int16 sum ends on the exact sum
// over eight products, |(u - 32) a| <= 32 * 127 each), one madd by the group's scale
// vector, added into int32 lanes (here as one vpdpwssd). The pair's two 256-bit halves
// are added at the end of the super-block into the [r0..r3 lo | r0..r3 hi] lanes AVX2
// accumulates; integer sums are exact, so the float operations after them, the AVX2
// kernel's, give the same bits.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "cpu/kpanel_x86.h"
#include "quant/types.h"

namespace ember {
namespace {

// pair q's -32 terms (Q6KPre, kpanel_x86.h) as q6_k_group_acts gives them for the two
// groups side by side: one 16-byte load and one vpermd, shared by the streams
inline __m512i q6_k_off512(const Q6KPre& p, int q) {
    const __m512i lanes = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    return _mm512_permutexvar_epi32(lanes, _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p.off[2 * q]))));
}

// The scale bytes of pair q (sixteen at 8 + 16q: byte 8e + 4h + r is row r's scale
// 2(2q + e) + h) into the high byte of int16 words [s0 s0 s1 s1 s2 s2 s3 s3] for 128-bit
// lane 2e + h; srai 8 then sign-extends them.
struct Q6KScalePick512 {
    int8_t idx[64];
    constexpr Q6KScalePick512() : idx() {
        for (int l = 0; l < 64; ++l) {
            const int lane = l / 16, r = (l % 16) / 4;
            idx[l] = (l % 2) ? (int8_t)(8 * (lane / 2) + 4 * (lane % 2) + r) : (int8_t)-128;
        }
    }
};
constexpr Q6KScalePick512 kQ6KScalePick512{};

template <int S>
void q6_k_decode512(int64_t nbk, const uint8_t* const* w, const BlockQ8_K* y, const Q6KPre* pre,
                    float* const* s) {
    const __m512i m63 = _mm512_set1_epi8(63), m3 = _mm512_set1_epi8(3);
    const __m512i m12 = _mm512_set1_epi8(12), m48 = _mm512_set1_epi8(48);
    const __m512i pick = _mm512_loadu_si512(kQ6KScalePick512.idx);
    __m256 acc[S];
    for (int j = 0; j < S; ++j) acc[j] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nbk; ++i) {
        const Q6KPre& p = pre[i];
        const uint8_t* gb[S];
        __m512i isum[S];
        for (int j = 0; j < S; ++j) {  // the streams side by side, block by block
            gb[j] = w[j] + (size_t)i * kQ6Group;
            prefetch_ahead(gb[j], gb[j] + kQ6Group);
            isum[j] = _mm512_setzero_si512();
        }
#pragma GCC unroll 4
        for (int q = 0; q < 4; ++q) {
            const __m512i av = _mm512_loadu_si512(y[i].qs + 64 * q);  // groups 2q, 2q + 1
            const __m512i st0 = dword_bcast512<0>(av), st1 = dword_bcast512<1>(av);
            const __m512i st2 = dword_bcast512<2>(av), st3 = dword_bcast512<3>(av);
            const __m512i off = q6_k_off512(p, q);
            for (int j = 0; j < S; ++j) {
                const uint8_t* v = gb[j] + 72 + 192 * q;
                const __m512i X = _mm512_loadu_si512(v), Y = _mm512_loadu_si512(v + 64);
                const __m512i Z = _mm512_loadu_si512(v + 128);
                // step 2: X's top bits | Y's << 2 | Z's << 4 (A | B & C as vpternlog 0xf8)
                const __m512i s2 = _mm512_ternarylogic_epi32(
                    _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(X, 6), m3), _mm512_srli_epi16(Y, 4),
                                              m12, 0xf8),
                    _mm512_srli_epi16(Z, 2), m48, 0xf8);
                __m512i t = _mm512_maddubs_epi16(_mm512_and_si512(X, m63), st0);
                t = _mm512_add_epi16(t, _mm512_maddubs_epi16(_mm512_and_si512(Y, m63), st1));
                t = _mm512_add_epi16(t, _mm512_maddubs_epi16(s2, st2));
                t = _mm512_add_epi16(t, _mm512_maddubs_epi16(_mm512_and_si512(Z, m63), st3));
                t = _mm512_sub_epi16(t, off);
                const __m512i sb =
                    _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(gb[j] + 8 + 16 * q)));
                isum[j] = _mm512_dpwssd_epi32(isum[j], t, _mm512_srai_epi16(_mm512_shuffle_epi8(sb, pick), 8));
            }
        }
        const __m256 da = _mm256_broadcast_ss(&y[i].d);
        for (int j = 0; j < S; ++j) {
            const __m256i is = _mm256_add_epi32(_mm512_castsi512_si256(isum[j]), _mm512_extracti64x4_epi64(isum[j], 1));
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), _mm256_mul_ps(f16x4_twice(gb[j]), da), acc[j]);
        }
    }
    store_rows4<S>(acc, s);
}

}  // namespace
}  // namespace ember
