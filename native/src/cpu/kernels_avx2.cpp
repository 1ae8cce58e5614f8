// AVX2 (+FMA, F16C) kernels. Same activation formats and integer block sums as the
// scalar reference (cpu/kernels_scalar.cpp); only the float summation order differs.
//
// Integer dots use maddubs (u8 x s8 -> pairs summed to s16) and madd (s16 pairs ->
// s32). Weights that are signed use the sign trick (|w| x sign(a, w)); unsigned weights
// with an offset (K-quants, Q6_K's -32, Q3_K's -4) take the offset out through the
// activation block sums. No pair sum can saturate int16: |a| <= 127 and |w| <= 128.
#include "cpu/kernels.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/fp16.h"
#include "core/thread_state.h"
#include "cpu/kernels_ref.h"
#include "cpu/kpanel_x86.h"
#include "quant/types.h"

namespace ember {

namespace {

inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}


// ---- activation converters: bit-exact with the scalar reference ------------------

inline float absmax(const float* x, int n) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 m = _mm256_setzero_ps();
    for (int j = 0; j < n; j += 8) m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + j)));
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
}

// 32 floats * id, rounded to nearest even, to int8; returns the int32 partial sums.
inline __m256i quant32(const float* x, float id, int8_t* dst) {
    const __m256 vid = _mm256_set1_ps(id);
    constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
    const __m256i i0 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x), vid), kRound));
    const __m256i i1 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x + 8), vid), kRound));
    const __m256i i2 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x + 16), vid), kRound));
    const __m256i i3 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x + 24), vid), kRound));
    // packs work per 128-bit lane; the permute restores element order
    const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst),
                        _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
    return _mm256_add_epi32(_mm256_add_epi32(i0, i1), _mm256_add_epi32(i2, i3));
}

inline int hsum_i32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

void quantize_row_q8_0(const float* x, void* y, int64_t n) {
    BlockQ8_0* b = static_cast<BlockQ8_0*>(y);
    for (int64_t i = 0; i < n / QK; ++i, x += QK) {
        const float d = absmax(x, QK) / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = fp32_to_fp16(d);
        quant32(x, id, b[i].qs);
    }
}

void quantize_row_q8_1(const float* x, void* y, int64_t n) {
    BlockQ8_1* b = static_cast<BlockQ8_1*>(y);
    for (int64_t i = 0; i < n / QK; ++i, x += QK) {
        const float d = absmax(x, QK) / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = fp32_to_fp16(d);
        b[i].s = fp32_to_fp16(d * (float)hsum_i32(quant32(x, id, b[i].qs)));
    }
}

void quantize_row_q8_k(const float* x, void* y, int64_t n) {
    BlockQ8_K* b = static_cast<BlockQ8_K*>(y);
    for (int64_t i = 0; i < n / QK_K; ++i, x += QK_K) {
        const float d = absmax(x, QK_K) / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = d;
        for (int j = 0; j < QK_K; j += 32) quant32(x + j, id, b[i].qs + j);
        // sums of each 16 from the stored bytes: maddubs with ones gives pair sums
        const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
        for (int j = 0; j < QK_K; j += 32) {
            const __m256i s32 = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, loadu256(b[i].qs + j)), ones16);
            // lanes 0-3 hold the first 16 elements, 4-7 the second
            alignas(32) int32_t t[8];
            _mm256_store_si256(reinterpret_cast<__m256i*>(t), s32);
            b[i].bsums[j / 16] = (int16_t)(t[0] + t[1] + t[2] + t[3]);
            b[i].bsums[j / 16 + 1] = (int16_t)(t[4] + t[5] + t[6] + t[7]);
        }
    }
}

// int32 lanes summing to dot(w, a): w unsigned (0..255) or signed via the sign trick
inline __m256i dot_u8(__m256i w, __m256i a) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(w, a), _mm256_set1_epi16(1));
}
inline __m256i dot_s8(__m256i w_abs, __m256i w, __m256i a) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(w_abs, _mm256_sign_epi8(a, w)), _mm256_set1_epi16(1));
}

// ---- legacy types: vec_dot and tiles ------------------------------------------------

template <class D>
using ActBlock = typename std::conditional<D::kMin, BlockQ8_1, BlockQ8_0>::type;

template <class D>
inline float min_term(const typename D::Block& x, const ActBlock<D>& y) {
    if constexpr (D::kMin) return f16(x.m) * f16(y.s);
    else { (void)x; (void)y; return 0.0f; }
}

template <class D>
inline __m256i block_dot(const typename D::Block& x, const ActBlock<D>& y) {
    const __m256i q = D::dec(x), a = loadu256(y.qs);
    if constexpr (D::kSigned) return dot_s8(_mm256_sign_epi8(q, q), q, a);
    else return dot_u8(q, a);
}

template <class D>
void vec_dot_legacy(int64_t n, float* s, const void* w, const void* a) {
    const auto* x = static_cast<const typename D::Block*>(w);
    const auto* y = static_cast<const ActBlock<D>*>(a);
    const int64_t nb = n / QK;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    float m = 0.0f;
    int64_t i = 0;
    for (; i + 1 < nb; i += 2) {  // two chains hide the cvt/fma latency
        acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(block_dot<D>(x[i], y[i])),
                               _mm256_set1_ps(block_scale(x[i]) * f16(y[i].d)), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(block_dot<D>(x[i + 1], y[i + 1])),
                               _mm256_set1_ps(block_scale(x[i + 1]) * f16(y[i + 1].d)), acc1);
        m += min_term<D>(x[i], y[i]) + min_term<D>(x[i + 1], y[i + 1]);
    }
    for (; i < nb; ++i) {
        acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(block_dot<D>(x[i], y[i])),
                               _mm256_set1_ps(block_scale(x[i]) * f16(y[i].d)), acc0);
        m += min_term<D>(x[i], y[i]);
    }
    *s = hsum(_mm256_add_ps(acc0, acc1)) + m;
}

// R weight rows x C activation columns: each decoded weight block is used C times and
// each activation block R times.
template <class D, int R, int C>
inline void tile_legacy(int64_t nb, const uint8_t* w, size_t ws, const uint8_t* a, size_t as, float* s,
                        size_t lds) {
    using B = typename D::Block;
    using A = ActBlock<D>;
    __m256 acc[R][C];
    float macc[R][C];
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) {
            acc[r][c] = _mm256_setzero_ps();
            macc[r][c] = 0.0f;
        }
    for (int64_t i = 0; i < nb; ++i) {
        __m256i q[R], qa[R];
        float wd[R], wm[R];
        for (int r = 0; r < R; ++r) {
            const B& b = reinterpret_cast<const B*>(w + r * ws)[i];
            q[r] = D::dec(b);
            if constexpr (D::kSigned) qa[r] = _mm256_sign_epi8(q[r], q[r]);
            wd[r] = block_scale(b);
            if constexpr (D::kMin) wm[r] = f16(b.m);
            else wm[r] = 0.0f;
        }
        for (int c = 0; c < C; ++c) {
            const A& y = reinterpret_cast<const A*>(a + c * as)[i];
            const __m256i av = loadu256(y.qs);
            const float da = f16(y.d);
            for (int r = 0; r < R; ++r) {
                __m256i p;
                if constexpr (D::kSigned) p = dot_s8(qa[r], q[r], av);
                else p = dot_u8(q[r], av);
                acc[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(wd[r] * da), acc[r][c]);
                if constexpr (D::kMin) macc[r][c] += wm[r] * f16(y.s);
            }
        }
    }
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) s[c * lds + r] = hsum(acc[r][c]) + macc[r][c];
}


// The four-row fold from int16 pair sums (maddubs outputs, or differences of them):
// [r0 r1 r2 r3 | r0 r1 r2 r3] as int32, each the sum over 16 elements (the low or high
// half of a block); the same lanes as hadd_epi32-folding the rows' madd_epi16 sums. Two
// rounds of hadd_epi16 add up 8 elements in int16, exact wherever 8 products cannot pass
// 32767: 4- and 5-bit values (|w| <= 31, or <= 16 once the offset is off) times int8
// activations, but not Q8_0's full-range weights.
inline __m256i fold4_i16(__m256i p0, __m256i p1, __m256i p2, __m256i p3) {
    return _mm256_madd_epi16(_mm256_hadd_epi16(_mm256_hadd_epi16(p0, p1), _mm256_hadd_epi16(p2, p3)),
                             _mm256_set1_epi16(1));
}

// A 4 x 4 dword transpose in each 128-bit lane: four rows' 32 values (a block, or a
// K-quant group) into four steps of 8 elements, rows 0-3's [4k, 4k + 4) in the low 128
// bits and their [16 + 4k, 20 + 4k) in the high 128 bits of step k
inline void put_group4(const __m256i R[4], uint8_t (*dst)[32]) {
    const __m256i t0 = _mm256_unpacklo_epi32(R[0], R[1]), t1 = _mm256_unpackhi_epi32(R[0], R[1]);
    const __m256i t2 = _mm256_unpacklo_epi32(R[2], R[3]), t3 = _mm256_unpackhi_epi32(R[2], R[3]);
    _mm256_store_si256(reinterpret_cast<__m256i*>(dst[0]), _mm256_unpacklo_epi64(t0, t2));
    _mm256_store_si256(reinterpret_cast<__m256i*>(dst[1]), _mm256_unpackhi_epi64(t0, t2));
    _mm256_store_si256(reinterpret_cast<__m256i*>(dst[2]), _mm256_unpacklo_epi64(t1, t3));
    _mm256_store_si256(reinterpret_cast<__m256i*>(dst[3]), _mm256_unpackhi_epi64(t1, t3));
}

// One block of four rows, as tile4_legacy_da uses it: the weights decoded once (q, the four
// rows' scales and mins) and then a column's int32 lanes [r0 r1 r2 r3 | r0 r1 r2 r3].
template <class D, bool X4>
struct Legacy4 {
    using B = typename D::Block;
    using A = ActBlock<D>;
    static constexpr int64_t kS = X4 ? 4 : 1;  // X4: the group's blocks interleaved (four_row_layout)
    // q: the unsigned weights (offset types, Q4_1, Q5_1) or |w| (Q8_0, whose signs are
    // re-read from the block, in L1, in the column step): four registers, not eight
    // (the table types keep the signed values too, in q[4 + r]: decoding again per column
    // costs more than four registers)
    static void load(const B* const xr[4], int64_t i, __m256i q[8], __m256& wd, __m256& wm) {
        for (int r = 0; r < 4; ++r) {
            if constexpr (D::kOffset > 0) q[r] = D::dec_u(xr[r][kS * i]);
            else if constexpr (D::kSigned) {
                const __m256i w8 = D::dec(xr[r][kS * i]);
                q[r] = _mm256_sign_epi8(w8, w8);
                if constexpr (IsTable<D>::value) q[4 + r] = w8;
            } else q[r] = D::dec(xr[r][kS * i]);
        }
        wd = block_scales4(xr[0][kS * i], xr[1][kS * i], xr[2][kS * i], xr[3][kS * i]);  // [d0..d3 | d0..d3]
        wm = _mm256_setzero_ps();
        if constexpr (D::kMin) wm = _mm256_cvtph_ps(pack_u16x4(xr[0][kS * i].m, xr[1][kS * i].m, xr[2][kS * i].m, xr[3][kS * i].m));  // [m0..m3 | 0]
    }
    static __m256i col(const __m256i q[8], const B* const xr[4], int64_t i, const A& y) {
        const __m256i av = loadu256(y.qs);
        if constexpr (D::kOffset > 0) {
            // sum (u - off) a = sum u a - off sum a, pair by pair in int16
            const __m256i off = _mm256_maddubs_epi16(_mm256_set1_epi8((char)D::kOffset), av);
            __m256i p[4];
            for (int r = 0; r < 4; ++r) p[r] = _mm256_sub_epi16(_mm256_maddubs_epi16(q[r], av), off);
            return fold4_i16(p[0], p[1], p[2], p[3]);
        } else if constexpr (D::kSigned) {
            __m256i p[4];
            for (int r = 0; r < 4; ++r) {
                const __m256i w8 = IsTable<D>::value ? q[4 + r] : D::dec(xr[r][kS * i]);
                p[r] = _mm256_madd_epi16(_mm256_maddubs_epi16(q[r], _mm256_sign_epi8(av, w8)), _mm256_set1_epi16(1));
            }
            return _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
        } else {
            return fold4_i16(_mm256_maddubs_epi16(q[0], av), _mm256_maddubs_epi16(q[1], av),
                             _mm256_maddubs_epi16(q[2], av), _mm256_maddubs_epi16(q[3], av));
        }
    }
    static void rows(const uint8_t* w, size_t ws, const B* xr[4]) {
        xr[0] = reinterpret_cast<const B*>(w);
        for (int r = 1; r < 4; ++r) xr[r] = X4 ? xr[0] + r : reinterpret_cast<const B*>(w + r * ws);
    }
};

