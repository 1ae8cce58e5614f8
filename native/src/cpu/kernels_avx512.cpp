// AVX-512 kernels (F, BW, VL, VNNI). The level's table starts as a copy of AVX2's, so a type
// without a 512-bit kernel here runs the AVX2 one; what is here replaces the prefill tiles,
// where the int8 multiply-adds are the bottleneck. The integer sums are the AVX2 tiles'
// (exact), and the float operations after them are the same ones in the same order, so a
// column gets the same bits from a tile here as from the AVX2 decode path: one-token
// decoding, which reads memory rather than computes, keeps the AVX2 kernels, on the
// four-row copy (RowGroups) as at the AVX2 level. The tiles read that copy too: its
// blocks are unpacked into the same panels as the rows as they are (for the re-encoded
// Q4_0, Q4_K and Q5_K straight from their steps), so the bits do not change. Where the
// CPU and OS have AMX, the prefill tiles run on the tile unit instead (AmxK, AmxLegacy,
// gemm_amx below), with the same integers and float operations.
#include "cpu/kernels.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512VNNI__)

// GCC 12 flags its own _mm512_undefined_* placeholders (inside the 256-bit casts and
// extracts) as (maybe-)uninitialized once inlined here: a known false positive.
#if defined(__GNUC__) && !defined(__clang__)
#  pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#  pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <vector>

#include "core/thread_state.h"
#include "cpu/kernels_q5k512.h"
#include "cpu/kernels_q6k512.h"
#include "cpu/kpanel_x86.h"
#include "quant/types.h"

namespace ember {

namespace {

KernelTable avx2_table;  // filled once by register_avx512_kernels, before any use

// Four unpacked rows x C columns of Q8_K, the AVX2 ktile4x's results bit for bit. Per
// super-block each (row, column) accumulates its 256 products in one int32 register with
// VNNI (maddubs pairs times the int16 scales, vpdpwssd), 64 elements per instruction,
// and only then folds them into ktile4x's [r0..r3 lo | r0..r3 hi] lanes. Q3_K's and
// Q6_K's signed values are kept as u = q + off (offset_panel): sum sc (u - off) a =
// sum sc u a - off sum sc bsum, the second term taken out in int32 once per (row,
// column) and super-block, from the activation's sixteen-element sums (where a
// subtraction per (row, column) pair and 64 elements made these tiles 25-30% slower
// than AVX2's). The same integers, so the same bits.
template <class B>
constexpr int kPanelOffset = std::is_same<B, BlockQ3_K>::value ? 4 : std::is_same<B, BlockQ6_K>::value ? 32 : 0;

// After unpack_panel, for the offset types: the values as u = q + off, and in `mn` (unused
// by them) off * the sixteen scales, even groups first, then odd: the order in which a
// madd with the permuted activation sums (even_odd()) leaves [even sums | odd sums] in the
// 128-bit halves, i.e. the tile's lo and hi lanes.
template <class B>
void offset_panel(KPanel& p) {
    constexpr int kOff = kPanelOffset<B>;
    for (int k = 0; k < QK_K; k += 64)
        _mm512_storeu_si512(p.q + k, _mm512_add_epi8(_mm512_loadu_si512(p.q + k), _mm512_set1_epi8((char)kOff)));
    int16_t m[16];
    for (int j = 0; j < 16; ++j) m[j % 2 * 8 + j / 2] = (int16_t)(kOff * p.scv[j / 2][j % 2 * 8]);
    std::memcpy(p.mn, m, sizeof m);
}
// Vector constants are functions, never namespace-scope objects: a global __m256i / __m512i
// is built by a static initializer compiled for AVX-512, which runs when the library loads,
// on every CPU, and faults where AVX-512 is missing (tests/test_isa_avx512.py checks the
// library for such initializers).
inline __m256i even_odd() { return _mm256_setr_epi16(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15); }

template <class B, int C>
void ktile512(const KPanel* panel, int64_t nbk, const uint8_t* a, size_t as, float* s, size_t lds) {
    constexpr bool kOffset = kPanelOffset<B> != 0;  // else unsigned values with mins
    __m256 acc[C];
    for (int c = 0; c < C; ++c) acc[c] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nbk; ++i) {
        const KPanel* P[4] = {&panel[i], &panel[nbk + i], &panel[2 * nbk + i], &panel[3 * nbk + i]};
        const BlockQ8_K* y[C];
        for (int c = 0; c < C; ++c) y[c] = reinterpret_cast<const BlockQ8_K*>(a + c * as) + i;
        __m512i isum[4][C];
        for (int r = 0; r < 4; ++r)
            for (int c = 0; c < C; ++c) isum[r][c] = _mm512_setzero_si512();
        for (int h = 0; h < 4; ++h) {  // 64 elements: groups of 32 numbered 2h and 2h + 1
            __m512i q[4], sc[4];
            for (int r = 0; r < 4; ++r) {
                q[r] = _mm512_loadu_si512(P[r]->q + 64 * h);
                sc[r] = _mm512_loadu_si512(P[r]->scv[2 * h]);  // scv[2h] and scv[2h + 1]
            }
            for (int c = 0; c < C; ++c) {
                const __m512i av = _mm512_loadu_si512(y[c]->qs + 64 * h);
                for (int r = 0; r < 4; ++r)
                    isum[r][c] = _mm512_dpwssd_epi32(isum[r][c], _mm512_maddubs_epi16(q[r], av), sc[r]);
            }
        }
        // 128-bit lanes 0 and 2 hold first halves of 32-groups ("lo"), 1 and 3 second halves
        const __m256 d = _mm256_setr_ps(P[0]->d, P[1]->d, P[2]->d, P[3]->d, P[0]->d, P[1]->d, P[2]->d, P[3]->d);
        const __m256 dm = _mm256_setr_ps(P[0]->dmin, P[1]->dmin, P[2]->dmin, P[3]->dmin, P[0]->dmin, P[1]->dmin,
                                         P[2]->dmin, P[3]->dmin);
        for (int c = 0; c < C; ++c) {
            __m256i v[4];
            for (int r = 0; r < 4; ++r)
                v[r] = _mm256_add_epi32(_mm512_castsi512_si256(isum[r][c]), _mm512_extracti64x4_epi64(isum[r][c], 1));
            __m256i is = hadd4(v[0], v[1], v[2], v[3]);
            const __m256 da = _mm256_set1_ps(y[c]->d);
            __m256i bs = loadu256(y[c]->bsums);
            if constexpr (kOffset) bs = _mm256_permutexvar_epi16(even_odd(), bs);
            const __m256i mins =
                hadd4(_mm256_madd_epi16(loadu256(P[0]->mn), bs), _mm256_madd_epi16(loadu256(P[1]->mn), bs),
                      _mm256_madd_epi16(loadu256(P[2]->mn), bs), _mm256_madd_epi16(loadu256(P[3]->mn), bs));
            if constexpr (kOffset) is = _mm256_sub_epi32(is, mins);  // the offsets' term
            if constexpr (kKWhole32<B>) is = whole32(is);
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), _mm256_mul_ps(d, da), acc[c]);
            if constexpr (!kOffset)
                acc[c] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(kKWhole32<B> ? whole32(mins) : mins), _mm256_mul_ps(dm, da),
                                          acc[c]);
        }
    }
    for (int c = 0; c < C; ++c)
        _mm_storeu_ps(s + c * lds, _mm_add_ps(_mm256_castps256_ps128(acc[c]), _mm256_extractf128_ps(acc[c], 1)));
}

