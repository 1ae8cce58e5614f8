// Decoding Q5_K on its re-encoded four-row groups (cpu/kernels.h) with 512-bit registers,
// a pair of 32-groups per register: the layout keeps groups 2q and 2q + 1 side by side
// (X X Y Y W from byte 64 + 160q), so X and Y are one 64-byte load each for the pair and
// W, which holds both groups' top bits of steps 2 and 3, is broadcast to both halves.
// Included by kernels_avx512.cpp (AVX-512 F/BW/VL and VNNI), and by
// native/tests/test_kquant512_emulated.cpp, which runs it on any x86-64 CPU through
// SIMDe's AVX-512 emulation against the AVX2 decode, bit for bit.
//
// Per group the integers are q4_k_group_col's (kernels_avx2.cpp): the four steps' maddubs
// against the activations with dword k broadcast per 128-bit half, added in int16 (eight
// products of at most 31 x 128), one madd by the group's scale vector into int32 lanes
// (here as one vpdpwssd). The pair's two 256-bit halves are added at the end of the
// super-block into the [r0..r3 lo | r0..r3 hi] lanes AVX2 accumulates; integer sums are
// exact, so the float operations after them, the AVX2 kernel's, give the same bits.
// Per pair of groups: ten logic operations for the values (AVX2: twelve per group).
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "cpu/kpanel_x86.h"
#include "quant/types.h"

namespace ember {
namespace {

// The per-super-block frame the Q4_K and Q5_K decodes share (kBlock: the four rows'
// bytes of one super-block in the four-row layout). Begin: each stream's block address,
// its prefetch, its group scales (bytes 4g + r: row r's scale of 32-group g, groups 0-3
// broadcast to sc_lo and 4-7 to sc_hi) and mins (mb), and a zeroed sum.
template <int S, size_t kBlock>
__attribute__((always_inline)) inline void k_block_begin512(const uint8_t* const* w, int64_t i,
                                                            const uint8_t* (&gb)[S], __m512i (&sc_lo)[S],
                                                            __m512i (&sc_hi)[S], __m512i (&isum)[S],
                                                            __m256i (&mb)[S]) {
    for (int j = 0; j < S; ++j) {  // the streams side by side, block by block
        gb[j] = w[j] + (size_t)i * kBlock;
        prefetch_ahead(gb[j], gb[j] + kBlock);
        __m256i scb;
        q4_k_group_scales(gb[j], &scb, &mb[j]);
        sc_lo[j] = _mm512_broadcast_i32x4(_mm256_castsi256_si128(scb));
        sc_hi[j] = _mm512_broadcast_i32x4(_mm256_extracti128_si256(scb, 1));
        isum[j] = _mm512_setzero_si512();
    }
}
// End: the sum's two 256-bit halves added into AVX2's [r0..r3 lo | r0..r3 hi] lanes, the
// min term, and AVX2's float operations on them (so the same bits)
template <int S>
__attribute__((always_inline)) inline void k_block_end512(const uint8_t* const (&gb)[S], const __m512i (&isum)[S],
                                                          const __m256i (&mb)[S], const Q4KPre& p,
                                                          const float& d, __m256 (&acc)[S]) {
    const __m256 da = _mm256_broadcast_ss(&d);
    for (int j = 0; j < S; ++j) {
        // lo + hi, 0 (kpanel_x86.h: Q4_K's and Q5_K's whole 32-groups)
        const __m256i is = whole32(_mm256_add_epi32(_mm512_castsi512_si256(isum[j]), _mm512_extracti64x4_epi64(isum[j], 1)));
        const __m256i im = whole32(q4_k_min_sum(mb[j], p.amin));
        acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), _mm256_mul_ps(f16x4_twice(gb[j]), da), acc[j]);
        acc[j] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(im), _mm256_mul_ps(f16x4_twice(gb[j] + 8), da), acc[j]);
    }
}