// Four weight rows x C columns. The four rows' block sums are folded together with two
// rounds of hadd (in int16 for the 4- and 5-bit types: fold4_i16) into one vector
// [r0 r1 r2 r3 | r0 r1 r2 r3], so the
// int->float conversion and the scale multiply-add are paid once per four block dots.
// The four rows' f16 scales are gathered in registers (going through memory here
// costs a store-forwarding stall per block). Everything live fits the 16 ymm registers
// for C = 4 (spilled accumulators cost a store-to-load round trip per block).
// das: the columns' activation scales as floats (column c's block i at das[c * nb + i]),
// converted once per call, or null to convert them here, once per block and group.
template <class D, int C, bool X4 = false>
inline void tile4_legacy_da(int64_t nb, const uint8_t* w, size_t ws, const uint8_t* a, size_t as, float* s,
                            size_t lds, const float* das) {
    using B = typename D::Block;
    using A = ActBlock<D>;
    using L = Legacy4<D, X4>;
    __m256 acc[C];
    for (int c = 0; c < C; ++c) acc[c] = _mm256_setzero_ps();
    const B* xr[4];
    L::rows(w, ws, xr);
    for (int64_t i = 0; i < nb; ++i) {
        if constexpr (C == 1) prefetch_span<4 * sizeof(B)>(w + 4 * i * sizeof(B));
        __m256i q[8];
        __m256 wd, wm;
        L::load(xr, i, q, wd, wm);
        for (int c = 0; c < C; ++c) {
            const A& y = reinterpret_cast<const A*>(a + c * as)[i];
            const __m256i h = L::col(q, xr, i, y);
            const __m256 da = das ? _mm256_broadcast_ss(das + c * nb + i) : _mm256_set1_ps(f16(y.d));
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(h), _mm256_mul_ps(wd, da), acc[c]);
            // the min term into the same accumulator: a longer dependency chain, but the loop is
            // bound by its instruction count, and four more live registers would spill
            if constexpr (D::kMin) acc[c] = _mm256_fmadd_ps(wm, _mm256_set1_ps(f16(y.s)), acc[c]);
        }
    }
    for (int c = 0; c < C; ++c) {
        const __m128 v = _mm_add_ps(_mm256_castps256_ps128(acc[c]), _mm256_extractf128_ps(acc[c], 1));
        _mm_storeu_ps(s + c * lds, v);
    }
}
// Decoding on the four-row copy: S groups (decode_groups) x one column, each group
// tile4_legacy_da<D, 1, true>'s operations in its order, so the same bits.
template <class D, int S>
inline void legacy4_x4_col(int64_t nb, const uint8_t* const* w, const uint8_t* a, const float* das,
                           float* const* s) {
    using B = typename D::Block;
    using A = ActBlock<D>;
    using L = Legacy4<D, true>;
    __m256 acc[S];
    const B* xr[S][4];
    for (int j = 0; j < S; ++j) {
        acc[j] = _mm256_setzero_ps();
        L::rows(w[j], 0, xr[j]);
    }
    for (int64_t i = 0; i < nb; ++i) {
        const A& y = reinterpret_cast<const A*>(a)[i];
        const __m256 da = _mm256_broadcast_ss(das + i);
#pragma GCC unroll 4
        for (int j = 0; j < S; ++j) {
            prefetch_span<4 * sizeof(B)>(w[j] + 4 * i * sizeof(B));
            __m256i q[8];
            __m256 wd, wm;
            L::load(xr[j], i, q, wd, wm);
            const __m256i h = L::col(q, xr[j], i, y);
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(h), _mm256_mul_ps(wd, da), acc[j]);
            if constexpr (D::kMin) acc[j] = _mm256_fmadd_ps(wm, _mm256_set1_ps(f16(y.s)), acc[j]);
        }
    }
    store_rows4<S>(acc, s);
}
template <class D, int C, bool X4 = false>
inline void tile4_legacy(int64_t nb, const uint8_t* w, size_t ws, const uint8_t* a, size_t as, float* s,
                         size_t lds) {
    tile4_legacy_da<D, C, X4>(nb, w, ws, a, as, s, lds, nullptr);
}

// Covers an nr x nc tile with R x C micro-tiles, columns outermost so a few activation
// rows stay in L1 while the weight rows stream past them. Leftover columns use R1 x 1
// tiles. Every tile must give a (row, column) the same float operations whatever the
// number of columns, so that one-token decoding and batched prefill agree bit for bit.
template <int R, int C, int R1, void (*Full)(int64_t, const uint8_t*, size_t, const uint8_t*, size_t, float*, size_t),
          void (*Row1)(int64_t, const uint8_t*, size_t, const uint8_t*, size_t, float*, size_t),
          void (*Col1)(int64_t, const uint8_t*, size_t, const uint8_t*, size_t, float*, size_t),
          void (*One)(int64_t, const uint8_t*, size_t, const uint8_t*, size_t, float*, size_t)>
void tile_driver(int64_t nb, int nr, int nc, const void* w, size_t ws, const void* a, size_t as, float* s,
                 size_t lds) {
    const uint8_t* W = static_cast<const uint8_t*>(w);
    const uint8_t* A = static_cast<const uint8_t*>(a);
    int c = 0;
    for (; c + C <= nc; c += C) {
        int r = 0;
        for (; r + R <= nr; r += R) Full(nb, W + r * ws, ws, A + c * as, as, s + c * lds + r, lds);
        for (; r < nr; ++r) Row1(nb, W + r * ws, ws, A + c * as, as, s + c * lds + r, lds);
    }
    for (; c < nc; ++c) {
        int r = 0;
        for (; r + R1 <= nr; r += R1) Col1(nb, W + r * ws, ws, A + c * as, as, s + c * lds + r, lds);
        for (; r < nr; ++r) One(nb, W + r * ws, ws, A + c * as, as, s + c * lds + r, lds);
    }
}

// The 4- and 5-bit types unpacked for prefill: 32 unsigned bytes per block (the values
// D::dec_u gives) with the block's scales. A row is unpacked once per call instead of
// once per column tile; the tiles then read plain bytes. Same integers, same scale
// operations: the results are those of the packed blocks, bit for bit.
template <bool kE8M0>
struct UnpackedHead {
    uint16_t d, m;
};
template <>
struct UnpackedHead<true> {  // MXFP4: its exponent byte
    uint8_t e;
    uint16_t m;
};
template <class D>
struct Unpacked {
    static constexpr bool kE8M0 = HasE8M0<typename D::Block>::value;
    struct Block : UnpackedHead<kE8M0> {
        uint8_t qs[QK];
    };
    static constexpr bool kSigned = D::kSigned, kMin = D::kMin;
    static constexpr int kOffset = D::kOffset;
    static __m256i dec_u(const Block& b) { return loadu256(b.qs); }
    static __m256i dec(const Block& b) {
        if constexpr (kOffset > 0) return _mm256_sub_epi8(loadu256(b.qs), _mm256_set1_epi8((char)kOffset));
        else return loadu256(b.qs);
    }
    static void unpack(const typename D::Block& x, Block& b) {
        if constexpr (kE8M0) b.e = x.e;
        else b.d = x.d;
        if constexpr (kMin) b.m = x.m;
        else b.m = 0;
        if constexpr (kOffset > 0) _mm256_storeu_si256(reinterpret_cast<__m256i*>(b.qs), D::dec_u(x));
        else _mm256_storeu_si256(reinterpret_cast<__m256i*>(b.qs), D::dec(x));
    }
};

// ---- Q4_0 in its re-encoded four-row groups: kQ40Group and its helpers in kpanel_x86.h ----

// One group (four rows) x one column: tile4_legacy<DecQ4_0, 1>'s int32 lanes and float
// operations, so the bits of the rows as they are. Each step k lines up with the
// activations' dword k broadcast in each 128-bit half (vpshufd); the four products add
// up in int16 (8 elements of at most 15 * 128) and one madd gives the rows' 16-element
// sums [r0 r1 r2 r3 | r0 r1 r2 r3].
template <int S>
inline void q4_0_group_col(int64_t nb, const uint8_t* const* w, const Q40Act* pre, float* const* s) {
    __m256 acc[S];
    for (int j = 0; j < S; ++j) acc[j] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; ++i) {
        const Q40Act& p = pre[i];
#pragma GCC unroll 4
        for (int j = 0; j < S; ++j) {  // the streams side by side, block by block
            const uint8_t* gb = w[j] + (size_t)i * kQ40Group;
            prefetch_span<kQ40Group>(gb);
            __m256i St[4];
            q4_0_group_steps(gb, St);
            const __m256 wd = q4_0_group_scales(gb);
            const __m256i av = loadu256(p.qs);
            __m256i t = _mm256_maddubs_epi16(St[0], _mm256_shuffle_epi32(av, 0x00));
            t = _mm256_add_epi16(t, _mm256_maddubs_epi16(St[1], _mm256_shuffle_epi32(av, 0x55)));
            t = _mm256_add_epi16(t, _mm256_maddubs_epi16(St[2], _mm256_shuffle_epi32(av, 0xaa)));
            t = _mm256_add_epi16(t, _mm256_maddubs_epi16(St[3], _mm256_shuffle_epi32(av, 0xff)));
            const __m256i h = _mm256_sub_epi32(_mm256_madd_epi16(t, _mm256_set1_epi16(1)), q4_0_act_off(p));
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(h), _mm256_mul_ps(wd, _mm256_broadcast_ss(&p.d)), acc[j]);
        }
    }
    store_rows4<S>(acc, s);
}

// Q4_0 groups x nc columns (nc small: decoding, or what is left of a batch)
void q4_0_groups_cols(int64_t nb, int groups, int nc, const uint8_t* W, size_t ws, const uint8_t* A, size_t as,
                      float* s, size_t lds) {
    struct Site;
    Q40Act* const pre = thread_scratch<Q40Act, Site>((size_t)nb);
    decode_columns(groups, nc, W, ws, A, as, s, lds, [&](const BlockQ8_0* y) { q4_0_prepare(nb, y, pre); },
                   [&](auto streams, auto x, const BlockQ8_0*, float* const* o) {
                       q4_0_group_col<decltype(streams)::value>(nb, x, pre, o);
                   });
}

// ---- MXFP4 decoding on the four-row copy (the plain interleave: a group block is the four
// rows' 17-byte blocks, 68 bytes) ----
// Two rows' codes share a register ([row 0 | row 1] of the low nibbles, the high ones
// apart), the activation halves broadcast to match, so four rows take two loads, six logic
// operations and four pshufb where decoding them one by one took twenty. The int16 pair
// sums fold with hadd into the rows' 16-element sums (eight products of (u <= 24) x 127 fit
// int16), permuted to legacy4_x4_col's lanes [r0 r1 r2 r3 lo | r0 r1 r2 r3 hi]; the
// offset (u = w + 12) comes off in int32 as 12 x the activation halves' sums. The same
// integers and float operations as legacy4_x4_col<DecMXFP4>, so the same bits.
inline void mxfp4_prepare(int64_t nb, const BlockQ8_0* y, Q40Act* pre) {
    q4_0_prepare(nb, y, pre);  // 8 x the halves' sums: 12 x them here
    for (int64_t i = 0; i < nb; ++i)
        for (int h = 0; h < 2; ++h) pre[i].off[h] = pre[i].off[h] / 8 * 12;
}
template <int S>
inline void mxfp4_group_col(int64_t nb, const uint8_t* const* w, const Q40Act* pre, float* const* s) {
    constexpr size_t kB = sizeof(BlockMXFP4), kG = 4 * sizeof(BlockMXFP4);
    const __m256i table = _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(kValuesMXFP4Plus12)));
    const __m256i m4 = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
    const __m256i lanes = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    __m256 acc[S];
    for (int j = 0; j < S; ++j) acc[j] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; ++i) {
        const __m256i av = loadu256(pre[i].qs);
        const __m256i alo = _mm256_permute4x64_epi64(av, 0x44), ahi = _mm256_permute4x64_epi64(av, 0xee);
        const __m256i off = q4_0_act_off(pre[i]);
        const __m256 da = _mm256_broadcast_ss(&pre[i].d);
#pragma GCC unroll 4
        for (int j = 0; j < S; ++j) {
            const uint8_t* gb = w[j] + (size_t)i * kG;
            prefetch_span<kG>(gb);
            const __m256i v01 = _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(gb + kB + 1),
                                                    reinterpret_cast<const __m128i*>(gb + 1));
            const __m256i v23 = _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(gb + 3 * kB + 1),
                                                    reinterpret_cast<const __m128i*>(gb + 2 * kB + 1));
            const __m256i l01 = _mm256_shuffle_epi8(table, _mm256_and_si256(v01, m4));
            const __m256i h01 = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(v01, 4), m4));
            const __m256i l23 = _mm256_shuffle_epi8(table, _mm256_and_si256(v23, m4));
            const __m256i h23 = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(v23, 4), m4));
            const __m256i lo = _mm256_hadd_epi16(_mm256_maddubs_epi16(l01, alo), _mm256_maddubs_epi16(l23, alo));
            const __m256i hi = _mm256_hadd_epi16(_mm256_maddubs_epi16(h01, ahi), _mm256_maddubs_epi16(h23, ahi));
            // [r0lo r2lo r0hi r2hi | r1lo r3lo r1hi r3hi] -> [r0..r3 lo | r0..r3 hi]
            const __m256i t = _mm256_madd_epi16(_mm256_hadd_epi16(lo, hi), ones);
            const __m256i h = _mm256_sub_epi32(_mm256_permutevar8x32_epi32(t, lanes), off);
            const __m128 d = e8m0_half4(_mm_setr_epi32(gb[0], gb[kB], gb[2 * kB], gb[3 * kB]));
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(h), _mm256_mul_ps(_mm256_set_m128(d, d), da), acc[j]);
        }
    }
    store_rows4<S>(acc, s);
}
void mxfp4_groups_cols(int64_t nb, int groups, int nc, const uint8_t* W, size_t ws, const uint8_t* A, size_t as,
                       float* s, size_t lds) {
    struct Site;
    Q40Act* const pre = thread_scratch<Q40Act, Site>((size_t)nb);
    decode_columns(groups, nc, W, ws, A, as, s, lds, [&](const BlockQ8_0* y) { mxfp4_prepare(nb, y, pre); },
                   [&](auto streams, auto x, const BlockQ8_0*, float* const* o) {
                       mxfp4_group_col<decltype(streams)::value>(nb, x, pre, o);
                   });
}

// Prefill panels for the 4- and 5-bit types: four rows' blocks interleaved, with what
// tile4_legacy gathers from the four rows on every block (the f16 scales, as F32 vectors)
// converted once per panel instead of once per column tile.
//   - Offset types (Q4_0, Q5_0): the signed values w = u - off, and the activations taken
//     as unsigned bytes a + 128, so maddubs needs no per-column offset term:
//     sum (a + 128) w = sum a w + 128 sum w, and 128 sum w (per row and half-block, in
//     the lane order of the hadd fold) is stored and subtracted once per column. Pairs
//     stay within int16 (2 * 255 * 16) and every sum is exact, so the int32 lanes are the
//     ones tile4_legacy makes and the float operations after them are the same too: the
//     bits do not change.
//   - Min types (Q4_1, Q5_1): the unsigned values and [m0..m3 | 0] as well.
//   - The values stored as put_group4's four steps: an activation block with dword k
//     broadcast in each 128-bit lane (vpshufd) lines up with step k, so maddubs gives
//     int16 pair sums already in the rows' lanes; the four steps add up in int16 (the
//     same 8-element bound as the hadd fold) and one madd by ones makes the int32 lanes
//     [r0 r1 r2 r3 | r0 r1 r2 r3] that fold4_i16 makes, without horizontal adds.
struct alignas(32) Panel4 {
    float wd[8];       // [d0 d1 d2 d3 | d0 d1 d2 d3]
    float wm[8];       // [m0 m1 m2 m3 | 0 0 0 0] (min types)
    int32_t corr[8];   // 128 * sum w over elements 0-15 of rows 0-3 | over 16-31 (offset types)
    uint8_t qs[4][QK]; // [step]
};