// 16 x 16 dwords transposed in place: r[j] lane i <- r[i] lane j
inline void transpose16x16_epi32(__m512i r[16]) {
    __m512i t[16];
    for (int i = 0; i < 8; ++i) {
        t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; ++i) {
        r[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
        r[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
        r[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        r[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
    // r[4i + e], 128-bit lane L: rows 4i..4i+3 of element 4L + e
    for (int e = 0; e < 4; ++e) {
        const __m512i x0 = _mm512_shuffle_i32x4(r[e], r[4 + e], 0x88), x1 = _mm512_shuffle_i32x4(r[e], r[4 + e], 0xdd);
        const __m512i y0 = _mm512_shuffle_i32x4(r[8 + e], r[12 + e], 0x88),
                      y1 = _mm512_shuffle_i32x4(r[8 + e], r[12 + e], 0xdd);
        t[e] = _mm512_shuffle_i32x4(x0, y0, 0x88);
        t[8 + e] = _mm512_shuffle_i32x4(x0, y0, 0xdd);
        t[4 + e] = _mm512_shuffle_i32x4(x1, y1, 0x88);
        t[12 + e] = _mm512_shuffle_i32x4(x1, y1, 0xdd);
    }
    for (int j = 0; j < 16; ++j) r[j] = t[j];
}

// ---- K-quant prefill without AMX: sixteen rows in the lanes -------------------------
//
// ktile512 spends a maddubs and a vpdpwssd on every 64 products of one (row, column) and
// then folds lanes. Here the lanes are sixteen rows: their unpacked panels are
// transposed once per call (Panel16), so that one 64-byte load holds four consecutive
// values of each of 16 rows, and one vpdpbusd against a column's four activations,
// broadcast by the instruction from the Q8_K block itself ({1to16}), adds 64 products
// into their rows' lanes. A 16-element sub-block takes four of them, then its scale (a
// vector: each row's own) multiplies the sums (kCols16Fits below; Q4_K and Q5_K: a whole
// 32-group's eight, kKWhole32). Four columns share each panel load. The integers are
// ktile512's: per row and column, the scaled sums over the first and over the second
// halves of the 32-groups ("lo", "hi"; Q4_K and Q5_K: lo + hi and zero), the min terms
// over sub-blocks 0-7 and 8-15 (min types), or the offsets' terms over the even and the
// odd sub-blocks (Q3_K, Q6_K); and the float operations are its own, lane by lane, so
// the bits are the same (and decode's).
//
// (The previous form put sixteen columns in the lanes and broadcast the weights: on
// Zen 4 a separate vpbroadcastd per vpdpbusd, and the columns transposed again for every
// 64-row call, held it at 245-250 GOP/s, one thread, against 470 for vpdpbusd alone.)
struct alignas(64) Panel16 {  // sixteen rows, one super-block
    uint8_t q[16][4][64];     // [sub-block j][g][4 r + b]: row r's value 16 j + 4 g + b
    int32_t sc[16][16];       // [j][r]: row r's scale of sub-block j, as the tile multiplies it
    int32_t mn[8][16];        // [k][r]: row r's mn words 2k and 2k + 1 as one pair (kKWhole32:
                              // of the 32-groups 2k and 2k + 1, k < 4)
    float d[16], dmin[16];
};

// How a sub-block's sum meets its scale: a vpdpwssd against (scale, 0) where the sum fits
// in int16 (|a| <= 128): Q2_K's and Q3_K's sixteen-element sums (u <= 7) do; Q6_K's (u <=
// 63) do not: vpmulld. Q4_K and Q5_K scale each 32-group's whole sum (kKWhole32,
// kpanel_x86.h; |.| <= 32 x 31 x 128: vpmulld), once where their sixteen-element halves
// took a multiply each. (On Zen 4 every 512-bit multiply-pipe instruction costs about the
// same: vpdpbusd, vpdpwssd, vpmulld; docs/DESIGN.md counts the tile.) Their min terms take
// the 32-groups' activation sums (cols_sums32, once per call) against pairs of groups'
// mins: four vpdpwssd per super-block and column instead of eight over the
// sixteen-element sums (m_g b_2g + m_g b_2g+1 = m_g (b_2g + b_2g+1): the same integers).
template <class B>
constexpr bool kCols16Fits = std::is_same<B, BlockQ2_K>::value || std::is_same<B, BlockQ3_K>::value;

// Sixteen unpacked rows' panels of one super-block (after offset_panel for the offset
// types) as a Panel16, the scales in the form the tile's scale step takes
template <class B>
void make_panel16(const KPanel* const p[16], Panel16& out) {
    for (int part = 0; part < 4; ++part) {  // values 64 part..: dword e is (j, g) = (4 part + e / 4, e % 4)
        __m512i r[16];
        for (int k = 0; k < 16; ++k) r[k] = _mm512_loadu_si512(p[k]->q + 64 * part);
        transpose16x16_epi32(r);
        for (int e = 0; e < 16; ++e) _mm512_store_si512(out.q[0][0] + 64 * (16 * part + e), r[e]);
    }
    for (int k = 0; k < 16; ++k) {
        for (int j = 0; j < 16; ++j) {
            const int sc = p[k]->scv[j >> 1][8 * (j & 1)];
            out.sc[j][k] = kCols16Fits<B> ? (sc & 0xffff) : sc;
        }
        if constexpr (kKWhole32<B>)
            for (int m = 0; m < 4; ++m)
                out.mn[m][k] = (int32_t)(uint16_t)p[k]->mn[4 * m] | (int32_t)((uint32_t)(uint16_t)p[k]->mn[4 * m + 2] << 16);
        else
            for (int m = 0; m < 8; ++m) std::memcpy(&out.mn[m][k], p[k]->mn + 2 * m, 4);
        out.d[k] = p[k]->d;
        out.dmin[k] = p[k]->dmin;
    }
}

// acc + u (unsigned bytes) x the four signed bytes at s, broadcast by the instruction's
// own memory operand (GCC loads a set1 with a separate vpbroadcastd, a shuffle uop on
// Zen 4); and the same for int16 pairs
inline __m512i dpbusd_bcast(__m512i acc, __m512i u, const void* s) {
#if defined(__GNUC__)
    __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(u), "m"(*static_cast<const int32_t*>(s)));
    return acc;
#else
    int32_t v;
    std::memcpy(&v, s, 4);
    return _mm512_dpbusd_epi32(acc, u, _mm512_set1_epi32(v));
#endif
}
inline __m512i dpwssd_bcast(__m512i acc, __m512i a, const void* b) {
#if defined(__GNUC__)
    __asm__("vpdpwssd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(a), "m"(*static_cast<const int32_t*>(b)));
    return acc;
#else
    int32_t v;
    std::memcpy(&v, b, 4);
    return _mm512_dpwssd_epi32(acc, a, _mm512_set1_epi32(v));
#endif
}

// The pairs of a column's sixteen-element sums that meet the panel's mn words: the min
// types' natural order (sub-blocks 2k, 2k + 1: the Q8_K block's bsums as they are), or
// offset_panel's even-then-odd one, made by cols_pairs once per call
template <class B>
constexpr bool kPairsPermuted = kPanelOffset<B> != 0;
inline void cols_pairs(int64_t nbk, int nc, const uint8_t* A, size_t as, int16_t (*out)[16]) {
    for (int c = 0; c < nc; ++c)
        for (int64_t i = 0; i < nbk; ++i) {
            const BlockQ8_K& y = reinterpret_cast<const BlockQ8_K*>(A + c * as)[i];
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[c * nbk + i]),
                                _mm256_permutexvar_epi16(even_odd(), loadu256(y.bsums)));
        }
}

// A Q8_K block's eight 32-group sums A_g = b_2g + b_2g+1 as int16 words, in order
// (|A_g| <= 32 x 128): the min terms' other factor for Q4_K and Q5_K
inline __m128i group32_sums(const BlockQ8_K& y) {
    return _mm256_cvtepi32_epi16(_mm256_madd_epi16(loadu256(y.bsums), _mm256_set1_epi16(1)));
}

// kKWhole32's activation sums: each column's group32_sums, in the first eight words of
// its row of out
inline void cols_sums32(int64_t nbk, int nc, const uint8_t* A, size_t as, int16_t (*out)[16]) {
    for (int c = 0; c < nc; ++c)
        for (int64_t i = 0; i < nbk; ++i)
            _mm_storeu_si128(reinterpret_cast<__m128i*>(out[c * nbk + i]),
                             group32_sums(reinterpret_cast<const BlockQ8_K*>(A + c * as)[i]));
}

// Sixteen rows (p16: their nbk super-blocks) x C columns from A (pairs: their cols_pairs
// for the offset types, cols_sums32 for kKWhole32), written to s (column c's sixteen rows
// at s + c lds)
template <class B, int C>
void ktile16(const Panel16* p16, int64_t nbk, const uint8_t* A, size_t as, const int16_t (*pairs)[16], float* s,
             size_t lds) {
    constexpr bool kOffset = kPanelOffset<B> != 0;
    __m512 acc[C][2];
    for (int c = 0; c < C; ++c) acc[c][0] = acc[c][1] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nbk; ++i) {
        const Panel16& p = p16[i];
        const BlockQ8_K* y[C];
        for (int c = 0; c < C; ++c) y[c] = reinterpret_cast<const BlockQ8_K*>(A + c * as) + i;
        __m512i is[C][2];
        for (int c = 0; c < C; ++c) is[c][0] = is[c][1] = _mm512_setzero_si512();
        if constexpr (kKWhole32<B>) {
            // lo + hi as integers, hi zero (kpanel_x86.h): one scale multiply per 32-group, on
            // its whole sum (|.| <= 32 x 31 x 128: vpmulld); the halves' sums as two chains
            for (int jj = 0; jj < 8; ++jj) {
                __m512i raw[C][2];
#pragma GCC unroll 2
                for (int h = 0; h < 2; ++h) {
                    const int j = 2 * jj + h;
                    __m512i w[4];
                    for (int g = 0; g < 4; ++g) w[g] = _mm512_load_si512(p.q[j][g]);
                    for (int c = 0; c < C; ++c) {
                        raw[c][h] = _mm512_setzero_si512();
                        for (int g = 0; g < 4; ++g) raw[c][h] = dpbusd_bcast(raw[c][h], w[g], y[c]->qs + 16 * j + 4 * g);
                    }
                }
                const __m512i sc = _mm512_load_si512(p.sc[2 * jj]);  // the group's scale, in both halves' rows
                for (int c = 0; c < C; ++c)
                    is[c][0] = _mm512_add_epi32(is[c][0], _mm512_mullo_epi32(_mm512_add_epi32(raw[c][0], raw[c][1]), sc));
            }
        } else
        for (int jj = 0; jj < 8; ++jj)
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {  // sub-block j: lo (h = 0) or hi of 32-group jj
            const int j = 2 * jj + h;
            __m512i w[4];
            for (int g = 0; g < 4; ++g) w[g] = _mm512_load_si512(p.q[j][g]);
            const __m512i sc = _mm512_load_si512(p.sc[j]);
            for (int c = 0; c < C; ++c) {
                __m512i raw = _mm512_setzero_si512();
                for (int g = 0; g < 4; ++g) raw = dpbusd_bcast(raw, w[g], y[c]->qs + 16 * j + 4 * g);
                if constexpr (kCols16Fits<B>) {  // sc x the sum as int16 (high word x 0)
                    is[c][h] = _mm512_dpwssd_epi32(is[c][h], raw, sc);
                } else {
                    is[c][h] = _mm512_add_epi32(is[c][h], _mm512_mullo_epi32(raw, sc));
                }
            }
        }
        __m512i mins[C][2];
        for (int c = 0; c < C; ++c) mins[c][0] = mins[c][1] = _mm512_setzero_si512();
        constexpr int kPairs = kKWhole32<B> ? 4 : 8;  // per super-block: half to mins[.][0], half to [1]
        for (int k = 0; k < kPairs; ++k) {
            const __m512i m = _mm512_load_si512(p.mn[k]);
            for (int c = 0; c < C; ++c) {
                const int16_t* pr = kPairsPermuted<B> || kKWhole32<B> ? pairs[c * nbk + i] : y[c]->bsums;
                const int h = kKWhole32<B> ? 0 : 2 * k / kPairs;  // whole 32-groups: all in lo
                mins[c][h] = dpwssd_bcast(mins[c][h], m, pr + 2 * k);
            }
        }
        const __m512 d = _mm512_load_ps(p.d), dmin = _mm512_load_ps(p.dmin);
        for (int c = 0; c < C; ++c) {
            const __m512 da = _mm512_set1_ps(y[c]->d), dd = _mm512_mul_ps(d, da);
            for (int h = 0; h < 2; ++h) {
                if constexpr (kOffset) is[c][h] = _mm512_sub_epi32(is[c][h], mins[c][h]);  // the offsets' term
                acc[c][h] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is[c][h]), dd, acc[c][h]);
            }
            if constexpr (!kOffset) {
                const __m512 dm = _mm512_mul_ps(dmin, da);
                for (int h = 0; h < 2; ++h) acc[c][h] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(mins[c][h]), dm, acc[c][h]);
            }
        }
    }
    for (int c = 0; c < C; ++c) _mm512_storeu_ps(s + c * lds, _mm512_add_ps(acc[c][0], acc[c][1]));  // lo + hi
}

// Columns [c, nc) against the blocks16 sixteen-row blocks of p16, four columns at a time
// sharing each panel load, then one
template <class B>
void gemm_rows16(const Panel16* p16, int64_t nbk, int blocks16, const uint8_t* A, size_t as, int c, int nc,
                 const int16_t (*pairs)[16], float* s, size_t lds) {
    for (; c + 4 <= nc; c += 4)
        for (int b = 0; b < blocks16; ++b)
            ktile16<B, 4>(p16 + b * nbk, nbk, A + c * as, as, pairs ? pairs + c * nbk : nullptr, s + c * lds + 16 * b, lds);
    for (; c < nc; ++c)
        for (int b = 0; b < blocks16; ++b)
            ktile16<B, 1>(p16 + b * nbk, nbk, A + c * as, as, pairs ? pairs + c * nbk : nullptr, s + c * lds + 16 * b, lds);
}