// The scale bytes 4g + r of groups 4h .. 4h + 3 (a 128-bit lane of q4_k_group_scales' scb,
// broadcast) into int16 words [s0 s0 s1 s1 s2 s2 s3 s3], high bytes zero: group 2q in the
// two low 128-bit lanes, 2q + 1 in the two high ones; the table's index is q % 2
struct Q5KScalePick512 {
    int8_t idx[2][64];
    constexpr Q5KScalePick512() : idx() {
        for (int h = 0; h < 2; ++h)
            for (int l = 0; l < 64; ++l) {
                const int g = 2 * h + l / 32, r = (l % 16) / 4;
                idx[h][l] = (l % 2) ? (int8_t)-128 : (int8_t)(4 * g + r);
            }
    }
};
constexpr Q5KScalePick512 kQ5KScalePick512{};

template <int S>
void q5_k_decode512(int64_t nbk, const uint8_t* const* w, const BlockQ8_K* y, const Q4KPre* pre,
                    float* const* s) {
    const __m512i m31 = _mm512_set1_epi8(31), m7 = _mm512_set1_epi8(7), m18 = _mm512_set1_epi8(0x18);
    // W's bits 4 h + 0..1 (step 2) and 4 h + 2..3 (step 3) of group 2q + h to bits 3-4 of
    // the same byte: 32-bit rotates by 3 | -1 and 1 | -3 (the low | high 256 bits)
    const __m512i rot2 = _mm512_setr_epi32(3, 3, 3, 3, 3, 3, 3, 3, 31, 31, 31, 31, 31, 31, 31, 31);
    const __m512i rot3 = _mm512_setr_epi32(1, 1, 1, 1, 1, 1, 1, 1, 29, 29, 29, 29, 29, 29, 29, 29);
    __m256 acc[S];
    for (int j = 0; j < S; ++j) acc[j] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nbk; ++i) {
        const uint8_t* gb[S];
        __m512i sc_lo[S], sc_hi[S], isum[S];  // groups 0-3 | 4-7
        __m256i mb[S];
        k_block_begin512<S, 4 * sizeof(BlockQ5_K)>(w, i, gb, sc_lo, sc_hi, isum, mb);
#pragma GCC unroll 4
        for (int q = 0; q < 4; ++q) {
            const __m512i av = _mm512_loadu_si512(y[i].qs + 64 * q);  // groups 2q, 2q + 1
            const __m512i st0 = dword_bcast512<0>(av), st1 = dword_bcast512<1>(av);
            const __m512i st2 = dword_bcast512<2>(av), st3 = dword_bcast512<3>(av);
            const __m512i pick = _mm512_loadu_si512(kQ5KScalePick512.idx[q % 2]);
            for (int j = 0; j < S; ++j) {
                const uint8_t* v = gb[j] + 64 + 160 * q;
                const __m512i X = _mm512_loadu_si512(v), Y = _mm512_loadu_si512(v + 64);
                const __m512i W = _mm512_broadcast_i64x4(loadu256(v + 128));
                // steps 2 and 3: the top bits of X / Y shifted down, | the rotated W bits
                // (A | B & C as vpternlog 0xf8)
                const __m512i s2 = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(X, 5), m7),
                                                             _mm512_rolv_epi32(W, rot2), m18, 0xf8);
                const __m512i s3 = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(Y, 5), m7),
                                                             _mm512_rolv_epi32(W, rot3), m18, 0xf8);
                __m512i t = _mm512_maddubs_epi16(_mm512_and_si512(X, m31), st0);
                t = _mm512_add_epi16(t, _mm512_maddubs_epi16(_mm512_and_si512(Y, m31), st1));
                t = _mm512_add_epi16(t, _mm512_maddubs_epi16(s2, st2));
                t = _mm512_add_epi16(t, _mm512_maddubs_epi16(s3, st3));
                const __m512i sv = _mm512_shuffle_epi8(q < 2 ? sc_lo[j] : sc_hi[j], pick);
                isum[j] = _mm512_dpwssd_epi32(isum[j], t, sv);  // madd by the scales and add: the same sums
            }
        }
        k_block_end512<S>(gb, isum, mb, pre[i], y[i].d, acc);
    }
    store_rows4<S>(acc, s);
}

}  // namespace
}  // namespace ember