template <class D, bool X4 = false>
void pack_panel4(const uint8_t* w, size_t ws, int64_t nb, Panel4* out) {
    using B = typename D::Block;
    if constexpr (X4 && std::is_same<D, DecQ4_0>::value) {
        // the group blocks hold the steps already: take the offset off and sum them
        (void)ws;
        for (int64_t j = 0; j < nb; ++j) {
            const uint8_t* gb = w + (size_t)j * kQ40Group;
            Panel4& p = out[j];
            _mm256_store_ps(p.wd, q4_0_group_scales(gb));
            __m256i S[4];
            q4_0_group_steps(gb, S);
            __m256i t = _mm256_setzero_si256();
            for (int k = 0; k < 4; ++k) {
                S[k] = _mm256_sub_epi8(S[k], _mm256_set1_epi8((char)D::kOffset));
                t = _mm256_add_epi16(t, _mm256_maddubs_epi16(_mm256_set1_epi8(1), S[k]));
                _mm256_store_si256(reinterpret_cast<__m256i*>(p.qs[k]), S[k]);
            }
            _mm256_store_si256(reinterpret_cast<__m256i*>(p.corr),
                               _mm256_slli_epi32(_mm256_madd_epi16(t, _mm256_set1_epi16(1)), 7));
        }
        return;
    }
    const B* x[4];
    for (int r = 0; r < 4; ++r) x[r] = X4 ? reinterpret_cast<const B*>(w) + r : reinterpret_cast<const B*>(w + r * ws);
    for (int64_t j = 0; j < nb; ++j) {
        const int64_t i = X4 ? 4 * j : j;  // the rows' blocks j
        Panel4& p = out[j];
        _mm256_store_ps(p.wd, block_scales4(x[0][i], x[1][i], x[2][i], x[3][i]));
        if constexpr (D::kMin)
            _mm256_store_ps(p.wm, _mm256_cvtph_ps(pack_u16x4(x[0][i].m, x[1][i].m, x[2][i].m, x[3][i].m)));
        __m256i q[4];
        if constexpr (D::kOffset > 0) {
            __m256i pairs[4];  // pair sums of w (maddubs by ones)
            for (int r = 0; r < 4; ++r) {
                q[r] = _mm256_sub_epi8(D::dec_u(x[r][i]), _mm256_set1_epi8((char)D::kOffset));
                pairs[r] = _mm256_maddubs_epi16(_mm256_set1_epi8(1), q[r]);
            }
            const __m256i h = fold4_i16(pairs[0], pairs[1], pairs[2], pairs[3]);
            _mm256_store_si256(reinterpret_cast<__m256i*>(p.corr), _mm256_slli_epi32(h, 7));
        } else {
            for (int r = 0; r < 4; ++r) q[r] = D::dec(x[r][i]);
        }
        put_group4(q, p.qs);
    }
}

// Four panel rows x C columns: tile4_legacy's float operations on the same int32 lanes.
template <class D, int C>
inline void tile4_panel(int64_t nb, const Panel4* pw, const uint8_t* a, size_t as, float* s, size_t lds) {
    using A = ActBlock<D>;
    __m256 acc[C];
    for (int c = 0; c < C; ++c) acc[c] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; ++i) {
        const Panel4& p = pw[i];
        __m256i q[4];
        for (int k = 0; k < 4; ++k) q[k] = _mm256_load_si256(reinterpret_cast<const __m256i*>(p.qs[k]));
        const __m256 wd = _mm256_load_ps(p.wd);
        for (int c = 0; c < C; ++c) {
            const A& y = reinterpret_cast<const A*>(a + c * as)[i];
            __m256i h;
            if constexpr (D::kOffset > 0) {
                // 8-element sums of (a + 128) w stay within int16: 8 * 255 * 16 = 32640
                const __m256i au = _mm256_xor_si256(loadu256(y.qs), _mm256_set1_epi8((char)0x80));
                __m256i t = _mm256_maddubs_epi16(_mm256_shuffle_epi32(au, 0x00), q[0]);
                t = _mm256_add_epi16(t, _mm256_maddubs_epi16(_mm256_shuffle_epi32(au, 0x55), q[1]));
                t = _mm256_add_epi16(t, _mm256_maddubs_epi16(_mm256_shuffle_epi32(au, 0xaa), q[2]));
                t = _mm256_add_epi16(t, _mm256_maddubs_epi16(_mm256_shuffle_epi32(au, 0xff), q[3]));
                h = _mm256_sub_epi32(_mm256_madd_epi16(t, _mm256_set1_epi16(1)),
                                     _mm256_load_si256(reinterpret_cast<const __m256i*>(p.corr)));
            } else {
                const __m256i av = loadu256(y.qs);
                __m256i t = _mm256_maddubs_epi16(q[0], _mm256_shuffle_epi32(av, 0x00));
                t = _mm256_add_epi16(t, _mm256_maddubs_epi16(q[1], _mm256_shuffle_epi32(av, 0x55)));
                t = _mm256_add_epi16(t, _mm256_maddubs_epi16(q[2], _mm256_shuffle_epi32(av, 0xaa)));
                t = _mm256_add_epi16(t, _mm256_maddubs_epi16(q[3], _mm256_shuffle_epi32(av, 0xff)));
                h = _mm256_madd_epi16(t, _mm256_set1_epi16(1));
            }
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(h), _mm256_mul_ps(wd, _mm256_set1_ps(f16(y.d))), acc[c]);
            if constexpr (D::kMin) acc[c] = _mm256_fmadd_ps(_mm256_load_ps(p.wm), _mm256_set1_ps(f16(y.s)), acc[c]);
        }
    }
    for (int c = 0; c < C; ++c)
        _mm_storeu_ps(s + c * lds, _mm_add_ps(_mm256_castps256_ps128(acc[c]), _mm256_extractf128_ps(acc[c], 1)));
}

// One prefill panel buffer per thread and type, for both layouts
template <class D>
Panel4* panel4_buffer(size_t n) {
    struct Site;
    return thread_scratch<Panel4, Site>(n);
}

// Rows as they are (X4 false), or in four-row groups (RowGroups, nr a multiple of 4): a
// group's four rows are then one read stream, block by block. Decoding reads the rows of a
// tile4_legacy side by side; from the row-major file that was four streams per thread,
// which drew from memory at 0.75-0.8 of one stream's rate on Zen 3 (1B-3B models, one and
// two threads). Same tiles, same integers and float operations: the same bits. (With X4
// the one-row tiles, which read rows as they are, never run: no rows are left over.)
template <class D, int C, bool X4>
void gemm_legacy_rows(int64_t n, int nr, int nc, const void* w, size_t ws, const void* a, size_t as, float* s,
                      size_t lds) {
    const int64_t nb = n / QK;
    if constexpr (!kWideSigned<D>) {  // Q8_0's blocks are bytes already; the table types' pshufb is cheap
        if (nc >= C) {
            const uint8_t* W = static_cast<const uint8_t*>(w);
            const uint8_t* Ac = static_cast<const uint8_t*>(a);
            // rows in fours: interleaved panels (std::vector keeps Panel4's alignment)
            const int groups = nr / 4;
            Panel4* const p4 = panel4_buffer<D>((size_t)(groups * nb));
            for (int g = 0; g < groups; ++g) pack_panel4<D, X4>(W + (size_t)(4 * g) * ws, ws, nb, p4 + g * nb);
            int c = 0;
            for (; c + C <= nc; c += C)
                for (int g = 0; g < groups; ++g)
                    tile4_panel<D, C>(nb, p4 + g * nb, Ac + c * as, as, s + c * lds + 4 * g, lds);
            for (; c < nc; ++c)
                for (int g = 0; g < groups; ++g)
                    tile4_panel<D, 1>(nb, p4 + g * nb, Ac + c * as, as, s + c * lds + 4 * g, lds);
            // leftover rows: one at a time, as in decoding (tile_legacy); none with X4
            const int r0 = 4 * groups;
            if constexpr (!X4) if (r0 < nr) {
                using U = Unpacked<D>;
                using UB = typename U::Block;
                struct Site;
                const int left = nr - r0;
                UB* const panel = thread_scratch<UB, Site>((size_t)(left * nb));
                for (int r = 0; r < left; ++r) {
                    const auto* x = reinterpret_cast<const typename D::Block*>(W + (size_t)(r0 + r) * ws);
                    for (int64_t i = 0; i < nb; ++i) U::unpack(x[i], panel[(size_t)(r * nb + i)]);
                }
                tile_driver<4, C, 4, tile4_legacy<U, C>, tile_legacy<U, 1, C>, tile4_legacy<U, 1>, tile_legacy<U, 1, 1>>(
                    nb, left, nc, panel, (size_t)nb * sizeof(UB), a, as, s + r0, lds);
            }
            return;
        }
    }
    if constexpr (X4 && std::is_same<D, DecQ4_0>::value) {  // re-encoded groups, nr a multiple of 4
        q4_0_groups_cols(nb, nr / 4, nc, static_cast<const uint8_t*>(w), ws, static_cast<const uint8_t*>(a), as, s,
                         lds);
        return;
    }
    if constexpr (X4 && std::is_same<D, DecMXFP4>::value) {  // nr a multiple of 4
        mxfp4_groups_cols(nb, nr / 4, nc, static_cast<const uint8_t*>(w), ws, static_cast<const uint8_t*>(a), as, s,
                          lds);
        return;
    }
    // tile_driver's order of tiles, with the activation scales converted once per call
    // (per four rows and block, the conversion was a tenth of a Q8_0 tile's instructions)
    using A = ActBlock<D>;
    struct Site;
    float* const das = thread_scratch<float, Site>((size_t)(nc * nb));
    const uint8_t* W = static_cast<const uint8_t*>(w);
    const uint8_t* Ac = static_cast<const uint8_t*>(a);
    for (int c = 0; c < nc; ++c) {
        const A* y = reinterpret_cast<const A*>(Ac + (size_t)c * as);
        for (int64_t i = 0; i < nb; ++i) das[(size_t)(c * nb + i)] = f16(y[i].d);
    }
    int c = 0;
    for (; c + C <= nc; c += C) {
        int r = 0;
        for (; r + 4 <= nr; r += 4)
            tile4_legacy_da<D, C, X4>(nb, W + (size_t)r * ws, ws, Ac + (size_t)c * as, as, s + (size_t)c * lds + r, lds,
                                      das + (size_t)c * nb);
        for (; r < nr; ++r) tile_legacy<D, 1, C>(nb, W + (size_t)r * ws, ws, Ac + (size_t)c * as, as, s + (size_t)c * lds + r, lds);
    }
    for (; c < nc; ++c) {
        int r = 0;
        if constexpr (X4) {  // the groups as three streams (decode_groups); nr is a multiple of 4
            const uint8_t* const ac = Ac + (size_t)c * as;
            const float* const dc = das + (size_t)c * nb;
            float* const out = s + (size_t)c * lds;
            decode_groups<3>(nr / 4, [&](int g) { return W + (size_t)(4 * g) * ws; }, out,
                          [&](auto streams, auto x, float* const* o) {
                legacy4_x4_col<D, decltype(streams)::value>(nb, x, ac, dc, o);
            });
            r = nr / 4 * 4;
        }
        for (; r + 4 <= nr; r += 4)
            tile4_legacy_da<D, 1, X4>(nb, W + (size_t)r * ws, ws, Ac + (size_t)c * as, as, s + (size_t)c * lds + r, lds,
                                      das + (size_t)c * nb);
        for (; r < nr; ++r) tile_legacy<D, 1, 1>(nb, W + (size_t)r * ws, ws, Ac + (size_t)c * as, as, s + (size_t)c * lds + r, lds);
    }
}
template <class D, int C>
void gemm_legacy(int64_t n, int nr, int nc, const void* w, size_t ws, const void* a, size_t as, float* s,
                 size_t lds) {
    gemm_legacy_rows<D, C, false>(n, nr, nc, w, ws, a, as, s, lds);
}
template <class D, int C>
void gemm_legacy_x4(int64_t n, int nr, int nc, const void* w, size_t ws, const void* a, size_t as, float* s,
                    size_t lds) {
    gemm_legacy_rows<D, C, true>(n, nr, nc, w, ws, a, as, s, lds);
}



// ---- float weights: F32 activations ---------------------------------------------------

struct LoadF32 {
    static constexpr int kBytes = 4;
    static __m256 load(const uint8_t* p, int64_t i) { return _mm256_loadu_ps(reinterpret_cast<const float*>(p) + i); }
};
struct LoadF16 {
    static constexpr int kBytes = 2;
    static __m256 load(const uint8_t* p, int64_t i) {
        return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * i)));
    }
};
struct LoadBF16 {
    static constexpr int kBytes = 2;
    static __m256 load(const uint8_t* p, int64_t i) {
        const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * i)));
        return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
    }
};
template <class L>
float scalar_w(const uint8_t* p, int64_t i);
template <>
float scalar_w<LoadF32>(const uint8_t* p, int64_t i) { return reinterpret_cast<const float*>(p)[i]; }
template <>
float scalar_w<LoadF16>(const uint8_t* p, int64_t i) {
    uint16_t h;
    std::memcpy(&h, p + 2 * i, 2);
    return fp16_to_fp32(h);
}
template <>
float scalar_w<LoadBF16>(const uint8_t* p, int64_t i) {
    uint16_t h;
    std::memcpy(&h, p + 2 * i, 2);
    return bf16_to_fp32(h);
}

// n 16-bit (or F32) values as F32, exactly.
template <class L>
void widen_row(const uint8_t* src, float* dst, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, L::load(src, i));
    for (; i < n; ++i) dst[i] = scalar_w<L>(src, i);
}

// L loads the weights, A the activations (F32, or F16 for F16 weights).
template <class L, class A = LoadF32>
void vec_dot_float(int64_t n, float* s, const void* w, const void* a) {
    const uint8_t* x = static_cast<const uint8_t*>(w);
    const uint8_t* y = static_cast<const uint8_t*>(a);
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps(), acc2 = _mm256_setzero_ps(),
           acc3 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        acc0 = _mm256_fmadd_ps(L::load(x, i), A::load(y, i), acc0);
        acc1 = _mm256_fmadd_ps(L::load(x, i + 8), A::load(y, i + 8), acc1);
        acc2 = _mm256_fmadd_ps(L::load(x, i + 16), A::load(y, i + 16), acc2);
        acc3 = _mm256_fmadd_ps(L::load(x, i + 24), A::load(y, i + 24), acc3);
    }
    for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(L::load(x, i), A::load(y, i), acc0);
    float r = hsum(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
    for (; i < n; ++i) r += scalar_w<L>(x, i) * scalar_w<A>(y, i);
    *s = r;
}