// The four rows' panels of super-block i of a four-row group (four_row_layout) that
// starts at w4: blocks of the plain interleave unpacked as they are; Q4_K's re-encoded
// groups straight from their steps (Q5_K and Q6_K: kpanel_x86.h). Step k of a 32-group holds row r's values
// 4k..4k+3 in dword r of the low 128 bits and 16+4k..19+4k in dword 4 + r; a 64-byte load
// of the group has steps 0 and 2 in its low nibbles, 1 and 3 in its high ones, so one
// two-source dword permute gathers two rows' 32 values in element order. Q6_K's through
// the shared unpack_panels_q6_k_x4, which the AVX2 prefill runs as well.
template <class B>
void unpack_panels_x4(const uint8_t* w4, int64_t i, KPanel* const p[4]) {
    if constexpr (std::is_same<B, BlockQ6_K>::value) {
        unpack_panels_q6_k_x4(w4 + (size_t)i * kQ6Group, p);
    } else if constexpr (std::is_same<B, BlockQ5_K>::value) {
        unpack_panels_q5_k_x4(w4 + (size_t)i * 4 * sizeof(B), p);
    } else if constexpr (!std::is_same<B, BlockQ4_K>::value) {
        for (int r = 0; r < 4; ++r) unpack_panel(reinterpret_cast<const B*>(w4)[4 * i + r], *p[r]);
    } else {
        const uint8_t* gb = w4 + (size_t)i * 4 * sizeof(B);
        const __m512i m4 = _mm512_set1_epi8(0x0f);
        const __m512i rows01 = _mm512_setr_epi32(0, 16, 8, 24, 4, 20, 12, 28, 1, 17, 9, 25, 5, 21, 13, 29);
        const __m512i rows23 = _mm512_add_epi32(rows01, _mm512_set1_epi32(2));
        for (int g = 0; g < 8; ++g) {
            const __m512i v = _mm512_loadu_si512(gb + 64 + 64 * g);
            const __m512i lo = _mm512_and_si512(v, m4), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
            const __m512i r01 = _mm512_permutex2var_epi32(lo, rows01, hi);
            const __m512i r23 = _mm512_permutex2var_epi32(lo, rows23, hi);
            store32(p[0]->q + 32 * g, _mm512_castsi512_si256(r01));
            store32(p[1]->q + 32 * g, _mm512_extracti64x4_epi64(r01, 1));
            store32(p[2]->q + 32 * g, _mm512_castsi512_si256(r23));
            store32(p[3]->q + 32 * g, _mm512_extracti64x4_epi64(r23, 1));
        }
        for (int r = 0; r < 4; ++r) {
            int sc[16], mn[16];
            for (int g = 0; g < 8; ++g) {  // j = 4g + r: low nibbles at 16 + j, top bits at 48..
                const int j = 4 * g + r;
                const int top = (gb[48 + j % 16] >> (4 * (j / 16))) & 0x0f;
                sc[2 * g] = sc[2 * g + 1] = (gb[16 + j] & 0x0f) | ((top & 3) << 4);
                mn[2 * g] = mn[2 * g + 1] = (gb[16 + j] >> 4) | ((top >> 2) << 4);
            }
            put_scales(*p[r], sc, mn);
            uint16_t d, dmin;
            std::memcpy(&d, gb + 2 * r, 2);
            std::memcpy(&dmin, gb + 8 + 2 * r, 2);
            p[r]->d = f16(d);
            p[r]->dmin = f16(dmin);
        }
    }
}

// Decoding Q4_K on its re-encoded four-row groups (four_row_layout) with VNNI at 256 bits.
// Each step k is one vpdpbusd of the unsigned nibbles against the activations' dword k
// broadcast in each 128-bit lane (made in the kernel from the Q8_K block, shared by the
// streams), where AVX2's q4_k_group_col spends a maddubs and an add; the four are chained
// in int32. A lane's sum then covers row r's sixteen values of its half of the 32-group,
// |sum| <= 16 x 15 x 128 < 2^15, so it is also that int32's low int16 word, and one
// vpdpwssd by the row's scale in that word (the high word zero) adds sc x sum to the
// super-block's sum: q4_k_group_col's integers in its lanes, and its float operations,
// so the same bits.
//   12 vector operations a group and stream, 5 of them multiplies. The 512-bit kernel
// this replaced (a 32-group per register, two maddubs against paired step broadcasts, an
// add and a vpdpwssd) took 8 at 512 bits, 6 multiply halves, and decoded slower: in
// cache 117-137 GOP/s against 170 (bench_kernels 256 x 4096, one thread, Zen 4); from
// memory 56-70% of the probe against 57-73%, ahead in each of five alternated runs
// (bench_decode_stream, one and two threads). The same form for Q5_K and Q6_K (two
// two-step chains each, the int16 bound) was 20-30% faster in cache there too but read
// no faster from memory (behind in 4 of 5 runs by 1-6 points), so those keep their
// 512-bit kernels (kernels_q5k512.h, kernels_q6k512.h).
template <int S>
void q4_k_decode_vnni(int64_t nbk, const uint8_t* const* w, const BlockQ8_K* y, const Q4KPre* pre,
                      float* const* s) {
    constexpr size_t kBlock = 4 * sizeof(BlockQ4_K);
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m256 acc[S];
    for (int j = 0; j < S; ++j) acc[j] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nbk; ++i) {
        const uint8_t* gb[S];
        __m256i sc_lo[S], sc_hi[S], isum[S], mb[S];
#pragma GCC unroll 4
        for (int j = 0; j < S; ++j) {
            gb[j] = w[j] + (size_t)i * kBlock;
            prefetch_ahead(gb[j], gb[j] + kBlock);
            __m256i scb;
            q4_k_group_scales(gb[j], &scb, &mb[j]);
            sc_lo[j] = _mm256_permute2x128_si256(scb, scb, 0x00);
            sc_hi[j] = _mm256_permute2x128_si256(scb, scb, 0x11);
            isum[j] = _mm256_setzero_si256();
        }
#pragma GCC unroll 8
        for (int g = 0; g < 8; ++g) {
            const __m256i av = loadu256(y[i].qs + 32 * g);
            const __m256i st[4] = {_mm256_shuffle_epi32(av, 0x00), _mm256_shuffle_epi32(av, 0x55),
                                   _mm256_shuffle_epi32(av, 0xaa), _mm256_shuffle_epi32(av, 0xff)};
            // byte 4 (g % 4) + r of the scales' lane into the low byte of dword r, the rest zero
            const int b0 = (int)(0x80808000u + 4u * (unsigned)(g % 4));
            const __m256i pick = _mm256_setr_epi32(b0, b0 + 1, b0 + 2, b0 + 3, b0, b0 + 1, b0 + 2, b0 + 3);
#pragma GCC unroll 4
            for (int j = 0; j < S; ++j) {
                const __m256i sv = _mm256_shuffle_epi8(g < 4 ? sc_lo[j] : sc_hi[j], pick);
                const uint8_t* v = gb[j] + 64 + 64 * g;
                const __m256i v01 = loadu256(v), v23 = loadu256(v + 32);
                __m256i t = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_and_si256(v01, m4), st[0]);
                t = _mm256_dpbusd_epi32(t, _mm256_and_si256(_mm256_srli_epi16(v01, 4), m4), st[1]);
                t = _mm256_dpbusd_epi32(t, _mm256_and_si256(v23, m4), st[2]);
                t = _mm256_dpbusd_epi32(t, _mm256_and_si256(_mm256_srli_epi16(v23, 4), m4), st[3]);
                isum[j] = _mm256_dpwssd_epi32(isum[j], t, sv);
            }
        }
        const __m256 da = _mm256_broadcast_ss(&y[i].d);
#pragma GCC unroll 4
        for (int j = 0; j < S; ++j) {  // lo + hi, 0 (kpanel_x86.h)
            const __m256i im = whole32(q4_k_min_sum(mb[j], pre[i].amin));
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(whole32(isum[j])), _mm256_mul_ps(f16x4_twice(gb[j]), da), acc[j]);
            acc[j] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(im), _mm256_mul_ps(f16x4_twice(gb[j] + 8), da), acc[j]);
        }
    }
    store_rows4<S>(acc, s);
}

// Not on Windows: the OS side is untested there (amx_supported() says no), and GCC's
// tileloadd wrapper casts the stride to long, 32 bits under LLP64, which mingw-w64's
// assembler refuses as an index register.
#if defined(__AMX_TILE__) && defined(__AMX_INT8__) && !defined(_WIN32)
#  define EMBER_AMX 1
#endif

#ifdef EMBER_AMX
// ---- AMX: the K-quant prefill tiles on the tile unit -----------------------------------
//
// The 512-bit tiles above end each super-block with, per (row, column), two exact int32
// sums: "lo" over the first sixteen elements of every 32-group and "hi" over the second,
// of sc16 * q * a (sc16 the sixteen-element scale, q the signed value), and for the types
// with mins two more (groups 0-3 and 4-7, min * activation group sums); then the same
// float operations per super-block. Here the tile unit computes those integers:
//   - the activations are the A tiles as they lie in their Q8_K rows (sixteen columns x
//     64 bytes of one super-block, the row stride apart: nothing is repacked);
//   - the weights w = sc16 * q (int16, |w| <= 4096) are the B tiles, split as w = 256 h
//     + l (l unsigned, h signed) so that each is an 8-bit operand (TDPBSUD for l,
//     TDPBSSD for h) and lo = L + 256 H exactly; a B tile holds sixteen rows' four-element
//     quads (row r in dword r of each tile row), with the other half's elements zero, so
//     the lo and hi sums land in tiles of their own;
//   - the min sums come from the activation's sixteen-element sums (bsums) as in the
//     512-bit tiles.
// Sixteen rows by sixteen columns per step; the float operations run lane by lane on the
// stored C tiles, in the 512-bit tiles' order, so the bits are theirs.
template <class B>
constexpr bool kAmxType = std::is_same<B, BlockQ3_K>::value || std::is_same<B, BlockQ4_K>::value ||
                          std::is_same<B, BlockQ5_K>::value || std::is_same<B, BlockQ6_K>::value;

// One super-block of sixteen rows, B-tile ready: b[c][kind] for 64-element chunk c
// (elements 64c..64c+63), kind 0 l-lo, 1 l-hi, 2 h-lo, 3 h-hi; tile row j holds elements
// 64c + 4j..4j+3 of row r in dword r.
struct alignas(64) AmxPanel {
    uint8_t b[4][4][16][64];
    float d[16], dmin[16];
    int32_t mp[4][16];  // row r's min pair (groups 2p, 2p + 1) as two int16 (Q4_K, Q5_K)
};

struct alignas(64) AmxTileConfig {
    uint8_t palette = 1, start_row = 0;
    uint8_t reserved[14] = {};
    uint16_t colsb[16] = {};
    uint8_t rows[16] = {};
};

// Sixteen rows' unpacked panels of one super-block (p[r], before offset_panel) into an
// AmxPanel
template <class B>
void amx_panel(const KPanel* const p[16], AmxPanel& out) {
    alignas(64) uint8_t lv[2][4][16][64];  // [l, h][chunk][row][64 bytes]
    for (int r = 0; r < 16; ++r) {
        const KPanel& P = *p[r];
        for (int c = 0; c < 4; ++c) {
            __m256i l8[2], h8[2];
            for (int s = 0; s < 2; ++s) {
                const int g = 2 * c + s;  // 32-group
                const __m512i q = _mm512_cvtepi8_epi16(loadu256(P.q + 32 * g));
                const __m512i sc = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16(P.scv[g][0])),
                                                      _mm256_set1_epi16(P.scv[g][8]), 1);
                const __m512i w = _mm512_mullo_epi16(q, sc);
                l8[s] = _mm512_cvtepi16_epi8(w);
                h8[s] = _mm512_cvtepi16_epi8(_mm512_srai_epi16(w, 8));
            }
            _mm512_store_si512(lv[0][c][r], _mm512_inserti64x4(_mm512_castsi256_si512(l8[0]), l8[1], 1));
            _mm512_store_si512(lv[1][c][r], _mm512_inserti64x4(_mm512_castsi256_si512(h8[0]), h8[1], 1));
        }
        out.d[r] = P.d;
        out.dmin[r] = P.dmin;
        for (int q = 0; q < 4; ++q)
            out.mp[q][r] = (int32_t)((uint32_t)(uint16_t)P.mn[4 * q] | ((uint32_t)(uint16_t)P.mn[4 * q + 2] << 16));
    }
    const __m512i zero = _mm512_setzero_si512();
    for (int k = 0; k < 2; ++k)
        for (int c = 0; c < 4; ++c) {
            __m512i v[16];
            for (int r = 0; r < 16; ++r) v[r] = _mm512_load_si512(lv[k][c][r]);
            transpose16x16_epi32(v);  // v[j]: dword j (elements 4j..4j+3 of the chunk) of each row
            for (int j = 0; j < 16; ++j) {
                const bool lo = j % 8 < 4;  // elements 0-15 / 32-47 of the chunk: first halves of 32-groups
                _mm512_store_si512(out.b[c][2 * k][j], lo ? v[j] : zero);
                _mm512_store_si512(out.b[c][2 * k + 1][j], lo ? zero : v[j]);
            }
        }
}

// The four C tiles of one step (L lo, L hi, H lo, H hi), as stored
struct alignas(64) AmxC {
    int32_t c[4][16][16];
};

// C tiles 0-3, A tile 4, B tiles 5-7; every tile 16 rows of 64 bytes
inline void amx_configure() {
    AmxTileConfig cfg;
    for (int t = 0; t < 8; ++t) {
        cfg.colsb[t] = 64;
        cfg.rows[t] = 16;
    }
    _tile_loadconfig(&cfg);
}

// sums of super-block i for the sixteen columns at a (stride as) against panel pb
inline void amx_step(const AmxPanel& pb, const uint8_t* a, size_t as, AmxC& out) {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (int c = 0; c < 4; ++c) {
        _tile_loadd(4, a + 64 * c, (long)as);
        _tile_loadd(5, pb.b[c][0], 64);
        _tile_loadd(6, pb.b[c][1], 64);
        _tile_dpbsud(0, 4, 5);
        _tile_loadd(7, pb.b[c][2], 64);
        _tile_dpbsud(1, 4, 6);
        _tile_loadd(5, pb.b[c][3], 64);
        _tile_dpbssd(2, 4, 7);
        _tile_dpbssd(3, 4, 5);
    }
    _tile_stored(0, out.c[0], 64);
    _tile_stored(1, out.c[1], 64);
    _tile_stored(2, out.c[2], 64);
    _tile_stored(3, out.c[3], 64);
}

// the activation's 32-group sums A_g of the sixteen columns' blocks at y0 (`as` apart) as
// int16 pairs: ap[m][p] = (A_2p, A_2p+1), the min terms' other factor
inline void amx_min_pairs(const uint8_t* y0, size_t as, int32_t (*ap)[4]) {
    for (int m = 0; m < 16; ++m)
        _mm_storeu_si128(reinterpret_cast<__m128i*>(ap[m]),
                         group32_sums(*reinterpret_cast<const BlockQ8_K*>(y0 + m * as)));
}

// What the float work of a K-quant step needs of its sixteen columns' super-block i: their
// scales and min pairs
struct alignas(64) AmxKCols {
    float d[16];
    int32_t ap[16][4];
};

// the float operations of ktile512 for one super-block of sixteen columns (y: their
// scales and min pairs), lanes = the sixteen rows; acc: [column][lo, hi]
template <class B>
inline void amx_epilogue(const AmxPanel& pb, const AmxC& cs, const AmxKCols& y, __m512 (*acc)[2]) {
    constexpr bool kMins = kPanelOffset<B> == 0;
    // held in registers: the stores to acc (a may_alias vector type) would otherwise
    // make the compiler load them again for every column
    const __m512 d = _mm512_load_ps(pb.d), dmin = _mm512_load_ps(pb.dmin);
    const __m512i mp0 = _mm512_load_si512(pb.mp[0]), mp1 = _mm512_load_si512(pb.mp[1]),
                  mp2 = _mm512_load_si512(pb.mp[2]), mp3 = _mm512_load_si512(pb.mp[3]);
    for (int m = 0; m < 16; ++m) {
        const __m512 da = _mm512_set1_ps(y.d[m]);
        __m512i lo = _mm512_add_epi32(_mm512_load_si512(cs.c[0][m]), _mm512_slli_epi32(_mm512_load_si512(cs.c[2][m]), 8));
        __m512i hi = _mm512_add_epi32(_mm512_load_si512(cs.c[1][m]), _mm512_slli_epi32(_mm512_load_si512(cs.c[3][m]), 8));
        if constexpr (kKWhole32<B>) {  // lo + hi, 0 (kpanel_x86.h)
            lo = _mm512_add_epi32(lo, hi);
            hi = _mm512_setzero_si512();
        }
        const __m512 dd = _mm512_mul_ps(d, da);
        __m512 alo = _mm512_fmadd_ps(_mm512_cvtepi32_ps(lo), dd, acc[m][0]);
        __m512 ahi = _mm512_fmadd_ps(_mm512_cvtepi32_ps(hi), dd, acc[m][1]);
        if constexpr (kMins) {
            __m512i mlo = _mm512_add_epi32(_mm512_madd_epi16(mp0, _mm512_set1_epi32(y.ap[m][0])),
                                           _mm512_madd_epi16(mp1, _mm512_set1_epi32(y.ap[m][1])));
            __m512i mhi = _mm512_add_epi32(_mm512_madd_epi16(mp2, _mm512_set1_epi32(y.ap[m][2])),
                                           _mm512_madd_epi16(mp3, _mm512_set1_epi32(y.ap[m][3])));
            if constexpr (kKWhole32<B>) {
                mlo = _mm512_add_epi32(mlo, mhi);
                mhi = _mm512_setzero_si512();
            }
            const __m512 dm = _mm512_mul_ps(dmin, da);
            alo = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(mlo), dm, alo);
            ahi = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(mhi), dm, ahi);
        }
        acc[m][0] = alo;
        acc[m][1] = ahi;
    }
}

// Super-block i of rows 16 rb .. 16 rb + 15 of the call's weights (the four-row copy when
// X4, else the rows as they are) into an AmxPanel
template <class B, bool X4>
void amx_fill(const uint8_t* W, size_t ws, int rb, int64_t i, AmxPanel& out) {
    KPanel tmp[16];
    const KPanel* p[16];
    for (int g = 0; g < 4; ++g) {
        const int r0 = 16 * rb + 4 * g;
        if constexpr (X4) {
            KPanel* const q[4] = {&tmp[4 * g], &tmp[4 * g + 1], &tmp[4 * g + 2], &tmp[4 * g + 3]};
            unpack_panels_x4<B>(W + (size_t)r0 * ws, i, q);
        } else {
            for (int r = 0; r < 4; ++r) unpack_panel(reinterpret_cast<const B*>(W + (size_t)(r0 + r) * ws)[i], tmp[4 * g + r]);
        }
    }
    for (int r = 0; r < 16; ++r) p[r] = &tmp[r];
    amx_panel<B>(p, out);
}

// The tile-unit driver of both kinds of tiles (AmxK: the K-quants; AmxLegacy: the
// 32-element block types): rows 0 .. 16 R - 1 of the call's weights against columns
// 0 .. 16 (nc / 16), s[c * lds + r]. Loops: blocks of K::kBlock weight blocks (their R
// panels made per block, so the scratch stays at R x kBlock panels whatever K is), then
// weight blocks, then sixteen-column blocks (K::prepare: what the float work needs of
// those columns' block, made once for the R row blocks), then the R sixteen-row blocks,
// so an activation block is read from memory once per R row blocks and its tiles
// reloaded from L1; the tile unit's step t + 1 is issued before step t's float work.
template <class K>
void gemm_amx(int64_t nb, const uint8_t* W, size_t ws, int R, int nc, const uint8_t* A, size_t as, float* s,
              size_t lds) {
    using Panel = typename K::Panel;
    using Sums = typename K::Sums;
    using Cols = typename K::Cols;
    const int cb = nc / 16;
    const int64_t kb = nb < K::kBlock ? nb : K::kBlock;
    struct SitePanel;
    struct SiteAcc;
    Panel* const ap = thread_scratch<Panel, SitePanel>((size_t)(R * kb));          // [rb][i - i0]
    __m512* const accv = thread_scratch<__m512, SiteAcc>((size_t)(R * cb * 32));  // [rb][c][lo, hi]
    for (size_t k = 0; k < (size_t)(R * cb * 32); ++k) accv[k] = _mm512_setzero_ps();
    auto acc = reinterpret_cast<__m512(*)[2]>(accv);
    alignas(64) Sums cs[2];
    alignas(64) Cols cols[2];  // the current (block, column block)'s and the one before's
    struct Step {
        int64_t i;
        int c, rb, col;
    } prev{-1, 0, 0, 0};
    int buf = 0, yb = 0;
    int64_t i0 = 0;
    auto finish = [&](const Step& t, const Sums& sums) {
        K::epilogue(ap[(size_t)(t.rb * kb + (t.i - i0))], sums, cols[t.col], acc + (size_t)(t.rb * cb + t.c) * 16);
    };
    for (; i0 < nb; i0 += kb) {
        const int64_t i1 = i0 + kb < nb ? i0 + kb : nb;
        for (int rb = 0; rb < R; ++rb)
            for (int64_t i = i0; i < i1; ++i) K::fill(W, ws, rb, i, ap[(size_t)(rb * kb + (i - i0))]);
        K::configure();
        for (int64_t i = i0; i < i1; ++i)
            for (int c = 0; c < cb; ++c) {
                const uint8_t* y = A + (size_t)(16 * c) * as + (size_t)i * K::kActBytes;
                K::prepare(y, as, cols[yb]);
                for (int rb = 0; rb < R; ++rb) {
                    K::step(ap[(size_t)(rb * kb + (i - i0))], y, as, cs[buf]);
                    if (prev.i >= 0) finish(prev, cs[buf ^ 1]);
                    prev = {i, c, rb, yb};
                    buf ^= 1;
                }
                yb ^= 1;
            }
        if (prev.i >= 0) finish(prev, cs[buf ^ 1]);  // before the next block's panels replace its own
        prev.i = -1;
        _tile_release();
    }
    for (int rb = 0; rb < R; ++rb)
        for (int c = 0; c < 16 * cb; ++c) {
            const __m512* a2 = acc[(size_t)rb * cb * 16 + c];
            _mm512_storeu_ps(s + (size_t)c * lds + 16 * rb, _mm512_add_ps(a2[0], a2[1]));
        }
}

// The K-quants' kind: panels per 8 super-blocks
template <class B, bool X4>
struct AmxK {
    using Panel = AmxPanel;
    using Sums = AmxC;
    using Cols = AmxKCols;
    static constexpr int64_t kBlock = 8;
    static constexpr size_t kActBytes = sizeof(BlockQ8_K);
    static void fill(const uint8_t* W, size_t ws, int rb, int64_t i, Panel& p) { amx_fill<B, X4>(W, ws, rb, i, p); }
    static void configure() { amx_configure(); }
    static void prepare(const uint8_t* y0, size_t as, Cols& c) {
        for (int m = 0; m < 16; ++m) c.d[m] = reinterpret_cast<const BlockQ8_K*>(y0 + m * as)->d;
        if constexpr (kPanelOffset<B> == 0) amx_min_pairs(y0, as, c.ap);
    }
    static void step(const Panel& p, const uint8_t* y0, size_t as, Sums& out) {
        amx_step(p, y0 + offsetof(BlockQ8_K, qs), as, out);
    }
    static void epilogue(const Panel& p, const Sums& sums, const Cols& c, __m512 (*acc)[2]) {
        amx_epilogue<B>(p, sums, c, acc);
    }
};
#endif  // EMBER_AMX