template <class L, int R, int C, class A = LoadF32>
inline void tile_float(int64_t n, const uint8_t* w, size_t ws, const uint8_t* a, size_t as, float* s, size_t lds) {
    __m256 acc[R][C];
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
    int64_t i = 0;
    if constexpr (C == 1) {
        // Decoding streams the weights once: keep the prefetch stream ahead, and use each
        // weight vector as it is loaded (holding all R first would spill the accumulators).
        for (; i + 8 <= n; i += 8) {
            prefetch_ahead(w + R * i * L::kBytes, w + R * (i + 8) * L::kBytes);
            const __m256 x = A::load(a, i);
            for (int r = 0; r < R; ++r) acc[r][0] = _mm256_fmadd_ps(L::load(w + r * ws, i), x, acc[r][0]);
        }
    } else {
        // The C activation vectors stay in registers and each weight vector is used as
        // it loads: R*C accumulators + C + 1 registers (16 for 4x3), R + C loads.
        for (; i + 8 <= n; i += 8) {
            __m256 av[C];
            for (int c = 0; c < C; ++c) av[c] = A::load(a + c * as, i);
            for (int r = 0; r < R; ++r) {
                const __m256 wv = L::load(w + r * ws, i);
                for (int c = 0; c < C; ++c) acc[r][c] = _mm256_fmadd_ps(wv, av[c], acc[r][c]);
            }
        }
    }
    // Horizontal sums four rows at a time (one hadd tree for four accumulators: with
    // short rows the epilogue is a good part of a tile's time). Rows in groups of four
    // are always summed this way, whatever C is, so the bits do not depend on N.
    for (int c = 0; c < C; ++c) {
        int r = 0;
        for (; r + 4 <= R; r += 4) {
            const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(acc[r][c], acc[r + 1][c]),
                                            _mm256_hadd_ps(acc[r + 2][c], acc[r + 3][c]));
            const __m128 h4 = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
            if (i == n) {  // no tail: the four sums are the results
                _mm_storeu_ps(s + c * lds + r, h4);
                continue;
            }
            alignas(16) float t4[4];
            _mm_store_ps(t4, h4);
            for (int k = 0; k < 4; ++k) {
                float t = t4[k];
                for (int64_t j = i; j < n; ++j)
                    t += scalar_w<L>(w + (r + k) * ws, j) * scalar_w<A>(a + c * as, j);
                s[c * lds + r + k] = t;
            }
        }
        for (; r < R; ++r) {
            float t = hsum(acc[r][c]);
            for (int64_t j = i; j < n; ++j) t += scalar_w<L>(w + r * ws, j) * scalar_w<A>(a + c * as, j);
            s[c * lds + r] = t;
        }
    }
}

template <class L, int R, int C, class A = LoadF32>
void gemm_float(int64_t n, int nr, int nc, const void* w, size_t ws, const void* a, size_t as, float* s,
                size_t lds) {
    if constexpr (!std::is_same<A, LoadF32>::value) {
        if (nc == 1) {
            // Decoding: widen the one activation row to F32 first (exact, so the bits are
            // those of the batched tiles); converting it again for every four rows would
            // make the converts, not the weight stream, the limit.
            struct Site;
            float* const wide = thread_scratch<float, Site>((size_t)n);
            widen_row<A>(static_cast<const uint8_t*>(a), wide, n);
            gemm_float<L, R, C, LoadF32>(n, nr, 1, w, ws, wide, (size_t)n * sizeof(float), s, lds);
            return;
        }
    }
    tile_driver<R, C, 4, tile_float<L, R, C, A>, tile_float<L, 1, C, A>, tile_float<L, 4, 1, A>,
                tile_float<L, 1, 1, A>>(n, nr, nc, w, ws, a, as, s, lds);
}

// BF16 weights for several columns: the rows are widened to F32 once (into a per-thread
// buffer that stays in L2) instead of once per column tile, then the F32 tiles run on
// them. Widening is exact, so every (row, column) gets the same operations and bits as
// through the 16-bit tiles.
template <class L>
void gemm_wide(int64_t n, int nr, int nc, const void* w, size_t ws, const void* a, size_t as, float* s,
               size_t lds) {
    if (nc < 4) {
        gemm_float<L, 4, 3>(n, nr, nc, w, ws, a, as, s, lds);
        return;
    }
    // eight rows at a time: with their F32 copy (and a few activation columns) in L1
    constexpr int kRows = 8;
    struct Site;
    float* const wide = thread_scratch<float, Site>((size_t)(kRows * n));
    const uint8_t* W = static_cast<const uint8_t*>(w);
    for (int r0 = 0; r0 < nr; r0 += kRows) {
        const int rows = nr - r0 < kRows ? nr - r0 : kRows;
        for (int r = 0; r < rows; ++r) {
            widen_row<L>(W + (size_t)(r0 + r) * ws, wide + (size_t)r * (size_t)n, n);
        }
        gemm_float<LoadF32, 4, 3>(n, rows, nc, wide, (size_t)n * sizeof(float), a, as, s + r0, lds);
    }
}

// ---- K-quants x Q8_K --------------------------------------------------------------------

// One super-block's float update, in exactly the operations ktile4x (the prefill tile)
// performs per row, so one-token decoding and batched prefill agree bit for bit: the
// integer sums split into the first/second 16 of each 32 ("lo"/"hi" 128-bit halves) and
// the mins into groups 0-7 / 8-15, each half fused-multiply-added separately.
struct KAcc {
    float lo = 0.0f, hi = 0.0f;
    void add(int isum_lo, int isum_hi, int min_lo, int min_hi, float d, float dmin, float da) {
        const __m128 dda = _mm_set_ss(d * da), dmda = _mm_set_ss(dmin * da);
        __m128 l = _mm_set_ss(lo), h = _mm_set_ss(hi);
        l = _mm_fmadd_ss(_mm_set_ss((float)isum_lo), dda, l);
        h = _mm_fmadd_ss(_mm_set_ss((float)isum_hi), dda, h);
        l = _mm_fnmadd_ss(_mm_set_ss((float)min_lo), dmda, l);
        h = _mm_fnmadd_ss(_mm_set_ss((float)min_hi), dmda, h);
        lo = _mm_cvtss_f32(l);
        hi = _mm_cvtss_f32(h);
    }
    float result() const { return lo + hi; }
};
inline int hsum_lo(__m256i v) {
    __m128i s = _mm256_castsi256_si128(v);
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}
inline int hsum_hi(__m256i v) {
    __m128i s = _mm256_extracti128_si256(v, 1);
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

// int16 scales for two groups of 16 (one per 128-bit lane of a maddubs result)
inline __m256i scales2(int s0, int s1) {
    return _mm256_set_m128i(_mm_set1_epi16((short)s1), _mm_set1_epi16((short)s0));
}
// sum over 32 elements of sc(group) * q * a, q unsigned (<= 63)
inline __m256i kdot16(__m256i q, const int8_t* a, __m256i sc) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(q, loadu256(a)), sc);
}
inline __m256i kdot32(__m256i q, const int8_t* a, int sc) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(q, loadu256(a)), _mm256_set1_epi16((short)sc));
}

// Q4_K/Q5_K's twelve scale bytes as 32-bit words: the eight 6-bit scales end up in
// bytes 0-7 and the eight 6-bit mins in bytes 8-15 (the same values k_scale_min_ref
// gives, four at a time: low six bits of bytes 0-3 / 4-7, and for groups 4-7 a low
// nibble from bytes 8-11 with the top two bits of bytes 0-3 / 4-7 above it).
inline void k_scales_mins(const uint8_t* scales, uint32_t u[4]) {
    constexpr uint32_t low6 = 0x3f3f3f3f, low4 = 0x0f0f0f0f, low2 = 0x03030303;
    std::memcpy(u, scales, 12);
    const uint32_t b0 = u[0], b4 = u[1], b8 = u[2];
    u[0] = b0 & low6;                                   // scales 0-3
    u[1] = (b8 & low4) | (((b0 >> 6) & low2) << 4);     // scales 4-7
    u[2] = b4 & low6;                                   // mins 0-3
    u[3] = ((b8 >> 4) & low4) | (((b4 >> 6) & low2) << 4);  // mins 4-7
}

// One super-block's exact integer sums, kept as vectors: the lanes 0-3 of `isum` add up
// to the scaled integer dot over the block's "lo" halves (KAcc's split, see above) and
// lanes 4-7 to the "hi" halves; `imin` likewise for the min term (zero for the types
// without mins, whose offsets are folded into isum). Integer sums are exact, so however
// the lanes are added up later the totals, and so the float updates, are the same.
struct KSums {
    __m256i isum, imin;
};

// [c0 | c1] with c0's four lanes adding up to the sum of `even` and c1's to that of `odd`
inline __m256i halves(__m256i even, __m256i odd) {
    const __m128i e = _mm_add_epi32(_mm256_castsi256_si128(even), _mm256_extracti128_si256(even, 1));
    const __m128i o = _mm_add_epi32(_mm256_castsi256_si128(odd), _mm256_extracti128_si256(odd, 1));
    return _mm256_set_m128i(o, e);
}
// sum over the even / odd groups g of sc[g] * bsums[g] (sc: sixteen int16), as halves()
inline __m256i even_odd_corr(__m256i sc16, const int16_t* bsums) {
    const __m256i bs = loadu256(bsums);
    const __m256i even = _mm256_madd_epi16(_mm256_and_si256(sc16, _mm256_set1_epi32(0x0000ffff)), bs);
    const __m256i odd = _mm256_madd_epi16(_mm256_and_si256(sc16, _mm256_set1_epi32((int)0xffff0000u)), bs);
    return halves(even, odd);
}

// For the sixteen-element groups of Q2_K/Q3_K/Q6_K: int16 scales 2k in the low 128-bit
// lane and 2k + 1 in the high one, picked from eight int16 scales repeated in both lanes
alignas(32) const int8_t kPairShuffle[4][32] = {
#define EMBER_PAIR(j) (int8_t)(2 * (j)), (int8_t)(2 * (j) + 1)
#define EMBER_LANE(j) EMBER_PAIR(j), EMBER_PAIR(j), EMBER_PAIR(j), EMBER_PAIR(j), EMBER_PAIR(j), EMBER_PAIR(j), \
                      EMBER_PAIR(j), EMBER_PAIR(j)
    {EMBER_LANE(0), EMBER_LANE(1)}, {EMBER_LANE(2), EMBER_LANE(3)}, {EMBER_LANE(4), EMBER_LANE(5)},
    {EMBER_LANE(6), EMBER_LANE(7)},
#undef EMBER_LANE
#undef EMBER_PAIR
};
// scales2(sc[8h + 2k], sc[8h + 2k + 1]) for sixteen int16 scales sc16, h = 0 or 1
inline __m256i pair_scales(__m256i sc16, int h, int k) {
    const __m256i eight = h ? _mm256_permute2x128_si256(sc16, sc16, 0x11) : _mm256_permute2x128_si256(sc16, sc16, 0x00);
    return _mm256_shuffle_epi8(eight, loadu256(kPairShuffle[k]));
}

inline KSums k_sums(const BlockQ2_K& x, const BlockQ8_K& y) {
    const __m256i m3 = _mm256_set1_epi8(3);
    const __m128i sb = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x.scales));
    // mins of the sixteen groups times their activation sums: lanes 0-3 cover groups 0-7
    const __m256i mins16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sb, 4), _mm_set1_epi8(0x0f)));
    const __m256i sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(sb, _mm_set1_epi8(0x0f)));
    KSums k;
    k.imin = _mm256_madd_epi16(mins16, loadu256(y.bsums));
    __m256i isum = _mm256_setzero_si256();
    for (int c = 0; c < 2; ++c) {
        const __m256i qv = loadu256(x.qs + 32 * c);
        for (int sh = 0; sh < 4; ++sh) {  // 32 elements c*128 + sh*32: groups 2(4c+sh), +1
            const int g = 2 * (4 * c + sh);
            const __m256i q = _mm256_and_si256(_mm256_srli_epi16(qv, 2 * sh), m3);
            isum = _mm256_add_epi32(isum, kdot16(q, y.qs + 16 * g, pair_scales(sc16, c, sh)));
        }
    }
    k.isum = isum;
    return k;
}

inline KSums k_sums(const BlockQ3_K& x, const BlockQ8_K& y) {
    const __m256i m3 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
    // the sixteen 6-bit scales, four per word: low nibbles from bytes 0-7 (groups 0-7) or
    // their high nibbles (8-15), the top two bits from bytes 8-11, two bits per group of four
    constexpr uint32_t low4 = 0x0f0f0f0f, low2 = 0x03030303;
    uint32_t b[3];
    std::memcpy(b, x.scales, 12);
    const uint32_t u0 = (b[0] & low4) | ((b[2] & low2) << 4), u1 = (b[1] & low4) | (((b[2] >> 2) & low2) << 4);
    const uint32_t u2 = ((b[0] >> 4) & low4) | (((b[2] >> 4) & low2) << 4);
    const uint32_t u3 = ((b[1] >> 4) & low4) | (((b[2] >> 6) & low2) << 4);
    const __m256i sc16 = _mm256_sub_epi16(_mm256_cvtepu8_epi16(_mm_set_epi32((int)u3, (int)u2, (int)u1, (int)u0)),
                                          _mm256_set1_epi16(32));
    const __m256i hm = loadu256(x.hmask);
    __m256i isum = _mm256_setzero_si256();
    for (int c = 0; c < 2; ++c) {
        const __m256i qv = loadu256(x.qs + 32 * c);
        for (int sh = 0; sh < 4; ++sh) {
            const int k = 4 * c + sh, g = 2 * k;
            const __m256i hb = _mm256_and_si256(_mm256_srli_epi16(hm, k), one);
            const __m256i q = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qv, 2 * sh), m3),
                                              _mm256_slli_epi16(hb, 2));
            isum = _mm256_add_epi32(isum, kdot16(q, y.qs + 16 * g, pair_scales(sc16, c, sh)));
        }
    }
    // q = ql + 4 * hbit - 4: the -4 goes through the activation sums (even groups: lo)
    const __m256i corr = even_odd_corr(sc16, y.bsums);
    return {_mm256_sub_epi32(isum, _mm256_slli_epi32(corr, 2)), _mm256_setzero_si256()};
}

// For the eight 32-element groups j of a Q4_K/Q5_K block: int16 lanes all holding scale j
// (byte pairs 2j, 2j+1 of the eight scales widened to int16 and repeated per lane)
alignas(32) const int8_t kScaleShuffle[8][32] = {
#define EMBER_PAIR(j) (int8_t)(2 * (j)), (int8_t)(2 * (j) + 1)
#define EMBER_ROW(j) {EMBER_PAIR(j), EMBER_PAIR(j), EMBER_PAIR(j), EMBER_PAIR(j), EMBER_PAIR(j), EMBER_PAIR(j), \
                      EMBER_PAIR(j), EMBER_PAIR(j), EMBER_PAIR(j), EMBER_PAIR(j), EMBER_PAIR(j), EMBER_PAIR(j),   \
                      EMBER_PAIR(j), EMBER_PAIR(j), EMBER_PAIR(j), EMBER_PAIR(j)}
    EMBER_ROW(0), EMBER_ROW(1), EMBER_ROW(2), EMBER_ROW(3), EMBER_ROW(4), EMBER_ROW(5), EMBER_ROW(6), EMBER_ROW(7),
#undef EMBER_ROW
#undef EMBER_PAIR
};

template <class B>
inline KSums k_sums_q45(const B& x, const BlockQ8_K& y) {
    constexpr bool kQ5 = std::is_same<B, BlockQ5_K>::value;
    uint32_t u[4];
    k_scales_mins(x.scales, u);
    // the eight 32-group activation sums times the mins: lanes 0-3 are groups 0-3
    const __m256i g = _mm256_madd_epi16(loadu256(y.bsums), _mm256_set1_epi16(1));
    const __m256i m = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(u + 2)));
    KSums k;
    k.imin = _mm256_mullo_epi32(g, m);
    const __m256i sc = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(u))));
    __m256i hv = _mm256_setzero_si256();
    if constexpr (kQ5) hv = loadu256(x.qh);
    __m256i isum = _mm256_setzero_si256();
    for (int j = 0; j < 4; ++j) {
        __m256i lo, hi;
        q45_values<kQ5>(x.qs, hv, j, &lo, &hi);
        const __m256i s_lo = _mm256_shuffle_epi8(sc, loadu256(kScaleShuffle[2 * j]));
        const __m256i s_hi = _mm256_shuffle_epi8(sc, loadu256(kScaleShuffle[2 * j + 1]));
        const __m256i p_lo = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, loadu256(y.qs + 64 * j)), s_lo);
        const __m256i p_hi = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, loadu256(y.qs + 64 * j + 32)), s_hi);
        isum = _mm256_add_epi32(isum, _mm256_add_epi32(p_lo, p_hi));
    }
    k.isum = isum;
    return k;
}
inline KSums k_sums(const BlockQ4_K& x, const BlockQ8_K& y) { return k_sums_q45(x, y); }
inline KSums k_sums(const BlockQ5_K& x, const BlockQ8_K& y) { return k_sums_q45(x, y); }

inline KSums k_sums(const BlockQ6_K& x, const BlockQ8_K& y) {
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x.scales)));
    __m256i isum = _mm256_setzero_si256();
    for (int c = 0; c < 2; ++c) {
        __m256i q[4];
        q6_values(x, c, q);
        const int8_t* ya = y.qs + 128 * c;
        const __m256i p0 = kdot16(q[0], ya, pair_scales(sc16, c, 0));
        const __m256i p1 = kdot16(q[1], ya + 32, pair_scales(sc16, c, 1));
        const __m256i p2 = kdot16(q[2], ya + 64, pair_scales(sc16, c, 2));
        const __m256i p3 = kdot16(q[3], ya + 96, pair_scales(sc16, c, 3));
        isum = _mm256_add_epi32(isum, _mm256_add_epi32(_mm256_add_epi32(p0, p1), _mm256_add_epi32(p2, p3)));
    }
    // q - 32: the -32 goes through the activation sums (even groups: lo)
    const __m256i corr = even_odd_corr(sc16, y.bsums);
    return {_mm256_sub_epi32(isum, _mm256_slli_epi32(corr, 5)), _mm256_setzero_si256()};
}

// The f16 scales a super-block multiplies its sums by (no min scale: 0, as f16)
inline uint16_t k_dmin(const BlockQ2_K& x) { return x.dmin; }
inline uint16_t k_dmin(const BlockQ3_K&) { return 0; }
inline uint16_t k_dmin(const BlockQ4_K& x) { return x.dmin; }
inline uint16_t k_dmin(const BlockQ5_K& x) { return x.dmin; }
inline uint16_t k_dmin(const BlockQ6_K&) { return 0; }

template <class B>
void vec_dot_k(int64_t n, float* s, const void* w, const void* a) {
    const B* x = static_cast<const B*>(w);
    const BlockQ8_K* y = static_cast<const BlockQ8_K*>(a);
    KAcc acc;
    for (int64_t i = 0; i < n / QK_K; ++i) {
        const KSums k = k_sums(x[i], y[i]);
        int ilo = hsum_lo(k.isum), ihi = hsum_hi(k.isum), mlo = hsum_lo(k.imin), mhi = hsum_hi(k.imin);
        if constexpr (kKWhole32<B>) {  // lo + hi, 0 (kpanel_x86.h)
            ilo += ihi;
            mlo += mhi;
            ihi = mhi = 0;
        }
        acc.add(ilo, ihi, mlo, mhi, f16(x[i].d), f16(k_dmin(x[i])), y[i].d);
    }
    *s = acc.result();
}

// [lo(v0) .. lo(v7)] and [hi(v0) .. hi(v7)]: lo the sum of lanes 0-3, hi of lanes 4-7
inline void fold8(const __m256i* v, __m256i* lo, __m256i* hi) {
    const __m256i a = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
    const __m256i b = _mm256_hadd_epi32(_mm256_hadd_epi32(v[4], v[5]), _mm256_hadd_epi32(v[6], v[7]));
    *lo = _mm256_permute2x128_si256(a, b, 0x20);
    *hi = _mm256_permute2x128_si256(a, b, 0x31);
}

// Decoding, eight rows at a time: each row streams through k_sums front to back (one
// read stream), its exact per-block integer sums parked in a small buffer; then the
// eight rows' horizontal sums and float updates run side by side, lane r doing row r's
// KAcc::add. The float operations per row are vec_dot_k's (and so ktile4x's), in the same
// order: the bits do not change, only the instruction count per byte does.
template <class B>
void decode_k(int64_t nbk, int nr, const uint8_t* W, size_t ws, const BlockQ8_K* y, float* s) {
    struct Parked {
        __m256i isum[8], imin[8];
        alignas(16) uint16_t d[8], dmin[8];
    };
    struct Site;
    Parked* const park = thread_scratch<Parked, Site>((size_t)nbk);  // the longest row so far
    const size_t row = (size_t)nbk * sizeof(B);
    int r = 0;
    for (; r + 8 <= nr; r += 8) {
        for (int rr = 0; rr < 8; ++rr) {
            const uint8_t* p = W + (size_t)(r + rr) * ws;
            prefetch_ahead(p, p + row);
            const B* x = reinterpret_cast<const B*>(p);
            for (int64_t i = 0; i < nbk; ++i) {
                const KSums k = k_sums(x[i], y[i]);
                Parked& q = park[(size_t)i];
                q.isum[rr] = k.isum;
                q.imin[rr] = k.imin;
                q.d[rr] = x[i].d;
                q.dmin[rr] = k_dmin(x[i]);
            }
        }
        __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
        for (int64_t i = 0; i < nbk; ++i) {
            const Parked& q = park[(size_t)i];
            __m256i ilo, ihi, mlo, mhi;
            fold8(q.isum, &ilo, &ihi);
            fold8(q.imin, &mlo, &mhi);
            if constexpr (kKWhole32<B>) {  // lo + hi, 0 (kpanel_x86.h)
                ilo = _mm256_add_epi32(ilo, ihi);
                mlo = _mm256_add_epi32(mlo, mhi);
                ihi = mhi = _mm256_setzero_si256();
            }
            const __m256 da = _mm256_set1_ps(y[i].d);
            const __m256 dda = _mm256_mul_ps(_mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(q.d))), da);
            const __m256 dmda =
                _mm256_mul_ps(_mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(q.dmin))), da);
            lo = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ilo), dda, lo);
            hi = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ihi), dda, hi);
            lo = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(mlo), dmda, lo);
            hi = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(mhi), dmda, hi);
        }
        _mm256_storeu_ps(s + r, _mm256_add_ps(lo, hi));
    }
    for (; r < nr; ++r) {
        const uint8_t* p = W + (size_t)r * ws;
        prefetch_ahead(p, p + row);
        vec_dot_k<B>(nbk * QK_K, s + r, p, y);
    }
}
// ---- K-quant prefill: four rows interleaved, no horizontal adds in the inner loop ----
//
// A super-block of four rows is laid out (once per gemm call: pack4) as 32 vectors, one
// per step of 8 elements: for 32-group g and step k, the low 128 bits hold rows 0-3's
// unsigned values u[32g + 4k .. +3] (the "lo" half of the group), the high 128 bits
// their u[32g + 16 + 4k .. +3] ("hi"). An activation group's 32 bytes with dword k
// broadcast in each 128-bit lane (one vpshufd) line up with it, so maddubs + madd land
// row r's lo sum in lane r and its hi sum in lane 4 + r: the [r0..r3 lo | r0..r3 hi]
// lanes decode_k reduces to, without a horizontal add. The int16 pair sums of the four
// steps of a group add up in int16 before one madd by the group's scales (|u a| pairs
// <= 2 * 31 * 127, four of them < 2^15; Q6_K's u <= 63 folds every two). Every integer
// equals the one decode_k computes and the float updates are KAcc's, so decode and
// prefill keep identical bits.
struct alignas(32) KPanel4 {
    uint8_t q[8][4][32];  // [group][step]: see above
    int16_t sc[8][16];    // [group]: rows' lo scales (twice each) | their hi scales
    int16_t x[4][16];     // per row, against the activation sums: mins per 16 (mins types),
                          // or off * scales, even 16-groups then odd ones (offset types)
    float d[8], dm[8];    // [d0..d3 | d0..d3]
};

template <class B>
constexpr int kKOffset = std::is_same<B, BlockQ3_K>::value ? 4 : std::is_same<B, BlockQ6_K>::value ? 32 : 0;
template <class B>
constexpr bool kKMins = std::is_same<B, BlockQ2_K>::value || std::is_same<B, BlockQ4_K>::value ||
                        std::is_same<B, BlockQ5_K>::value;

// Four rows' KPanels (signed values, offset applied) into one KPanel4
template <class B>
void interleave4(const KPanel* const P[4], KPanel4& o) {
    constexpr int kOff = kKOffset<B>;
    const __m256i off = _mm256_set1_epi8((char)kOff);
    for (int g = 0; g < 8; ++g) {
        __m256i R[4];
        for (int r = 0; r < 4; ++r) R[r] = _mm256_add_epi8(loadu256(P[r]->q + 32 * g), off);
        // a 4 x 4 dword transpose in each 128-bit lane
        const __m256i t0 = _mm256_unpacklo_epi32(R[0], R[1]), t1 = _mm256_unpackhi_epi32(R[0], R[1]);
        const __m256i t2 = _mm256_unpacklo_epi32(R[2], R[3]), t3 = _mm256_unpackhi_epi32(R[2], R[3]);
        store32(reinterpret_cast<int8_t*>(o.q[g][0]), _mm256_unpacklo_epi64(t0, t2));
        store32(reinterpret_cast<int8_t*>(o.q[g][1]), _mm256_unpackhi_epi64(t0, t2));
        store32(reinterpret_cast<int8_t*>(o.q[g][2]), _mm256_unpacklo_epi64(t1, t3));
        store32(reinterpret_cast<int8_t*>(o.q[g][3]), _mm256_unpackhi_epi64(t1, t3));
        for (int r = 0; r < 4; ++r) {
            o.sc[g][2 * r] = o.sc[g][2 * r + 1] = P[r]->scv[g][0];
            o.sc[g][8 + 2 * r] = o.sc[g][8 + 2 * r + 1] = P[r]->scv[g][8];
        }
    }
    for (int r = 0; r < 4; ++r) {
        for (int j = 0; j < 16; ++j) {
            if constexpr (kOff != 0) {
                const int g16 = j < 8 ? 2 * j : 2 * (j - 8) + 1;  // evens, then odds
                o.x[r][j] = (int16_t)(kOff * P[r]->scv[g16 / 2][8 * (g16 % 2)]);
            } else {
                o.x[r][j] = P[r]->mn[j];
            }
        }
        o.d[r] = o.d[4 + r] = P[r]->d;
        o.dm[r] = o.dm[4 + r] = P[r]->dmin;
    }
}

// Group g's scale vector from the bytes lo[r] (rows' scales of the lo half) and hi[r]
template <bool Signed>
inline void put_scales4(const uint8_t lo[4], const uint8_t hi[4], int16_t* dst) {
    uint32_t l, h;
    std::memcpy(&l, lo, 4);
    std::memcpy(&h, hi, 4);
    const __m128i b = _mm_shuffle_epi8(_mm_set_epi32(0, 0, (int)h, (int)l),
                                       _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7));
    const __m256i v = Signed ? _mm256_cvtepi8_epi16(b) : _mm256_cvtepu8_epi16(b);
    _mm256_store_si256(reinterpret_cast<__m256i*>(dst), v);
}
inline void put_d4(const uint16_t d[4], const uint16_t dm[4], KPanel4& o) {
    for (int r = 0; r < 4; ++r) {
        o.d[r] = o.d[4 + r] = f16(d[r]);
        o.dm[r] = o.dm[4 + r] = f16(dm[r]);
    }
}