template <class B, DType T, bool X4>
void gemm_k512(int64_t n, int nr, int nc, const void* w, size_t ws, const void* a, size_t as, float* s,
               size_t lds) {
    const DotKernels& avx2 = avx2_table[(int)T];
    if (nc == 1) {  // decoding: the AVX2 path, whose bits the tiles reproduce
        if constexpr (X4 && std::is_same<B, BlockQ6_K>::value) {
            const int64_t nbk = n / QK_K;
            struct Site;
            Q6KPre* const pre = thread_scratch<Q6KPre, Site>((size_t)nbk);
            q6_k_prepare(nbk, static_cast<const BlockQ8_K*>(a), pre);
            const auto group = [&](int g) { return static_cast<const uint8_t*>(w) + (size_t)(4 * g) * ws; };
            const auto kernel = [&](auto streams, auto x, float* const* o) {
                q6_k_decode512<decltype(streams)::value>(nbk, x, static_cast<const BlockQ8_K*>(a), pre, o);
            };
            // three streams everywhere. Zen 4 took two while the activations' -32 terms
            // were vectors (288 bytes a super-block) and fell out of L1 on long rows; with
            // them 64 bytes, three read faster at one thread (bench_decode_stream, one
            // thread, three alternations: 2048 x 8192 90-94% of the probe against two's
            // 82-90%, 8192 x 2048 91-95% against 88-92%) and as fast at two (94-99% both)
            decode_groups<3>(nr / 4, group, s, kernel);
            return;
        }
        if constexpr (X4 && std::is_same<B, BlockQ5_K>::value) {
            const int64_t nbk = n / QK_K;
            struct Site;
            Q4KPre* const pre = thread_scratch<Q4KPre, Site>((size_t)nbk);
            q4_k_prepare(nbk, static_cast<const BlockQ8_K*>(a), pre);
            const auto group = [&](int g) { return static_cast<const uint8_t*>(w) + (size_t)(4 * g) * ws; };
            decode_groups<3>(nr / 4, group, s, [&](auto streams, auto x, float* const* o) {
                q5_k_decode512<decltype(streams)::value>(nbk, x, static_cast<const BlockQ8_K*>(a), pre, o);
            });
            return;
        }
        if constexpr (X4 && std::is_same<B, BlockQ4_K>::value) {
            const int64_t nbk = n / QK_K;
            struct Site;
            Q4KPre* const pre = thread_scratch<Q4KPre, Site>((size_t)nbk);
            q4_k_prepare(nbk, static_cast<const BlockQ8_K*>(a), pre);
            const auto group = [&](int g) { return static_cast<const uint8_t*>(w) + (size_t)(4 * g) * ws; };
            decode_groups<3>(nr / 4, group, s, [&](auto streams, auto x, float* const* o) {
                q4_k_decode_vnni<decltype(streams)::value>(nbk, x, static_cast<const BlockQ8_K*>(a), pre, o);
            });
            return;
        }
        (X4 ? avx2.gemm_x4 : avx2.gemm)(n, nr, nc, w, ws, a, as, s, lds);
        return;
    }
    const int64_t nbk = n / QK_K;
    const uint8_t* W = static_cast<const uint8_t*>(w);
    const uint8_t* A = static_cast<const uint8_t*>(a);
    int c = 0;
#ifdef EMBER_AMX
    // the tile unit, sixteen rows by sixteen columns at a time (the columns past the last
    // sixteen and the calls with other row counts: the tiles below, with the same bits)
    if constexpr (kAmxType<B>) {
        if (nr % 16 == 0 && nc >= 16 && amx_enabled()) {
            gemm_amx<AmxK<B, X4>>(nbk, W, ws, nr / 16, nc, A, as, s, lds);
            c = nc / 16 * 16;
            if (c == nc) return;
        }
    }
#endif
    // The four rows' panels of super-block i of four-row group g
    const auto unpack = [&](int g, int64_t i, KPanel* const p[4]) {
        if constexpr (X4) {  // nr is a multiple of 4: no rows are left over
            unpack_panels_x4<B>(W + (size_t)(4 * g) * ws, i, p);
        } else {
            for (int rr = 0; rr < 4; ++rr) unpack_panel(reinterpret_cast<const B*>(W + (size_t)(4 * g + rr) * ws)[i], *p[rr]);
        }
        if constexpr (kPanelOffset<B> != 0)
            for (int rr = 0; rr < 4; ++rr) offset_panel<B>(*p[rr]);
    };
    // Every sixteen rows of the call unpacked and transposed first (kept in L2), then the
    // columns stream past them four at a time; the four-row groups past the last sixteen
    // rows as unpacked panels, through ktile512.
    const int groups = nr / 4, blocks16 = c < nc ? nr / 16 : 0, rest = groups - 4 * blocks16;
    struct Site16;
    struct Site;
    struct PairsSite;
    Panel16* const p16 = thread_scratch<Panel16, Site16>((size_t)blocks16 * nbk);  // the largest call so far
    KPanel* const panel = thread_scratch<KPanel, Site>((size_t)(4 * rest * nbk));
    for (int b = 0; b < blocks16; ++b)
        for (int64_t i = 0; i < nbk; ++i) {
            KPanel t[16];
            const KPanel* const pt[16] = {&t[0], &t[1], &t[2],  &t[3],  &t[4],  &t[5],  &t[6],  &t[7],
                                          &t[8], &t[9], &t[10], &t[11], &t[12], &t[13], &t[14], &t[15]};
            for (int q = 0; q < 4; ++q) {
                KPanel* const p[4] = {&t[4 * q], &t[4 * q + 1], &t[4 * q + 2], &t[4 * q + 3]};
                unpack(4 * b + q, i, p);
            }
            make_panel16<B>(pt, p16[(size_t)b * nbk + i]);
        }
    for (int g = 0; g < rest; ++g)
        for (int64_t i = 0; i < nbk; ++i) {
            KPanel* const p[4] = {&panel[(size_t)(4 * g * nbk + i)], &panel[(size_t)((4 * g + 1) * nbk + i)],
                                  &panel[(size_t)((4 * g + 2) * nbk + i)], &panel[(size_t)((4 * g + 3) * nbk + i)]};
            unpack(4 * blocks16 + g, i, p);
        }
    if (blocks16) {
        int16_t(*pairs)[16] = nullptr;
        if constexpr (kPairsPermuted<B> || kKWhole32<B>) {
            pairs = thread_scratch<int16_t[16], PairsSite>((size_t)(nc - c) * nbk);
            if constexpr (kKWhole32<B>) cols_sums32(nbk, nc - c, A + c * as, as, pairs);
            else cols_pairs(nbk, nc - c, A + c * as, as, pairs);
        }
        gemm_rows16<B>(p16, nbk, blocks16, A + c * as, as, 0, nc - c, pairs, s + c * lds, lds);
    }
    float* const sr = s + 16 * blocks16;  // the rest's rows
    for (int cc = c; cc + 4 <= nc; cc += 4)
        for (int g = 0; g < rest; ++g)
            ktile512<B, 4>(panel + 4 * g * nbk, nbk, A + cc * as, as, sr + cc * lds + 4 * g, lds);
    for (int cc = c + (nc - c) / 4 * 4; cc < nc; ++cc)
        for (int g = 0; g < rest; ++g)
            ktile512<B, 1>(panel + 4 * g * nbk, nbk, A + cc * as, as, sr + cc * lds + 4 * g, lds);
    for (int r = 4 * groups; r < nr; ++r)
        for (int c = 0; c < nc; ++c) avx2.vec_dot(n, s + c * lds + r, W + r * ws, A + c * as);
}

// ---- legacy 32-element blocks: eight rows per VNNI dot, no fold ----------------------
//
// The AVX2 tiles reduce each block's products to [r0..r3 lo | r0..r3 hi] (lo: elements
// 0-15, hi: 16-31) with horizontal adds, which cost more than the multiplies. Here eight
// rows' weights are laid out so that vpdpbusd, which adds four adjacent byte products
// into a lane, lands every product in its lane at once: in step s (0-3), lane half*8 + r
// holds row r's four bytes of group 4 * half + s (a group is four consecutive elements),
// and the activation block is permuted to match ([group s x8 | group 4 + s x8]). After
// four steps lane r is row r's lo sum and lane 8 + r its hi sum: the same integers as the
// AVX2 fold, then the same float operations, lane by lane.
//   - Signed weights (Q4_0, Q5_0, Q8_0): the activations go in as unsigned a + 128 and
//     128 * (sum of w over the half) comes off afterwards (stored per panel).
//   - Min types (Q4_1, Q5_1): unsigned weights times signed activations, and the min term.
struct alignas(64) Panel8 {
    uint8_t w[4][64];
    float wd[16];      // [d0..d7 | d0..d7]
    float wm[16];      // [m0..m7 | 0 x 8] (min types)
    int32_t corr[16];  // 128 * sum of w over row r's lo half (lanes 0-7) and hi half (8-15)
};

// Eight rows' block i into the step layout. Rows go in pairs into 512-bit registers
// (row 2k in dwords 0-7, row 2k + 1 in 8-15); two rounds of two-source permutes pick each
// step's dwords. The lane sums of the weights (for `corr`) come from vpdpbusd by ones.
// X4: the rows are two four-row groups of the copy (row r's block i is block 4 i + r % 4
// of group r / 4); Q4_0's re-encoded groups give the steps directly (below).
template <class D, bool X4 = false>
void pack_panel8(const uint8_t* w, size_t ws, int64_t nb, Panel8* out) {
    using B = typename D::Block;
    // first round: from rows (0,1) and (2,3) [or (4,5), (6,7)], lanes r*2 + half for r < 4:
    // row r's dword 4 * half + s, row r in the source pair r / 2, dwords 8 * (r % 2) + ...
    __m512i pick[4], place[4];
    for (int st = 0; st < 4; ++st) {
        alignas(64) int32_t p1[16], p2[16];
        for (int l = 0; l < 16; ++l) {
            const int r = (l / 2) % 4, half = l % 2;
            p1[l] = (r / 2) * 16 + (r % 2) * 8 + 4 * half + st;  // only lanes 0-7 are used
            // second round: lane half*8 + r takes row r's value from T (r < 4) or U (r >= 4)
            const int rr = l % 8, hh = l / 8;
            p2[l] = (rr < 4 ? 0 : 16) + (rr % 4) * 2 + hh;
        }
        pick[st] = _mm512_loadu_si512(p1);
        place[st] = _mm512_loadu_si512(p2);
    }
    const __m512i ones = _mm512_set1_epi8(1);
    if constexpr (X4 && std::is_same<D, DecQ4_0>::value) {
        // a group block: the four f16 scales, then steps 0 | 2 in the low nibbles of 64
        // bytes and 1 | 3 in the high ones, dword 4h + r of a step holding row r's values
        // of group 4h + step; two groups side by side are the panel's step
        const __m512i m4 = _mm512_set1_epi8(0x0f), eight = _mm512_set1_epi8(8);
        const __m512i st02 = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
        const __m512i st13 = _mm512_add_epi32(st02, _mm512_set1_epi32(8));
        for (int64_t i = 0; i < nb; ++i) {
            Panel8& p = out[i];
            const uint8_t* ga = w + (size_t)i * 4 * sizeof(BlockQ4_0);
            const uint8_t* gb = ga + 4 * ws;
            const __m512i va = _mm512_loadu_si512(ga + 8), vb = _mm512_loadu_si512(gb + 8);
            const __m512i la = _mm512_and_si512(va, m4), ha = _mm512_and_si512(_mm512_srli_epi16(va, 4), m4);
            const __m512i lb = _mm512_and_si512(vb, m4), hb = _mm512_and_si512(_mm512_srli_epi16(vb, 4), m4);
            const __m512i v[4] = {_mm512_permutex2var_epi32(la, st02, lb), _mm512_permutex2var_epi32(ha, st02, hb),
                                  _mm512_permutex2var_epi32(la, st13, lb), _mm512_permutex2var_epi32(ha, st13, hb)};
            __m512i sums = _mm512_setzero_si512();
            for (int st = 0; st < 4; ++st) {
                const __m512i q = _mm512_sub_epi8(v[st], eight);
                _mm512_store_si512(p.w[st], q);
                sums = _mm512_dpbusd_epi32(sums, ones, q);
            }
            _mm512_store_si512(p.corr, _mm512_slli_epi32(sums, 7));
            int64_t da, db;
            std::memcpy(&da, ga, 8);
            std::memcpy(&db, gb, 8);
            _mm512_store_ps(p.wd, _mm512_broadcast_f32x8(_mm256_cvtph_ps(_mm_set_epi64x(db, da))));
        }
        return;
    }
    for (int64_t i = 0; i < nb; ++i) {
        Panel8& p = out[i];
        const B* x[8];
        for (int r = 0; r < 8; ++r)
            x[r] = X4 ? reinterpret_cast<const B*>(w + (size_t)(4 * (r / 4)) * ws) + 4 * i + r % 4
                      : reinterpret_cast<const B*>(w + r * ws) + i;
        __m512i pair[4];
        for (int k = 0; k < 4; ++k)
            pair[k] = _mm512_inserti64x4(_mm512_castsi256_si512(D::dec(*x[2 * k])), D::dec(*x[2 * k + 1]), 1);
        __m512i sums = _mm512_setzero_si512();
        for (int st = 0; st < 4; ++st) {
            const __m512i t = _mm512_permutex2var_epi32(pair[0], pick[st], pair[1]);  // rows 0-3
            const __m512i u = _mm512_permutex2var_epi32(pair[2], pick[st], pair[3]);  // rows 4-7
            const __m512i v = _mm512_permutex2var_epi32(t, place[st], u);
            _mm512_store_si512(p.w[st], v);
            if constexpr (!D::kMin) sums = _mm512_dpbusd_epi32(sums, ones, v);
        }
        _mm512_store_si512(p.corr, _mm512_slli_epi32(sums, 7));
        _mm512_store_ps(p.wd, _mm512_broadcast_f32x8(block_scales8(x)));
        if constexpr (D::kMin) {
            const __m128i mh = _mm_setr_epi16((short)x[0]->m, (short)x[1]->m, (short)x[2]->m, (short)x[3]->m,
                                              (short)x[4]->m, (short)x[5]->m, (short)x[6]->m, (short)x[7]->m);
            _mm512_store_ps(p.wm, _mm512_insertf32x8(_mm512_setzero_ps(), _mm256_cvtph_ps(mh), 0));
        }
    }
}