// Four rows' super-block i straight into a KPanel4 (the common types), or through their
// KPanels (Q2_K, Q3_K)
template <class B>
void pack4(const B* const x[4], KPanel4& o) {
    KPanel rows[4];
    const KPanel* P[4] = {&rows[0], &rows[1], &rows[2], &rows[3]};
    for (int r = 0; r < 4; ++r) unpack_panel(*x[r], rows[r]);
    interleave4<B>(P, o);
}
template <class B>
void pack4_q45(const B* const x[4], KPanel4& o) {
    constexpr bool kQ5 = std::is_same<B, BlockQ5_K>::value;
    uint8_t sm[4][16];  // per row: the eight scales, then the eight mins
    uint16_t d[4], dm[4];
    for (int r = 0; r < 4; ++r) {
        uint32_t u[4];
        k_scales_mins(x[r]->scales, u);
        std::memcpy(sm[r], u, 16);
        d[r] = x[r]->d;
        dm[r] = x[r]->dmin;
        // mins per 16 (each 32-group's twice) against the activation sums
        const __m128i mins = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sm[r])),
                                              _mm_setr_epi8(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15));
        _mm256_store_si256(reinterpret_cast<__m256i*>(o.x[r]), _mm256_cvtepu8_epi16(mins));
    }
    for (int j = 0; j < 4; ++j) {  // 64 elements: groups 2j (low nibbles) and 2j + 1
        __m256i lo[4], hi[4];
        for (int r = 0; r < 4; ++r) {
            __m256i hv = _mm256_setzero_si256();
            if constexpr (kQ5) hv = loadu256(x[r]->qh);
            q45_values<kQ5>(x[r]->qs, hv, j, &lo[r], &hi[r]);
        }
        put_group4(lo, o.q[2 * j]);
        put_group4(hi, o.q[2 * j + 1]);
    }
    for (int g = 0; g < 8; ++g) {
        const uint8_t s4[4] = {sm[0][g], sm[1][g], sm[2][g], sm[3][g]};
        put_scales4<false>(s4, s4, o.sc[g]);
    }
    put_d4(d, dm, o);
}
template <>
void pack4<BlockQ4_K>(const BlockQ4_K* const x[4], KPanel4& o) { pack4_q45(x, o); }
template <>
void pack4<BlockQ5_K>(const BlockQ5_K* const x[4], KPanel4& o) { pack4_q45(x, o); }
template <>
void pack4<BlockQ6_K>(const BlockQ6_K* const x[4], KPanel4& o) {
    uint16_t d[4], dm[4] = {0, 0, 0, 0};
    for (int r = 0; r < 4; ++r) {
        d[r] = x[r]->d;
        // 32 x the scales, even 16-groups then odd ones, against the activation sums
        const __m128i sc = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x[r]->scales)),
                                            _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15));
        _mm256_store_si256(reinterpret_cast<__m256i*>(o.x[r]), _mm256_slli_epi16(_mm256_cvtepi8_epi16(sc), 5));
    }
    for (int c = 0; c < 2; ++c) {  // 128 elements: groups 4c .. 4c + 3
        __m256i q[4][4];  // [group][row]
        for (int r = 0; r < 4; ++r) {
            __m256i v[4];
            q6_values(*x[r], c, v);
            for (int k = 0; k < 4; ++k) q[k][r] = v[k];
        }
        for (int k = 0; k < 4; ++k) put_group4(q[k], o.q[4 * c + k]);
    }
    for (int g = 0; g < 8; ++g) {
        const uint8_t lo[4] = {(uint8_t)x[0]->scales[2 * g], (uint8_t)x[1]->scales[2 * g], (uint8_t)x[2]->scales[2 * g],
                               (uint8_t)x[3]->scales[2 * g]};
        const uint8_t hi[4] = {(uint8_t)x[0]->scales[2 * g + 1], (uint8_t)x[1]->scales[2 * g + 1],
                               (uint8_t)x[2]->scales[2 * g + 1], (uint8_t)x[3]->scales[2 * g + 1]};
        put_scales4<true>(lo, hi, o.sc[g]);
    }
    put_d4(d, dm, o);
}

// The sixteen activation sums as [even 16-groups | odd 16-groups]
inline __m256i bsums_even_odd(const int16_t* bsums) {
    const __m256i idx = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15,
                                         0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
    return _mm256_permute4x64_epi64(_mm256_shuffle_epi8(loadu256(bsums), idx), 0xd8);
}

// Four interleaved rows x C columns of Q8_K
template <class B, int C>
void ktile4x(const KPanel4* panel, int64_t nbk, const uint8_t* a, size_t as, float* s, size_t lds) {
    constexpr int kOff = kKOffset<B>;
    constexpr bool kMins = kKMins<B>;
    constexpr int kFold = std::is_same<B, BlockQ6_K>::value ? 2 : 4;  // steps summed in int16
    __m256 acc[C];
    for (int c = 0; c < C; ++c) acc[c] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nbk; ++i) {
        const KPanel4& P = panel[i];
        const BlockQ8_K* y[C];
        for (int c = 0; c < C; ++c) y[c] = reinterpret_cast<const BlockQ8_K*>(a + c * as) + i;
        __m256i isum[C];
        for (int c = 0; c < C; ++c) isum[c] = _mm256_setzero_si256();
        for (int g = 0; g < 8; ++g) {
            const __m256i sc = _mm256_load_si256(reinterpret_cast<const __m256i*>(P.sc[g]));
            __m256i pairs[C];
            for (int k = 0; k < 4; ++k) {
                const __m256i w = _mm256_load_si256(reinterpret_cast<const __m256i*>(P.q[g][k]));
                for (int c = 0; c < C; ++c) {
                    const __m256i av = loadu256(y[c]->qs + 32 * g);
                    __m256i ak;
                    switch (k) {  // vpshufd takes an immediate
                        case 0: ak = _mm256_shuffle_epi32(av, 0x00); break;
                        case 1: ak = _mm256_shuffle_epi32(av, 0x55); break;
                        case 2: ak = _mm256_shuffle_epi32(av, 0xaa); break;
                        default: ak = _mm256_shuffle_epi32(av, 0xff); break;
                    }
                    const __m256i p = _mm256_maddubs_epi16(w, ak);
                    pairs[c] = k % kFold == 0 ? p : _mm256_add_epi16(pairs[c], p);
                    if (k % kFold == kFold - 1) isum[c] = _mm256_add_epi32(isum[c], _mm256_madd_epi16(pairs[c], sc));
                }
            }
        }
        const __m256 d = _mm256_load_ps(P.d), dm = _mm256_load_ps(P.dm);
        const __m256i x0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(P.x[0]));
        const __m256i x1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(P.x[1]));
        const __m256i x2 = _mm256_load_si256(reinterpret_cast<const __m256i*>(P.x[2]));
        const __m256i x3 = _mm256_load_si256(reinterpret_cast<const __m256i*>(P.x[3]));
        for (int c = 0; c < C; ++c) {
            const __m256 da = _mm256_set1_ps(y[c]->d);
            __m256i is = isum[c];
            if constexpr (kOff != 0) {  // (u - off): the offset through the activation sums
                const __m256i bs = bsums_even_odd(y[c]->bsums);
                is = _mm256_sub_epi32(is, hadd4(_mm256_madd_epi16(x0, bs), _mm256_madd_epi16(x1, bs),
                                                _mm256_madd_epi16(x2, bs), _mm256_madd_epi16(x3, bs)));
            }
            if constexpr (kKWhole32<B>) is = whole32(is);
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), _mm256_mul_ps(d, da), acc[c]);
            if constexpr (kMins) {
                const __m256i bs = loadu256(y[c]->bsums);
                __m256i mins = hadd4(_mm256_madd_epi16(x0, bs), _mm256_madd_epi16(x1, bs),
                                     _mm256_madd_epi16(x2, bs), _mm256_madd_epi16(x3, bs));
                if constexpr (kKWhole32<B>) mins = whole32(mins);
                acc[c] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(mins), _mm256_mul_ps(dm, da), acc[c]);
            }
            // without mins, decode_k subtracts 0 * 0 here: skipping it gives the same bits
        }
    }
    for (int c = 0; c < C; ++c)
        _mm_storeu_ps(s + c * lds, _mm_add_ps(_mm256_castps256_ps128(acc[c]), _mm256_extractf128_ps(acc[c], 1)));
}

// as panel4_buffer: one per thread and type, for both layouts
template <class B>
KPanel4* kpanel4_buffer(size_t n) {
    struct Site;
    return thread_scratch<KPanel4, Site>(n);
}

// ---- Q4_K and Q5_K in their re-encoded four-row groups (kernels.h: four_row_reencoded) ----
// A group super-block (576 / 704 bytes): the rows' d and dmin (f16), their scales and mins
// as 6-bit values j = 4 g + r in 48 bytes, each 32-group's four steps (the KPanel4
// arrangement) nibble packed in 64 bytes (Q5_K: five-bit values, kernels.h). Decoding takes
// the four rows together: two loads and six logic operations per group for the values
// (Q5_K: two and a half loads and twelve, q5_k_group_steps), one shuffle for the group's
// scale vector, no horizontal adds and no scalar scale unpacking.
template <class B>
constexpr size_t kQ45Group = 4 * sizeof(B);
template <class B>
constexpr bool kQ45Reencoded = std::is_same<B, BlockQ4_K>::value || std::is_same<B, BlockQ5_K>::value;

// int16 words [s0 s0 s1 s1 s2 s2 s3 s3] (rows' scales of group 4h + q) in both halves,
// from scb's half h broadcast
alignas(32) const int8_t kQ4KScale[4][32] = {
#define EMBER_W(j) (int8_t)(j), (int8_t)0x80, (int8_t)(j), (int8_t)0x80
#define EMBER_Q(q) EMBER_W(4 * (q)), EMBER_W(4 * (q) + 1), EMBER_W(4 * (q) + 2), EMBER_W(4 * (q) + 3)
    {EMBER_Q(0), EMBER_Q(0)}, {EMBER_Q(1), EMBER_Q(1)}, {EMBER_Q(2), EMBER_Q(2)}, {EMBER_Q(3), EMBER_Q(3)},
#undef EMBER_Q
#undef EMBER_W
};
inline __m256i q4_k_scale_vector(__m256i scb, int g) {
    const __m256i half = g < 4 ? _mm256_permute2x128_si256(scb, scb, 0x00) : _mm256_permute2x128_si256(scb, scb, 0x11);
    return _mm256_shuffle_epi8(half, _mm256_load_si256(reinterpret_cast<const __m256i*>(kQ4KScale[g & 3])));
}
template <class B>
inline void q4_k_group_steps(const uint8_t* gb, int g, __m256i S[4]) {
    if constexpr (std::is_same<B, BlockQ5_K>::value) {
        q5_k_group_steps(gb, g, S);
    } else {
        const __m256i m = _mm256_set1_epi8(0x0f);
        const __m256i v01 = loadu256(gb + 64 + 64 * g), v23 = loadu256(gb + 96 + 64 * g);
        S[0] = _mm256_and_si256(v01, m);
        S[1] = _mm256_and_si256(_mm256_srli_epi16(v01, 4), m);
        S[2] = _mm256_and_si256(v23, m);
        S[3] = _mm256_and_si256(_mm256_srli_epi16(v23, 4), m);
    }
}

// Step k's activations of 32-group g: dword k broadcast in each 128-bit half
inline void q_k_steps_acts(const BlockQ8_K& y, int g, __m256i st[4]) {
    const __m256i av = loadu256(y.qs + 32 * g);
    st[0] = _mm256_shuffle_epi32(av, 0x00);
    st[1] = _mm256_shuffle_epi32(av, 0x55);
    st[2] = _mm256_shuffle_epi32(av, 0xaa);
    st[3] = _mm256_shuffle_epi32(av, 0xff);
}

// One group (four rows) x one column: decode4_k_x4's int32 lanes and float operations.
// A group's four steps add up in int16 (8 elements of at most 31 * 128), then one madd
// by the group's scale vector gives each row's scaled 16-element sums in its lanes.
template <class B, int S>
inline void q4_k_group_col(int64_t nbk, const uint8_t* const* w, const BlockQ8_K* y, const Q4KPre* pre,
                           float* const* s) {
    __m256 acc[S];
    for (int j = 0; j < S; ++j) acc[j] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nbk; ++i) {
        const Q4KPre& p = pre[i];
        const uint8_t* gb[S];
        __m256i scb[S], mb[S], isum[S];
        for (int j = 0; j < S; ++j) {  // the streams side by side, block by block
            gb[j] = w[j] + (size_t)i * kQ45Group<B>;
            prefetch_ahead(gb[j], gb[j] + kQ45Group<B>);
            q4_k_group_scales(gb[j], &scb[j], &mb[j]);
            isum[j] = _mm256_setzero_si256();
        }
#pragma GCC unroll 8
        for (int g = 0; g < 8; ++g) {
            __m256i st[4];
            q_k_steps_acts(y[i], g, st);
            for (int j = 0; j < S; ++j) {
                __m256i St[4];
                q4_k_group_steps<B>(gb[j], g, St);
                __m256i t = _mm256_maddubs_epi16(St[0], st[0]);
                t = _mm256_add_epi16(t, _mm256_maddubs_epi16(St[1], st[1]));
                t = _mm256_add_epi16(t, _mm256_maddubs_epi16(St[2], st[2]));
                t = _mm256_add_epi16(t, _mm256_maddubs_epi16(St[3], st[3]));
                isum[j] = _mm256_add_epi32(isum[j], _mm256_madd_epi16(t, q4_k_scale_vector(scb[j], g)));
            }
        }
        const __m256 da = _mm256_broadcast_ss(&y[i].d);
        for (int j = 0; j < S; ++j) {  // lo + hi, 0 (kpanel_x86.h)
            const __m256i im = whole32(q4_k_min_sum(mb[j], p.amin));
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(whole32(isum[j])), _mm256_mul_ps(f16x4_twice(gb[j]), da), acc[j]);
            acc[j] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(im), _mm256_mul_ps(f16x4_twice(gb[j] + 8), da), acc[j]);
        }
    }
    store_rows4<S>(acc, s);
}

// A re-encoded group super-block into the KPanel4 pack4_q45 makes from the four blocks
template <class B>
inline void pack4_q4_k_x4(const uint8_t* gb, KPanel4& o) {
    __m256i scb, mb;
    q4_k_group_scales(gb, &scb, &mb);
    for (int g = 0; g < 8; ++g) {
        __m256i S[4];
        q4_k_group_steps<B>(gb, g, S);
        for (int k = 0; k < 4; ++k) _mm256_store_si256(reinterpret_cast<__m256i*>(o.q[g][k]), S[k]);
        _mm256_store_si256(reinterpret_cast<__m256i*>(o.sc[g]), q4_k_scale_vector(scb, g));
    }
    alignas(32) uint8_t m[32];
    _mm256_store_si256(reinterpret_cast<__m256i*>(m), mb);
    for (int r = 0; r < 4; ++r)
        for (int g = 0; g < 8; ++g) o.x[r][2 * g] = o.x[r][2 * g + 1] = m[4 * g + r];
    _mm256_store_ps(o.d, f16x4_twice(gb));
    _mm256_store_ps(o.dm, f16x4_twice(gb + 8));
}

// ---- Q6_K in its re-encoded four-row groups (kernels.h; kQ6Group and its helpers in
// kpanel_x86.h) ----
// The activations' steps as q4_k_group_col makes them (q_k_steps_acts), and, made once
// per call, per 32-group 32 x the sums of the eight activations each int16 word
// of a step's maddubs covers: subtracting them takes the -32 off inside the group. The
// four steps' pair sums (each <= 2 * 63 * 127) wrap around in int16, but the true sum
// over the eight products, |(u - 32) a| <= 32 * 127 each, fits, so the wrapped
// arithmetic ends on it exactly; one madd by the group's scale vector then gives each
// row's sc (u - 32) a over its lo and hi sixteen elements in its lanes. Every lane's
// integer equals decode4_k_x4's (k_sums takes the -32 off through the activation sums
// per block), and the float operations are its: the same bits. (Q6KPre: kpanel_x86.h.)
template <int S>
inline void q6_k_group_col(int64_t nbk, const uint8_t* const* w, const BlockQ8_K* y, const Q6KPre* pre,
                           float* const* s) {
    __m256 acc[S];
    for (int j = 0; j < S; ++j) acc[j] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nbk; ++i) {
        const Q6KPre& p = pre[i];
        const uint8_t* gb[S];
        __m256i isum[S];
        for (int j = 0; j < S; ++j) {  // the streams side by side, block by block
            gb[j] = w[j] + (size_t)i * kQ6Group;
            prefetch_ahead(gb[j], gb[j] + kQ6Group);
            isum[j] = _mm256_setzero_si256();
        }
#pragma GCC unroll 8
        for (int g = 0; g < 8; ++g) {
            __m256i st[4];
            q_k_steps_acts(y[i], g, st);
            const __m256i off = q6_k_off256(p.off[g]);
            for (int j = 0; j < S; ++j) {
                __m256i St[4];
                q6_k_group_steps(gb[j], g, St);
                __m256i t = _mm256_maddubs_epi16(St[0], st[0]);
                t = _mm256_add_epi16(t, _mm256_maddubs_epi16(St[1], st[1]));
                t = _mm256_add_epi16(t, _mm256_maddubs_epi16(St[2], st[2]));
                t = _mm256_add_epi16(t, _mm256_maddubs_epi16(St[3], st[3]));
                t = _mm256_sub_epi16(t, off);
                isum[j] = _mm256_add_epi32(isum[j], _mm256_madd_epi16(t, q6_k_scale_vector(gb[j], g)));
            }
        }
        const __m256 da = _mm256_broadcast_ss(&y[i].d);
        for (int j = 0; j < S; ++j)
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[j]), _mm256_mul_ps(f16x4_twice(gb[j]), da), acc[j]);
    }
    store_rows4<S>(acc, s);
}

// K-quant products on weights in four-row groups (RowGroups; nr a multiple of 4): block
// i of the group's row r is x[4 i + r]. Decoding folds the four rows' exact integer sums
// per super-block straight into [r0..r3 lo | r0..r3 hi] lanes (no parking) and does each
// row's KAcc::add in its two lanes, in KAcc's order (d * da, the isum fma, then the min
// fnma; a type without mins has a zero min term there, which changes nothing): the bits
// of decode_k and ktile4x. Prefill packs the same KPanel4s from the interleaved blocks.
template <class B, int S>
void decode4_k_x4(int64_t nbk, const B* const* x, const BlockQ8_K* y, float* const* s) {
    __m256 acc[S];
    for (int j = 0; j < S; ++j) acc[j] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nbk; ++i) {
        for (int j = 0; j < S; ++j) {  // the streams side by side, block by block
            const B* b = x[j] + 4 * i;
            prefetch_ahead(reinterpret_cast<const uint8_t*>(b), reinterpret_cast<const uint8_t*>(b + 4));
            const KSums k0 = k_sums(b[0], y[i]), k1 = k_sums(b[1], y[i]), k2 = k_sums(b[2], y[i]), k3 = k_sums(b[3], y[i]);
            __m256i is = _mm256_hadd_epi32(_mm256_hadd_epi32(k0.isum, k1.isum), _mm256_hadd_epi32(k2.isum, k3.isum));
            if constexpr (kKWhole32<B>) is = whole32(is);
            const __m256 da = _mm256_set1_ps(y[i].d);
            const __m128i dh = pack_u16x4(b[0].d, b[1].d, b[2].d, b[3].d);
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), _mm256_mul_ps(_mm256_cvtph_ps(_mm_unpacklo_epi64(dh, dh)), da), acc[j]);
            if constexpr (kKMins<B>) {
                __m256i im = _mm256_hadd_epi32(_mm256_hadd_epi32(k0.imin, k1.imin), _mm256_hadd_epi32(k2.imin, k3.imin));
                if constexpr (kKWhole32<B>) im = whole32(im);
                const __m128i mh = pack_u16x4(k_dmin(b[0]), k_dmin(b[1]), k_dmin(b[2]), k_dmin(b[3]));
                acc[j] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(im), _mm256_mul_ps(_mm256_cvtph_ps(_mm_unpacklo_epi64(mh, mh)), da), acc[j]);
            }
        }
    }
    store_rows4<S>(acc, s);
}

// Rows as they are (X4 false), or in four-row groups (RowGroups; nr a multiple of 4).
template <class B, bool X4>
void gemm_k_rows(int64_t n, int nr, int nc, const void* w, size_t ws, const void* a, size_t as, float* s,
                 size_t lds) {
    const int64_t nbk = n / QK_K;
    const uint8_t* W = static_cast<const uint8_t*>(w);
    const uint8_t* A = static_cast<const uint8_t*>(a);
    const int groups = nr / 4;
    if (nc == 1) {  // decoding: unpacking would cost more than it saves; both match ktile4x
        if constexpr (X4 && kQ45Reencoded<B>) {  // re-encoded groups
            struct Site;
            Q4KPre* const pre = thread_scratch<Q4KPre, Site>((size_t)nbk);
            q4_k_prepare(nbk, reinterpret_cast<const BlockQ8_K*>(A), pre);
            decode_groups<3>(groups, [&](int g) { return W + (size_t)(4 * g) * ws; }, s,
                          [&](auto streams, auto x, float* const* o) {
                q4_k_group_col<B, decltype(streams)::value>(nbk, x, reinterpret_cast<const BlockQ8_K*>(A), pre, o);
            });
        } else if constexpr (X4 && std::is_same<B, BlockQ6_K>::value) {
            struct Site;
            Q6KPre* const pre = thread_scratch<Q6KPre, Site>((size_t)nbk);
            q6_k_prepare(nbk, reinterpret_cast<const BlockQ8_K*>(A), pre);
            decode_groups<3>(groups, [&](int g) { return W + (size_t)(4 * g) * ws; }, s,
                          [&](auto streams, auto x, float* const* o) {
                q6_k_group_col<decltype(streams)::value>(nbk, x, reinterpret_cast<const BlockQ8_K*>(A), pre, o);
            });
        } else if constexpr (X4) {
            const auto* y = reinterpret_cast<const BlockQ8_K*>(A);
            const auto group = [&](int g) { return reinterpret_cast<const B*>(W + (size_t)(4 * g) * ws); };
            decode_groups<2>(groups, group, s, [&](auto streams, auto x, float* const* o) {
                decode4_k_x4<B, decltype(streams)::value>(nbk, x, y, o);
            });
        } else {
            decode_k<B>(nbk, nr, W, ws, reinterpret_cast<const BlockQ8_K*>(A), s);
        }
        return;
    }
    // every four rows of the call packed first (kept in L2), then the columns stream past
    // them four at a time (kept in L1)
    KPanel4* const panel = kpanel4_buffer<B>((size_t)(groups * nbk));  // the largest call so far
    for (int g = 0; g < groups; ++g) {
        const uint8_t* w4 = W + (size_t)(4 * g) * ws;
        for (int64_t i = 0; i < nbk; ++i) {
            if constexpr (X4 && kQ45Reencoded<B>) {
                pack4_q4_k_x4<B>(w4 + (size_t)i * kQ45Group<B>, panel[(size_t)(g * nbk + i)]);
                continue;
            }
            if constexpr (X4 && std::is_same<B, BlockQ6_K>::value) {
                // through the rows' KPanels, as the AVX-512 tiles unpack this layout
                KPanel rows[4];
                KPanel* const P[4] = {&rows[0], &rows[1], &rows[2], &rows[3]};
                unpack_panels_q6_k_x4(w4 + (size_t)i * kQ6Group, P);
                interleave4<B>(P, panel[(size_t)(g * nbk + i)]);
                continue;
            }
            const B* xi[4];
            for (int rr = 0; rr < 4; ++rr)
                xi[rr] = X4 ? reinterpret_cast<const B*>(w4) + 4 * i + rr : reinterpret_cast<const B*>(w4 + rr * ws) + i;
            pack4<B>(xi, panel[(size_t)(g * nbk + i)]);
        }
    }
    int c = 0;
    for (; c + 4 <= nc; c += 4)
        for (int g = 0; g < groups; ++g)
            ktile4x<B, 4>(panel + g * nbk, nbk, A + c * as, as, s + c * lds + 4 * g, lds);
    for (; c < nc; ++c)
        for (int g = 0; g < groups; ++g)
            ktile4x<B, 1>(panel + g * nbk, nbk, A + c * as, as, s + c * lds + 4 * g, lds);
    for (int r = 4 * groups; r < nr; ++r)
        for (int c = 0; c < nc; ++c) vec_dot_k<B>(n, s + c * lds + r, W + r * ws, A + c * as);
}
template <class B>
void gemm_k(int64_t n, int nr, int nc, const void* w, size_t ws, const void* a, size_t as, float* s, size_t lds) {
    gemm_k_rows<B, false>(n, nr, nc, w, ws, a, as, s, lds);
}
template <class B>
void gemm_k_x4(int64_t n, int nr, int nc, const void* w, size_t ws, const void* a, size_t as, float* s,
               size_t lds) {
    gemm_k_rows<B, true>(n, nr, nc, w, ws, a, as, s, lds);
}

// ---- IQ4_XS x Q8_K ----------------------------------------------------------------------
// The IQ4_NL table's values (-127..113) by pshufb, the sign trick per 32-group (pairs of
// |q| a stay within int16: 2 * 127 * 127), then madd by the group's scale (-32..31) into
// int32 lanes: the scalar reference's integers, per super-block, in eight lanes. A row
// streams past C columns, each group decoded once for all of them; vec_dot is the C = 1
// tile, so a column gets the same float operations alone as in a batch.
template <int C>
inline void iq4_xs_row(int64_t nbk, const BlockIQ4_XS* x, const BlockQ8_K* const* y, float* out) {
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kValuesIQ4NL)));
    __m256 acc[C];
    for (int c = 0; c < C; ++c) acc[c] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nbk; ++i) {
        const BlockIQ4_XS& b = x[i];
        __m256i isum[C];
        for (int c = 0; c < C; ++c) isum[c] = _mm256_setzero_si256();
        for (int g = 0; g < 8; ++g) {
            const __m256i q = _mm256_shuffle_epi8(table, nibbles32(b.qs + 16 * g));
            const __m256i qa = _mm256_sign_epi8(q, q);
            const __m256i sc = _mm256_set1_epi16((short)iq4_xs_scale(b, g));
            for (int c = 0; c < C; ++c) {
                const __m256i p = _mm256_maddubs_epi16(qa, _mm256_sign_epi8(loadu256(y[c][i].qs + 32 * g), q));
                isum[c] = _mm256_add_epi32(isum[c], _mm256_madd_epi16(p, sc));
            }
        }
        const float d = f16(b.d);
        for (int c = 0; c < C; ++c)
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[c]), _mm256_set1_ps(d * y[c][i].d), acc[c]);
    }
    for (int c = 0; c < C; ++c) out[c] = hsum(acc[c]);
}

void vec_dot_iq4_xs(int64_t n, float* s, const void* w, const void* a) {
    const BlockQ8_K* y[1] = {static_cast<const BlockQ8_K*>(a)};
    iq4_xs_row<1>(n / QK_K, static_cast<const BlockIQ4_XS*>(w), y, s);
}

void gemm_iq4_xs(int64_t n, int nr, int nc, const void* w, size_t ws, const void* a, size_t as, float* s,
                 size_t lds) {
    const int64_t nbk = n / QK_K;
    const uint8_t* W = static_cast<const uint8_t*>(w);
    const uint8_t* A = static_cast<const uint8_t*>(a);
    auto col = [&](int c) { return reinterpret_cast<const BlockQ8_K*>(A + (size_t)c * as); };
    int c = 0;
    for (; c + 4 <= nc; c += 4) {
        const BlockQ8_K* y[4] = {col(c), col(c + 1), col(c + 2), col(c + 3)};
        for (int r = 0; r < nr; ++r) {
            float out[4];
            iq4_xs_row<4>(nbk, reinterpret_cast<const BlockIQ4_XS*>(W + (size_t)r * ws), y, out);
            for (int j = 0; j < 4; ++j) s[(size_t)(c + j) * lds + (size_t)r] = out[j];
        }
    }
    for (; c < nc; ++c) {
        const BlockQ8_K* y[1] = {col(c)};
        for (int r = 0; r < nr; ++r) {
            const uint8_t* p = W + (size_t)r * ws;
            if (nc == 1) prefetch_ahead(p, p + (size_t)nbk * sizeof(BlockIQ4_XS));
            iq4_xs_row<1>(nbk, reinterpret_cast<const BlockIQ4_XS*>(p), y, s + (size_t)c * lds + (size_t)r);
        }
    }
}

// q . k over the F16 cache with F16C: 16 values per step in two accumulators.
float dot_f32_f16_avx2(const float* a, const uint16_t* b, int64_t n) {
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256 b0 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i)));
        const __m256 b1 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i + 8)));
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), b0, acc0);
        acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), b1, acc1);
    }
    float s = hsum(_mm256_add_ps(acc0, acc1));
    for (; i < n; ++i) s += a[i] * f16(b[i]);
    return s;
}

void axpy_f16_avx2(float* y, const uint16_t* x, float a, int64_t n) {
    const __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 xv = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, xv, _mm256_loadu_ps(y + i)));
    }
    for (; i < n; ++i) y[i] += a * f16(x[i]);
}

inline __m256 load_h8(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }

// Scores of G query heads that share a key head (grouped-query attention): each key
// vector is converted once and used by every head of the group. KEYS keys per step, so
// that the G x KEYS accumulators, the keys and one query vector fit the 16 registers.
// The sums are folded with the same hadd tree whatever KEYS is (absent keys as zeros),
// so a score has the same bits for every group size and every place in the block.
inline __m128 fold4(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
    const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
    return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

template <int G, int KEYS>
void scores_group(const float* q, size_t qs, const uint16_t* k, size_t stride, int64_t nk, int64_t d, float scale,
                  float* out, size_t ldo) {
    const __m256 z = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j + KEYS <= nk; j += KEYS) {
        __m256 a[G][KEYS];
        for (int g = 0; g < G; ++g)
            for (int t = 0; t < KEYS; ++t) a[g][t] = z;
        for (int64_t i = 0; i < d; i += 8) {
            __m256 kv[KEYS];
            for (int t = 0; t < KEYS; ++t) kv[t] = load_h8(k + (j + t) * stride + i);
            for (int g = 0; g < G; ++g) {
                const __m256 qv = _mm256_loadu_ps(q + g * qs + i);
                for (int t = 0; t < KEYS; ++t) a[g][t] = _mm256_fmadd_ps(qv, kv[t], a[g][t]);
            }
        }
        for (int g = 0; g < G; ++g) {
            const __m128 s4 = _mm_mul_ps(fold4(a[g][0], KEYS > 1 ? a[g][1] : z, KEYS > 2 ? a[g][2] : z,
                                               KEYS > 3 ? a[g][3] : z),
                                         _mm_set1_ps(scale));
            alignas(16) float t4[4];
            _mm_store_ps(t4, s4);
            for (int t = 0; t < KEYS; ++t) out[g * ldo + j + t] = t4[t];
        }
    }
    for (; j < nk; ++j) {
        const uint16_t* kj = k + j * stride;
        for (int g = 0; g < G; ++g) {
            __m256 a = z;
            for (int64_t i = 0; i < d; i += 8) a = _mm256_fmadd_ps(_mm256_loadu_ps(q + g * qs + i), load_h8(kj + i), a);
            out[g * ldo + j] = _mm_cvtss_f32(fold4(a, z, z, z)) * scale;
        }
    }
}