template <class D, int C>
void tile8_legacy(int64_t nb, const Panel8* pw, const uint8_t* a, size_t as, float* s, size_t lds) {
    constexpr bool kMin = D::kMin;
    using A = typename std::conditional<kMin, BlockQ8_1, BlockQ8_0>::type;
    __m512i idx[4];
    for (int st = 0; st < 4; ++st)
        idx[st] = _mm512_set_epi32(4 + st, 4 + st, 4 + st, 4 + st, 4 + st, 4 + st, 4 + st, 4 + st, st, st, st, st,
                                   st, st, st, st);
    __m512 acc[C];
    for (int c = 0; c < C; ++c) acc[c] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; ++i) {
        const Panel8& p = pw[i];
        __m512i w[4];
        for (int st = 0; st < 4; ++st) w[st] = _mm512_load_si512(p.w[st]);
        const __m512 wd = _mm512_load_ps(p.wd);
        for (int c = 0; c < C; ++c) {
            const A& y = reinterpret_cast<const A*>(a + c * as)[i];
            __m512i av = _mm512_castsi256_si512(loadu256(y.qs));
            __m512i h = _mm512_setzero_si512();
            if constexpr (kMin) {
                for (int st = 0; st < 4; ++st) h = _mm512_dpbusd_epi32(h, w[st], _mm512_permutexvar_epi32(idx[st], av));
            } else {
                av = _mm512_xor_si512(av, _mm512_set1_epi8((char)0x80));
                for (int st = 0; st < 4; ++st) h = _mm512_dpbusd_epi32(h, _mm512_permutexvar_epi32(idx[st], av), w[st]);
                h = _mm512_sub_epi32(h, _mm512_load_si512(p.corr));
            }
            acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(h), _mm512_mul_ps(wd, _mm512_set1_ps(f16(y.d))), acc[c]);
            if constexpr (kMin) acc[c] = _mm512_fmadd_ps(_mm512_load_ps(p.wm), _mm512_set1_ps(f16(y.s)), acc[c]);
        }
    }
    for (int c = 0; c < C; ++c)
        _mm256_storeu_ps(s + c * lds, _mm256_add_ps(_mm512_castps512_ps256(acc[c]), _mm512_extractf32x8_ps(acc[c], 1)));
}

#ifdef EMBER_AMX
// ---- AMX for the 32-element block types ------------------------------------------------
//
// tile8_legacy ends each block with, per (row, column), exact int32 sums over elements
// 0-15 ("lo") and 16-31 ("hi") of w x a (w the signed value, or the unsigned one for the
// min types), then per block acc = fma(sum, d x da, acc) (+ m x s for the min types).
// Here the tile unit computes those sums with K = 16 tiles (a TDP costs the same at any
// K, and these need no zero halves): A = sixteen columns' sixteen activations straight
// from their blocks, B = sixteen rows' values as 4-element quads (row r in dword r).
struct alignas(64) AmxLegacyPanel {
    int8_t b[2][4][64];  // [lo, hi][quad j][row r x 4 + element]
    float d[16], m[16];
};

// block i of rows 16 rb .. 16 rb + 15 into a panel; X4: the four-row copy (Q4_0's
// re-encoded steps, the other types' plain interleave)
template <class D, bool X4>
void amx_legacy_fill(const uint8_t* W, size_t ws, int rb, int64_t i, AmxLegacyPanel& out) {
    using B = typename D::Block;
    if constexpr (X4 && std::is_same<D, DecQ4_0>::value) {
        // a group block: four f16 scales, then steps 0 | 1 (low | high nibbles of 32
        // bytes) and 2 | 3; step k's low 128 bits hold row r's values 4k..4k+3 in dword r,
        // its high 128 bits values 16+4k..19+4k
        const __m256i m4 = _mm256_set1_epi8(0x0f), eight = _mm256_set1_epi8(8);
        __m256i st[4][4];  // [group][step]
        for (int g = 0; g < 4; ++g) {
            const uint8_t* gb = W + (size_t)(16 * rb + 4 * g) * ws + (size_t)i * 4 * sizeof(BlockQ4_0);
            const __m256i s01 = loadu256(gb + 8), s23 = loadu256(gb + 40);
            st[g][0] = _mm256_sub_epi8(_mm256_and_si256(s01, m4), eight);
            st[g][1] = _mm256_sub_epi8(_mm256_and_si256(_mm256_srli_epi16(s01, 4), m4), eight);
            st[g][2] = _mm256_sub_epi8(_mm256_and_si256(s23, m4), eight);
            st[g][3] = _mm256_sub_epi8(_mm256_and_si256(_mm256_srli_epi16(s23, 4), m4), eight);
            for (int r = 0; r < 4; ++r) {
                uint16_t h;
                std::memcpy(&h, gb + 2 * r, 2);
                out.d[4 * g + r] = f16(h);
                out.m[4 * g + r] = 0.0f;
            }
        }
        for (int k = 0; k < 4; ++k) {
            // [group 0 | 1 | 2 | 3] of step k's low (lo) and high (hi) 128 bits
            const __m512i g01 = _mm512_inserti64x4(_mm512_castsi256_si512(st[0][k]), st[1][k], 1);
            const __m512i g23 = _mm512_inserti64x4(_mm512_castsi256_si512(st[2][k]), st[3][k], 1);
            _mm512_store_si512(out.b[0][k], _mm512_shuffle_i64x2(g01, g23, 0x88));  // 128-bit lanes 0, 2 | 0, 2
            _mm512_store_si512(out.b[1][k], _mm512_shuffle_i64x2(g01, g23, 0xdd));  // lanes 1, 3 | 1, 3
        }
        return;
    }
    __m512i v[16];
    for (int r = 0; r < 16; ++r) {
        const int row = 16 * rb + r;
        const B& x = X4 ? reinterpret_cast<const B*>(W + (size_t)(row / 4 * 4) * ws)[4 * i + row % 4]
                        : reinterpret_cast<const B*>(W + (size_t)row * ws)[i];
        v[r] = _mm512_castsi256_si512(D::dec(x));  // signed values, or the min types' unsigned ones
        v[r] = _mm512_inserti64x4(v[r], _mm256_setzero_si256(), 1);
        out.d[r] = block_scale(x);
        if constexpr (D::kMin) out.m[r] = f16(x.m);
        else out.m[r] = 0.0f;
    }
    transpose16x16_epi32(v);  // v[j]: dword j (elements 4j..4j+3) of every row
    for (int j = 0; j < 4; ++j) {
        _mm512_store_si512(out.b[0][j], v[j]);
        _mm512_store_si512(out.b[1][j], v[4 + j]);
    }
}

// C tiles 0, 1 (lo, hi sums), A tiles 2, 3 (sixteen columns x sixteen activations), B
// tiles 4, 5 (four quads x sixteen rows)
inline void amx_legacy_configure() {
    AmxTileConfig cfg;
    for (int t = 0; t < 2; ++t) {
        cfg.colsb[t] = 64;
        cfg.rows[t] = 16;
        cfg.colsb[2 + t] = 16;
        cfg.rows[2 + t] = 16;
        cfg.colsb[4 + t] = 64;
        cfg.rows[4 + t] = 4;
    }
    _tile_loadconfig(&cfg);
}

struct alignas(64) AmxLegacyC {
    int32_t c[2][16][16];
};

template <class D>
inline void amx_legacy_step(const AmxLegacyPanel& pb, const int8_t* qs, size_t as, AmxLegacyC& out) {
    _tile_zero(0);
    _tile_zero(1);
    _tile_loadd(2, qs, (long)as);
    _tile_loadd(4, pb.b[0], 64);
    _tile_loadd(3, qs + 16, (long)as);
    _tile_loadd(5, pb.b[1], 64);
    if constexpr (D::kMin) {
        _tile_dpbsud(0, 2, 4);
        _tile_dpbsud(1, 3, 5);
    } else {
        _tile_dpbssd(0, 2, 4);
        _tile_dpbssd(1, 3, 5);
    }
    _tile_stored(0, out.c[0], 64);
    _tile_stored(1, out.c[1], 64);
}

// tile8_legacy's float operations for block i of sixteen columns (y0: their blocks i,
// `as` apart), lanes = the sixteen rows; acc: [column][lo, hi]
// the sixteen columns' activation scales (and sums, min types) of one block as floats
struct alignas(64) AmxLegacyAct {
    float d[16], s[16];
};
template <class D>
inline void amx_legacy_act(const uint8_t* y0, size_t as, AmxLegacyAct& out) {
    using A = typename std::conditional<D::kMin, BlockQ8_1, BlockQ8_0>::type;
    alignas(32) uint16_t h[2][16];
    for (int m = 0; m < 16; ++m) {
        const A& y = *reinterpret_cast<const A*>(y0 + m * as);
        h[0][m] = y.d;
        if constexpr (D::kMin) h[1][m] = y.s;
    }
    _mm512_store_ps(out.d, _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(h[0]))));
    if constexpr (D::kMin) _mm512_store_ps(out.s, _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(h[1]))));
}

template <class D>
inline void amx_legacy_epilogue(const AmxLegacyPanel& pb, const AmxLegacyC& cs, const AmxLegacyAct& ya,
                                __m512 (*acc)[2]) {
    const __m512 wd = _mm512_load_ps(pb.d), wm = _mm512_load_ps(pb.m), zero = _mm512_setzero_ps();
    for (int m = 0; m < 16; ++m) {
        const __m512 dd = _mm512_mul_ps(wd, _mm512_set1_ps(ya.d[m]));
        __m512 lo = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(cs.c[0][m])), dd, acc[m][0]);
        __m512 hi = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(cs.c[1][m])), dd, acc[m][1]);
        if constexpr (D::kMin) {
            const __m512 ys = _mm512_set1_ps(ya.s[m]);
            lo = _mm512_fmadd_ps(wm, ys, lo);
            hi = _mm512_fmadd_ps(zero, ys, hi);  // tile8_legacy's hi lanes take 0 x s too
        }
        acc[m][0] = lo;
        acc[m][1] = hi;
    }
}