void attn_scores_avx2(const float* q, size_t qs, int G, const uint16_t* k, size_t stride, int64_t nk, int64_t d,
                      float scale, float* out, size_t ldo) {
    if (d % 8 != 0) {
        for (int g = 0; g < G; ++g)
            for (int64_t j = 0; j < nk; ++j) out[g * ldo + j] = dot_f32_f16_avx2(q + g * qs, k + j * stride, d) * scale;
        return;
    }
    for (int g = 0; g < G;) {
        const int n = G - g < 4 ? G - g : 4;
        const float* qg = q + g * qs;
        float* og = out + g * ldo;
        switch (n) {
            case 1: scores_group<1, 4>(qg, qs, k, stride, nk, d, scale, og, ldo); break;
            case 2: scores_group<2, 4>(qg, qs, k, stride, nk, d, scale, og, ldo); break;
            case 3: scores_group<3, 3>(qg, qs, k, stride, nk, d, scale, og, ldo); break;
            default: scores_group<4, 2>(qg, qs, k, stride, nk, d, scale, og, ldo); break;
        }
        g += n;
    }
}

// The G heads' accumulators stay in registers across the block, V vectors of 8 floats
// each; every value vector is converted once for the whole group. Each lane adds the
// keys in order with one FMA each, so the bits do not depend on G or V.
template <int G, int V>
void accumulate_group(float* acc, size_t as, const uint16_t* v, size_t stride, const float* w, size_t ldw,
                      int64_t nk, int64_t d) {
    int64_t i = 0;
    for (; i + 8 * V <= d; i += 8 * V) {
        __m256 a[G][V];
        for (int g = 0; g < G; ++g)
            for (int t = 0; t < V; ++t) a[g][t] = _mm256_loadu_ps(acc + g * as + i + 8 * t);
        for (int64_t j = 0; j < nk; ++j) {
            __m256 vv[V];
            for (int t = 0; t < V; ++t) vv[t] = load_h8(v + j * stride + i + 8 * t);
            for (int g = 0; g < G; ++g) {
                const __m256 wj = _mm256_broadcast_ss(w + g * ldw + j);
                for (int t = 0; t < V; ++t) a[g][t] = _mm256_fmadd_ps(wj, vv[t], a[g][t]);
            }
        }
        for (int g = 0; g < G; ++g)
            for (int t = 0; t < V; ++t) _mm256_storeu_ps(acc + g * as + i + 8 * t, a[g][t]);
    }
    if (i < d)
        for (int g = 0; g < G; ++g)
            for (int64_t j = 0; j < nk; ++j) axpy_f16_avx2(acc + g * as + i, v + j * stride + i, w[g * ldw + j], d - i);
}

void attn_accumulate_avx2(float* acc, size_t as, int G, const uint16_t* v, size_t stride, const float* w, size_t ldw,
                          int64_t nk, int64_t d) {
    for (int g = 0; g < G;) {
        const int n = G - g < 4 ? G - g : 4;
        float* ag = acc + g * as;
        const float* wg = w + g * ldw;
        switch (n) {
            case 1: accumulate_group<1, 4>(ag, as, v, stride, wg, ldw, nk, d); break;
            case 2: accumulate_group<2, 2>(ag, as, v, stride, wg, ldw, nk, d); break;
            case 3: accumulate_group<3, 2>(ag, as, v, stride, wg, ldw, nk, d); break;
            default: accumulate_group<4, 2>(ag, as, v, stride, wg, ldw, nk, d); break;
        }
        g += n;
    }
}

// exp(x) for 8 floats: x = n ln2 + r with |r| <= ln2 / 2 (ln2 split in two so n ln2 is
// exact), a degree-6 polynomial for exp(r) (coefficients from Cephes' expf, within
// about 1 ulp), and 2^n put into the exponent bits. Inputs are <= 0 here; below -87
// the result flushes towards 0.
inline __m256 exp8(__m256 x) {
    x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

// silu(g) * u = g / (1 + exp(-g)) * u. exp8 clamps its argument at -87, so for g > 87
// the denominator is 1 (silu(g) = g, as in float); for g < -88 exp(-g) overflows to inf in
// float and silu is -0; here it is g / (1 + e^87), which is as good as 0.
void swiglu_avx2(const float* g, const float* u, float* y, int64_t n) {
    const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
    int64_t k = 0;
    for (; k + 8 <= n; k += 8) {
        const __m256 gv = _mm256_loadu_ps(g + k);
        __m256 e = exp8(_mm256_xor_ps(gv, sign));
        // exp8 is meant for arguments <= 0 here; -g can be large and positive
        e = _mm256_blendv_ps(e, _mm256_set1_ps(INFINITY),
                             _mm256_cmp_ps(gv, _mm256_set1_ps(-88.0f), _CMP_LT_OQ));
        _mm256_storeu_ps(y + k, _mm256_mul_ps(_mm256_div_ps(gv, _mm256_add_ps(one, e)), _mm256_loadu_ps(u + k)));
    }
    for (; k < n; ++k) y[k] = (g[k] / (1.0f + std::exp(-g[k]))) * u[k];
}

// The gated delta rule's token step (AttentionKernels::delta_step): two passes over each
// state row, both in L1 (a row is S floats): decay and M.k, then the update and M.q.
void delta_step_avx2(float* M, const float* k, const float* q, const float* v, float decay, float beta, float scale,
                     float* out, int64_t S) {
    const int64_t S8 = S / 8 * 8;
    const __m256 e = _mm256_set1_ps(decay);
    for (int64_t j = 0; j < S; ++j) {
        float* m = M + j * S;
        __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
        int64_t i = 0;
        for (; i + 16 <= S8; i += 16) {
            const __m256 m0 = _mm256_mul_ps(_mm256_loadu_ps(m + i), e);
            const __m256 m1 = _mm256_mul_ps(_mm256_loadu_ps(m + i + 8), e);
            _mm256_storeu_ps(m + i, m0);
            _mm256_storeu_ps(m + i + 8, m1);
            a0 = _mm256_fmadd_ps(m0, _mm256_loadu_ps(k + i), a0);
            a1 = _mm256_fmadd_ps(m1, _mm256_loadu_ps(k + i + 8), a1);
        }
        for (; i < S8; i += 8) {
            const __m256 m0 = _mm256_mul_ps(_mm256_loadu_ps(m + i), e);
            _mm256_storeu_ps(m + i, m0);
            a0 = _mm256_fmadd_ps(m0, _mm256_loadu_ps(k + i), a0);
        }
        float sk = hsum(_mm256_add_ps(a0, a1));
        for (; i < S; ++i) {
            m[i] *= decay;
            sk += m[i] * k[i];
        }
        const float d = (v[j] - sk) * beta;
        const __m256 dv = _mm256_set1_ps(d);
        a0 = _mm256_setzero_ps();
        a1 = _mm256_setzero_ps();
        i = 0;
        for (; i + 16 <= S8; i += 16) {
            const __m256 m0 = _mm256_fmadd_ps(dv, _mm256_loadu_ps(k + i), _mm256_loadu_ps(m + i));
            const __m256 m1 = _mm256_fmadd_ps(dv, _mm256_loadu_ps(k + i + 8), _mm256_loadu_ps(m + i + 8));
            _mm256_storeu_ps(m + i, m0);
            _mm256_storeu_ps(m + i + 8, m1);
            a0 = _mm256_fmadd_ps(m0, _mm256_loadu_ps(q + i), a0);
            a1 = _mm256_fmadd_ps(m1, _mm256_loadu_ps(q + i + 8), a1);
        }
        for (; i < S8; i += 8) {
            const __m256 m0 = _mm256_fmadd_ps(dv, _mm256_loadu_ps(k + i), _mm256_loadu_ps(m + i));
            _mm256_storeu_ps(m + i, m0);
            a0 = _mm256_fmadd_ps(m0, _mm256_loadu_ps(q + i), a0);
        }
        float sq = hsum(_mm256_add_ps(a0, a1));
        for (; i < S; ++i) {
            m[i] += d * k[i];
            sq += m[i] * q[i];
        }
        out[j] = sq * scale;
    }
}

float exp_sub_sum_avx2(float* s, int64_t n, float max) {
    const __m256 m = _mm256_set1_ps(max);
    __m256 acc = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(s + i), m));
        _mm256_storeu_ps(s + i, e);
        acc = _mm256_add_ps(acc, e);
    }
    if (i < n) {  // the tail through the same polynomial, so every key gets the same function
        alignas(32) float t[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (int64_t j = i; j < n; ++j) t[j - i] = s[j] - max;
        __m256 e = exp8(_mm256_load_ps(t));
        const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        const __m256 keep = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n - i)), lane));
        e = _mm256_and_ps(e, keep);
        _mm256_store_ps(t, e);
        for (int64_t j = i; j < n; ++j) s[j] = t[j - i];
        acc = _mm256_add_ps(acc, e);
    }
    return hsum(acc);
}

}  // namespace

void register_avx2_attention(AttentionKernels& k) {
    k.dot_f32_f16 = dot_f32_f16_avx2;
    k.axpy_f16 = axpy_f16_avx2;
    k.exp_sub_sum = exp_sub_sum_avx2;
    k.scores = attn_scores_avx2;
    k.accumulate = attn_accumulate_avx2;
    k.swiglu = swiglu_avx2;
    k.delta_step = delta_step_avx2;
}

void register_avx2_kernels(KernelTable& t) {
    t[(int)DType::F32] = {DType::F32, nullptr, vec_dot_float<LoadF32>, gemm_float<LoadF32, 4, 3>};
    // F16 weights read F32 activations: the weights widen exactly, and the activations keep
    // their F32 bits, as llama.cpp's products on F16 files do (rounding the activations to
    // F16 instead put Qwen3.5-MoE's logits 1e-3 from llama.cpp's, where the exact products
    // are 6e-6 away: the delta-net's per-head norms amplify that rounding)
    t[(int)DType::F16] = {DType::F32, nullptr, vec_dot_float<LoadF16>, gemm_float<LoadF16, 4, 3>};
    t[(int)DType::BF16] = {DType::F32, nullptr, vec_dot_float<LoadBF16>, gemm_wide<LoadBF16>};
    t[(int)DType::Q4_0] = {DType::Q8_0, quantize_row_q8_0, vec_dot_legacy<DecQ4_0>, gemm_legacy<DecQ4_0, 4>,
                          gemm_legacy_x4<DecQ4_0, 4>};
    t[(int)DType::Q5_0] = {DType::Q8_0, quantize_row_q8_0, vec_dot_legacy<DecQ5_0>, gemm_legacy<DecQ5_0, 4>,
                          gemm_legacy_x4<DecQ5_0, 4>};
    t[(int)DType::Q8_0] = {DType::Q8_0, quantize_row_q8_0, vec_dot_legacy<DecQ8_0>, gemm_legacy<DecQ8_0, 4>,
                          gemm_legacy_x4<DecQ8_0, 4>};
    t[(int)DType::Q4_1] = {DType::Q8_1, quantize_row_q8_1, vec_dot_legacy<DecQ4_1>, gemm_legacy<DecQ4_1, 4>,
                          gemm_legacy_x4<DecQ4_1, 4>};
    t[(int)DType::Q5_1] = {DType::Q8_1, quantize_row_q8_1, vec_dot_legacy<DecQ5_1>, gemm_legacy<DecQ5_1, 4>,
                          gemm_legacy_x4<DecQ5_1, 4>};
    t[(int)DType::Q2_K] = {DType::Q8_K, quantize_row_q8_k, vec_dot_k<BlockQ2_K>, gemm_k<BlockQ2_K>,
                          gemm_k_x4<BlockQ2_K>};
    t[(int)DType::Q3_K] = {DType::Q8_K, quantize_row_q8_k, vec_dot_k<BlockQ3_K>, gemm_k<BlockQ3_K>,
                          gemm_k_x4<BlockQ3_K>};
    t[(int)DType::Q4_K] = {DType::Q8_K, quantize_row_q8_k, vec_dot_k<BlockQ4_K>, gemm_k<BlockQ4_K>,
                          gemm_k_x4<BlockQ4_K>};
    t[(int)DType::Q5_K] = {DType::Q8_K, quantize_row_q8_k, vec_dot_k<BlockQ5_K>, gemm_k<BlockQ5_K>,
                          gemm_k_x4<BlockQ5_K>};
    t[(int)DType::Q6_K] = {DType::Q8_K, quantize_row_q8_k, vec_dot_k<BlockQ6_K>, gemm_k<BlockQ6_K>,
                          gemm_k_x4<BlockQ6_K>};
    // the 4-bit table types, decoded by one pshufb: MXFP4 in Q4_0's offset form, IQ4_NL
    // in Q8_0's sign trick
    t[(int)DType::MXFP4] = {DType::Q8_0, quantize_row_q8_0, vec_dot_legacy<DecMXFP4>, gemm_legacy<DecMXFP4, 4>,
                           gemm_legacy_x4<DecMXFP4, 4>};
    t[(int)DType::IQ4_NL] = {DType::Q8_0, quantize_row_q8_0, vec_dot_legacy<DecIQ4_NL>, gemm_legacy<DecIQ4_NL, 4>,
                            gemm_legacy_x4<DecIQ4_NL, 4>};
    t[(int)DType::IQ4_XS] = {DType::Q8_K, quantize_row_q8_k, vec_dot_iq4_xs, gemm_iq4_xs};
}

}  // namespace ember

#else  // not built with AVX2: the level falls back to scalar

namespace ember {
void register_avx2_kernels(KernelTable&) {}
void register_avx2_attention(AttentionKernels&) {}
}  // namespace ember

#endif