// The 32-element block types' kind: panels per 64 blocks (2048 elements, as the K-quants')
template <class D, bool X4>
struct AmxLegacy {
    using Act = typename std::conditional<D::kMin, BlockQ8_1, BlockQ8_0>::type;
    using Panel = AmxLegacyPanel;
    using Sums = AmxLegacyC;
    using Cols = AmxLegacyAct;
    static constexpr int64_t kBlock = 64;
    static constexpr size_t kActBytes = sizeof(Act);
    static void fill(const uint8_t* W, size_t ws, int rb, int64_t i, Panel& p) { amx_legacy_fill<D, X4>(W, ws, rb, i, p); }
    static void configure() { amx_legacy_configure(); }
    static void prepare(const uint8_t* y0, size_t as, Cols& c) { amx_legacy_act<D>(y0, as, c); }
    static void step(const Panel& p, const uint8_t* y0, size_t as, Sums& out) {
        amx_legacy_step<D>(p, reinterpret_cast<const int8_t*>(y0 + offsetof(Act, qs)), as, out);
    }
    static void epilogue(const Panel& p, const Sums& sums, const Cols& c, __m512 (*acc)[2]) {
        amx_legacy_epilogue<D>(p, sums, c, acc);
    }
};
#endif  // EMBER_AMX

// Decoding Q4_0 on its re-encoded four-row groups with VNNI: the AVX2 q4_0_group_col's
// int32 lanes [r0 r1 r2 r3 | r0 r1 r2 r3] (the rows' 16-element sums of u a, u = w + 8,
// less 8 x the activation half's sum), but each step k is one vpdpbusd of the unsigned
// nibbles against the activations' dword k broadcast in each 128-bit lane, where AVX2
// spends a shuffle, a maddubs and an add per step and a madd per block. The offset terms
// are made once per call for all the groups, the broadcasts in the kernel (one vpshufd
// per step, shared by the streams: stored, six times the activations with the offsets,
// they fell out of L1 between groups of streams on rows of 4096 values or more, as the
// K-quants' did); the float operations are q4_0_group_col's in its order, so the same
// bits. 256-bit on purpose: a 512-bit operation anywhere in the loop closes the third
// vector port, and this loop is bound by its vector operations (14 per 72-byte group
// block, where AVX2 takes 24): the high nibbles are masked in place (16 u, a shift of
// their int32 chain per block instead of one per vector; the same integers). The streams'
// loop must unroll, with prefetch_span's fixed-size request: with prefetch_ahead's loop in
// it, it stayed a loop and the accumulators went through memory, a store-to-load round
// trip per block and stream (in cache 136 GOP/s against 172 unrolled, bench_kernels, one
// thread, Zen 4; from memory 53-66% of the probe against 70-80%, bench_decode_stream).
template <int S>
inline void q4_0_group_col_vnni(int64_t nb, const uint8_t* const* w, const Q40Act* pre, float* const* s) {
    __m256 acc[S];
    for (int j = 0; j < S; ++j) acc[j] = _mm256_setzero_ps();
    const __m256i ml = _mm256_set1_epi8(0x0f), mh = _mm256_set1_epi8((char)0xf0);
    for (int64_t i = 0; i < nb; ++i) {
        const Q40Act& p = pre[i];
        const __m256i av = loadu256(p.qs);
        const __m256i st0 = _mm256_shuffle_epi32(av, 0x00), st1 = _mm256_shuffle_epi32(av, 0x55);
        const __m256i st2 = _mm256_shuffle_epi32(av, 0xaa), st3 = _mm256_shuffle_epi32(av, 0xff);
        const __m256i noff = _mm256_sub_epi32(_mm256_setzero_si256(), q4_0_act_off(p));
        const __m256 da = _mm256_broadcast_ss(&p.d);
#pragma GCC unroll 4
        for (int j = 0; j < S; ++j) {  // the streams side by side, block by block
            const uint8_t* gb = w[j] + (size_t)i * kQ40Group;
            prefetch_span<kQ40Group>(gb);
            const __m256i v01 = loadu256(gb + 8), v23 = loadu256(gb + 40);
            // two chains of two (int32 sums: any order gives the same integers); the high
            // nibbles stay in place, 16 u, and their chain is shifted back once
            __m256i h1 = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_and_si256(v01, mh), st1);
            __m256i h0 = _mm256_dpbusd_epi32(noff, _mm256_and_si256(v01, ml), st0);
            h1 = _mm256_dpbusd_epi32(h1, _mm256_and_si256(v23, mh), st3);
            h0 = _mm256_dpbusd_epi32(h0, _mm256_and_si256(v23, ml), st2);
            const __m256i h = _mm256_add_epi32(h0, _mm256_srai_epi32(h1, 4));
            const __m256 wd = q4_0_group_scales(gb);
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(h), _mm256_mul_ps(wd, da), acc[j]);
        }
    }
    store_rows4<S>(acc, s);
}
void q4_0_groups_cols_vnni(int64_t nb, int groups, int nc, const uint8_t* W, size_t ws, const uint8_t* A, size_t as,
                           float* s, size_t lds) {
    struct Site;
    Q40Act* const pre = thread_scratch<Q40Act, Site>((size_t)nb);
    decode_columns(groups, nc, W, ws, A, as, s, lds, [&](const BlockQ8_0* y) { q4_0_prepare(nb, y, pre); },
                   [&](auto streams, auto x, const BlockQ8_0*, float* const* o) {
                       q4_0_group_col_vnni<decltype(streams)::value>(nb, x, pre, o);
                   });
}

// Q8_0 decoding on the four-row copy with VNNI: legacy4_x4_col<DecQ8_0>'s int32 lanes
// (each row's |w| against sign(a, w), four products a dword, folded by two rounds of
// hadd into [r0 r1 r2 r3 | r0 r1 r2 r3]) with one vpdpbusd per row where AVX2 spends a
// maddubs and a madd; the same integers and float operations, so the same bits. In cache
// 69-81 -> 90-92 GOP/s (bench_kernels 256 x 4096, one thread, Zen 4); from memory ahead
// in 4 of 5 runs alternated in one process, by 0.4-3 points (one run 5 behind).
template <int S>
inline void q8_0_x4_col_vnni(int64_t nb, const uint8_t* const* w, const BlockQ8_0* y, const float* das,
                             float* const* s) {
    __m256 acc[S];
    for (int j = 0; j < S; ++j) acc[j] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; ++i) {
        const __m256i av = loadu256(y[i].qs);
        const __m256 da = _mm256_broadcast_ss(das + i);
#pragma GCC unroll 4
        for (int j = 0; j < S; ++j) {
            const BlockQ8_0* b = reinterpret_cast<const BlockQ8_0*>(w[j]) + 4 * i;
            prefetch_span<4 * sizeof(BlockQ8_0)>(reinterpret_cast<const uint8_t*>(b));
            __m256i p[4];
            for (int r = 0; r < 4; ++r) {
                const __m256i q = loadu256(b[r].qs);
                p[r] = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_sign_epi8(q, q), _mm256_sign_epi8(av, q));
            }
            const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
            const __m128i dh = pack_u16x4(b[0].d, b[1].d, b[2].d, b[3].d);
            const __m256 wd = _mm256_cvtph_ps(_mm_unpacklo_epi64(dh, dh));
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(h), _mm256_mul_ps(wd, da), acc[j]);
        }
    }
    store_rows4<S>(acc, s);
}
void q8_0_groups_cols_vnni(int64_t nb, int groups, int nc, const uint8_t* W, size_t ws, const uint8_t* A, size_t as,
                           float* s, size_t lds) {
    struct Site;
    float* const das = thread_scratch<float, Site>((size_t)nb);
    decode_columns(
        groups, nc, W, ws, A, as, s, lds, [&](const BlockQ8_0* y) { for (int64_t i = 0; i < nb; ++i) das[i] = f16(y[i].d); },
        [&](auto streams, auto x, const BlockQ8_0* y, float* const* o) {
            q8_0_x4_col_vnni<decltype(streams)::value>(nb, x, y, das, o);
        });
}

template <class D, DType T, bool X4>
void gemm_legacy512(int64_t n, int nr, int nc, const void* w, size_t ws, const void* a, size_t as, float* s,
                    size_t lds) {
    constexpr int C = 4;
    const DotKernels& avx2 = avx2_table[(int)T];
    const GemmFn rest = X4 ? avx2.gemm_x4 : avx2.gemm;
    const int groups = nr / 8;
    if (nc < C || groups == 0) {  // decoding (and slivers): the AVX2 path, whose bits the tiles reproduce
        if constexpr (X4 && std::is_same<D, DecQ4_0>::value)
            if (nc < C) {
                q4_0_groups_cols_vnni(n / QK, nr / 4, nc, static_cast<const uint8_t*>(w), ws,
                                      static_cast<const uint8_t*>(a), as, s, lds);
                return;
            }
        if constexpr (X4 && std::is_same<D, DecQ8_0>::value)
            if (nc < C) {
                q8_0_groups_cols_vnni(n / QK, nr / 4, nc, static_cast<const uint8_t*>(w), ws,
                                      static_cast<const uint8_t*>(a), as, s, lds);
                return;
            }
        rest(n, nr, nc, w, ws, a, as, s, lds);
        return;
    }
    const int64_t nb = n / QK;
    const uint8_t* W = static_cast<const uint8_t*>(w);
    const uint8_t* A = static_cast<const uint8_t*>(a);
    int c = 0;
#ifdef EMBER_AMX
    if (nr % 16 == 0 && nc >= 16 && amx_enabled()) {  // the tile unit; the columns left: below
        gemm_amx<AmxLegacy<D, X4>>(nb, W, ws, nr / 16, nc, A, as, s, lds);
        c = nc / 16 * 16;
        if (c == nc) return;
    }
#endif
    struct Site;
    Panel8* const panel = thread_scratch<Panel8, Site>((size_t)(groups * nb));
    for (int g = 0; g < groups; ++g) pack_panel8<D, X4>(W + (size_t)(8 * g) * ws, ws, nb, panel + g * nb);
    for (; c + C <= nc; c += C)
        for (int g = 0; g < groups; ++g)
            tile8_legacy<D, C>(nb, panel + g * nb, A + c * as, as, s + c * lds + 8 * g, lds);
    for (; c < nc; ++c)
        for (int g = 0; g < groups; ++g)
            tile8_legacy<D, 1>(nb, panel + g * nb, A + c * as, as, s + c * lds + 8 * g, lds);
    const int r0 = 8 * groups;
    if (r0 < nr) rest(n, nr - r0, nc, W + (size_t)r0 * ws, ws, a, as, s + r0, lds);  // X4: one group
}

}  // namespace

void register_avx512_kernels(KernelTable& t) {
    register_avx2_kernels(avx2_table);
    // the rest of a row (activation format, converter, one-column dot) is AVX2's; the
    // products on the four-row copy read it as the AVX2 level lays it out
    auto tile = [&](DType type, GemmFn gemm, GemmFn gemm_x4) {
        t[(int)type] = avx2_table[(int)type];
        t[(int)type].gemm = gemm;
        t[(int)type].gemm_x4 = avx2_table[(int)type].gemm_x4 ? gemm_x4 : nullptr;
    };
    tile(DType::Q2_K, gemm_k512<BlockQ2_K, DType::Q2_K, false>, gemm_k512<BlockQ2_K, DType::Q2_K, true>);
    tile(DType::Q3_K, gemm_k512<BlockQ3_K, DType::Q3_K, false>, gemm_k512<BlockQ3_K, DType::Q3_K, true>);
    tile(DType::Q6_K, gemm_k512<BlockQ6_K, DType::Q6_K, false>, gemm_k512<BlockQ6_K, DType::Q6_K, true>);
    tile(DType::Q4_K, gemm_k512<BlockQ4_K, DType::Q4_K, false>, gemm_k512<BlockQ4_K, DType::Q4_K, true>);
    tile(DType::Q5_K, gemm_k512<BlockQ5_K, DType::Q5_K, false>, gemm_k512<BlockQ5_K, DType::Q5_K, true>);
    tile(DType::Q4_0, gemm_legacy512<DecQ4_0, DType::Q4_0, false>, gemm_legacy512<DecQ4_0, DType::Q4_0, true>);
    tile(DType::Q4_1, gemm_legacy512<DecQ4_1, DType::Q4_1, false>, gemm_legacy512<DecQ4_1, DType::Q4_1, true>);
    tile(DType::Q5_0, gemm_legacy512<DecQ5_0, DType::Q5_0, false>, gemm_legacy512<DecQ5_0, DType::Q5_0, true>);
    tile(DType::Q5_1, gemm_legacy512<DecQ5_1, DType::Q5_1, false>, gemm_legacy512<DecQ5_1, DType::Q5_1, true>);
    tile(DType::Q8_0, gemm_legacy512<DecQ8_0, DType::Q8_0, false>, gemm_legacy512<DecQ8_0, DType::Q8_0, true>);
    tile(DType::MXFP4, gemm_legacy512<DecMXFP4, DType::MXFP4, false>, gemm_legacy512<DecMXFP4, DType::MXFP4, true>);
    tile(DType::IQ4_NL, gemm_legacy512<DecIQ4_NL, DType::IQ4_NL, false>, gemm_legacy512<DecIQ4_NL, DType::IQ4_NL, true>);
    // 64 rows a call: the AMX tiles read an activation block once per 64 rows, and the
    // K-quants' sixteen-column tiles transpose a column block once per 64 rows
    for (DType type : {DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K}) t[(int)type].batch_rows = [] { return 64; };
#ifdef EMBER_AMX
    for (DType type : {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::MXFP4, DType::IQ4_NL})
        t[(int)type].batch_rows = [] { return amx_enabled() ? 64 : (int)kMulMatRowBlock; };
#endif
}


// Attention over the F16 cache at 512 bits, with the AVX2 level's bits (test_kernels
// compares them). Decoding at a long context reads the cache as fast as the weights, and
// at AVX2 its FMAs and conversions, not the reads, set the pace (1B, 4096 positions: a
// quarter of a token).
namespace {

AttentionKernels avx2_attention;  // filled once by register_avx512_attention, before any use

// Scores: a register holds two keys' eight-element slices side by side, so each of its
// lanes runs the AVX2 accumulator lane's FMAs in the same order; eight keys (four
// registers) per head at a time.
template <bool MASKED>
inline __m512 load_h8x2(const uint16_t* a, const uint16_t* b, __mmask8 ma, __mmask8 mb) {
    if (!MASKED)
        return _mm512_cvtph_ps(_mm256_inserti128_si256(
            _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a))),
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(b)), 1));
    return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(_mm_maskz_loadu_epi16(ma, a)),
                                                   _mm_maskz_loadu_epi16(mb, b), 1));
}

// The eight keys' sums, each folded as AVX2's fold4 folds one accumulator:
// ((x0 + x1) + (x2 + x3)) + ((x4 + x5) + (x6 + x7)), in key order. p[m] holds keys 2m
// (lanes 0-7) and 2m + 1 (lanes 8-15).
__attribute__((always_inline)) inline __m256 fold8(__m512 p0, __m512 p1, __m512 p2, __m512 p3) {
    const __m512 p[4] = {p0, p1, p2, p3};
    constexpr int kEven = _MM_SHUFFLE(2, 0, 2, 0), kOdd = _MM_SHUFFLE(3, 1, 3, 1);
    // per 128-bit lane: [a0 + a1, a2 + a3, b0 + b1, b2 + b3], as hadd
    const __m512 s01 = _mm512_add_ps(_mm512_shuffle_ps(p[0], p[1], kEven), _mm512_shuffle_ps(p[0], p[1], kOdd));
    const __m512 s23 = _mm512_add_ps(_mm512_shuffle_ps(p[2], p[3], kEven), _mm512_shuffle_ps(p[2], p[3], kOdd));
    // 128-bit lanes: keys 0, 2, 4, 6 over x0-x3 | the same over x4-x7 | keys 1, 3, 5, 7 ...
    const __m512 t = _mm512_add_ps(_mm512_shuffle_ps(s01, s23, kEven), _mm512_shuffle_ps(s01, s23, kOdd));
    const __m512 sum = _mm512_add_ps(_mm512_shuffle_f32x4(t, t, kEven), _mm512_shuffle_f32x4(t, t, kOdd));
    // [k0 k2 k4 k6 k1 k3 k5 k7] -> key order
    return _mm512_castps512_ps256(_mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7, 0, 0, 0, 0, 0, 0, 0, 0), sum));
}

template <int G, bool MASKED>
inline void scores8(const float* q, size_t qs, const uint16_t* k, size_t stride, int64_t n, int64_t d, __m256 scale,
                    float* out, size_t ldo) {
    const uint16_t* kp[8];
    __mmask8 m[8];
    for (int t = 0; t < 8; ++t) {
        kp[t] = k + (size_t)(t < n ? t : 0) * stride;
        m[t] = t < n ? 0xFF : 0;
    }
    // (every loop unrolled in full and fold8's four by value: GCC otherwise kept the
    // accumulators on the stack across the loop's end, 32 stores and loads per eight keys)
    __m512 a[G][4];
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g)
#pragma GCC unroll 4
        for (int u = 0; u < 4; ++u) a[g][u] = _mm512_setzero_ps();
    for (int64_t i = 0; i < d; i += 8) {
        __m512 kv[4];
#pragma GCC unroll 4
        for (int u = 0; u < 4; ++u) kv[u] = load_h8x2<MASKED>(kp[2 * u] + i, kp[2 * u + 1] + i, m[2 * u], m[2 * u + 1]);
#pragma GCC unroll 4
        for (int g = 0; g < G; ++g) {
            const __m512 qv = _mm512_broadcast_f32x8(_mm256_loadu_ps(q + g * qs + i));
#pragma GCC unroll 4
            for (int u = 0; u < 4; ++u) a[g][u] = _mm512_fmadd_ps(qv, kv[u], a[g][u]);
        }
    }
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) {
        const __m256 s = _mm256_mul_ps(fold8(a[g][0], a[g][1], a[g][2], a[g][3]), scale);
        if (MASKED) _mm256_mask_storeu_ps(out + g * ldo, (__mmask8)((1u << n) - 1), s);
        else _mm256_storeu_ps(out + g * ldo, s);
    }
}

template <int G>
void scores_group512(const float* q, size_t qs, const uint16_t* k, size_t stride, int64_t nk, int64_t d, float scale,
                     float* out, size_t ldo) {
    const __m256 sc = _mm256_set1_ps(scale);
    int64_t j = 0;
    for (; j + 8 <= nk; j += 8) scores8<G, false>(q, qs, k + j * stride, stride, 8, d, sc, out + j, ldo);
    if (j < nk) scores8<G, true>(q, qs, k + j * stride, stride, nk - j, d, sc, out + j, ldo);
}

void attn_scores_avx512(const float* q, size_t qs, int G, const uint16_t* k, size_t stride, int64_t nk, int64_t d,
                        float scale, float* out, size_t ldo) {
    if (d % 8 != 0) return avx2_attention.scores(q, qs, G, k, stride, nk, d, scale, out, ldo);
    for (int g = 0; g < G; g += 4) {
        const float* qg = q + g * qs;
        float* og = out + g * ldo;
        switch (G - g < 4 ? G - g : 4) {
            case 1: scores_group512<1>(qg, qs, k, stride, nk, d, scale, og, ldo); break;
            case 2: scores_group512<2>(qg, qs, k, stride, nk, d, scale, og, ldo); break;
            case 3: scores_group512<3>(qg, qs, k, stride, nk, d, scale, og, ldo); break;
            default: scores_group512<4>(qg, qs, k, stride, nk, d, scale, og, ldo); break;
        }
    }
}

// Values: each lane adds the keys in order with one FMA, as at AVX2; sixteen elements a
// register, up to 64 of them per pass over the block's values.
template <int G, int V>
void accumulate_group512(float* acc, size_t as, const uint16_t* v, size_t stride, const float* w, size_t ldw,
                         int64_t nk, int64_t i) {
    // (every loop unrolled in full: GCC otherwise kept the accumulators on the stack
    // around the loop over keys, as in scores8)
    __m512 a[G][V];
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g)
#pragma GCC unroll 4
        for (int t = 0; t < V; ++t) a[g][t] = _mm512_loadu_ps(acc + g * as + i + 16 * t);
    for (int64_t j = 0; j < nk; ++j) {
        __m512 vv[V];
#pragma GCC unroll 4
        for (int t = 0; t < V; ++t)
            vv[t] = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(v + j * stride + i + 16 * t)));
#pragma GCC unroll 4
        for (int g = 0; g < G; ++g) {
            const __m512 wj = _mm512_set1_ps(w[g * ldw + j]);
#pragma GCC unroll 4
            for (int t = 0; t < V; ++t) a[g][t] = _mm512_fmadd_ps(wj, vv[t], a[g][t]);
        }
    }
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g)
#pragma GCC unroll 4
        for (int t = 0; t < V; ++t) _mm512_storeu_ps(acc + g * as + i + 16 * t, a[g][t]);
}

template <int G>
void accumulate_heads512(float* acc, size_t as, const uint16_t* v, size_t stride, const float* w, size_t ldw,
                         int64_t nk, int64_t d) {
    int64_t i = 0;
    for (; i + 64 <= d; i += 64) accumulate_group512<G, 4>(acc, as, v, stride, w, ldw, nk, i);
    for (; i < d; i += 16) accumulate_group512<G, 1>(acc, as, v, stride, w, ldw, nk, i);
}

void attn_accumulate_avx512(float* acc, size_t as, int G, const uint16_t* v, size_t stride, const float* w,
                            size_t ldw, int64_t nk, int64_t d) {
    if (d % 16 != 0) return avx2_attention.accumulate(acc, as, G, v, stride, w, ldw, nk, d);
    for (int g = 0; g < G; g += 4) {
        float* ag = acc + g * as;
        const float* wg = w + g * ldw;
        switch (G - g < 4 ? G - g : 4) {
            case 1: accumulate_heads512<1>(ag, as, v, stride, wg, ldw, nk, d); break;
            case 2: accumulate_heads512<2>(ag, as, v, stride, wg, ldw, nk, d); break;
            case 3: accumulate_heads512<3>(ag, as, v, stride, wg, ldw, nk, d); break;
            default: accumulate_heads512<4>(ag, as, v, stride, wg, ldw, nk, d); break;
        }
    }
}

}  // namespace

void register_avx512_attention(AttentionKernels& k) {
    avx2_attention = k;
    k.scores = attn_scores_avx512;
    k.accumulate = attn_accumulate_avx512;
}

}  // namespace ember

#else

namespace ember {
// Built without AVX-512 VNNI: every entry falls back to the AVX2 kernels.
void register_avx512_kernels(KernelTable&) {}
void register_avx512_attention(AttentionKernels&) {}
}  // namespace ember

#endif
