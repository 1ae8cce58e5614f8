// AVX-512 kernels (F, BW, VL, VNNI). The level's table starts as a copy of AVX2's, so a type
// without a 512-bit kernel here runs the AVX2 one; what is here replaces the prefill tiles,
// where the int8 multiply-adds are the bottleneck. The integer sums are the AVX2 tiles'
// (exact), and the float operations after them are the same ones in the same order, so a
// column gets the same bits from a tile here as from the AVX2 decode path: one-token
// decoding, which reads memory rather than computes, keeps the AVX2 kernels.
#include "cpu/kernels.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512VNNI__)

// GCC 12 flags its own _mm512_undefined_* placeholders (inside the 256-bit casts and
// extracts) as (maybe-)uninitialized once inlined here: a known false positive.
#if defined(__GNUC__) && !defined(__clang__)
#  pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#  pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include <immintrin.h>

#include <cstring>
#include <vector>

#include "cpu/kpanel_x86.h"
#include "quant/types.h"

namespace ember {

namespace {

KernelTable avx2_table;  // filled once by register_avx512_kernels, before any use

// Offset taken back out of the Q3_K/Q6_K panels' signed values so maddubs can read them
// as unsigned bytes (u = q + off); zero for the unsigned types.
template <class B>
constexpr int kPanelOffset = std::is_same<B, BlockQ3_K>::value ? 4 : std::is_same<B, BlockQ6_K>::value ? 32 : 0;

// Four unpacked rows x C columns of Q8_K, the AVX2 ktile4x's results bit for bit. Per
// super-block each (row, column) accumulates its 256 products in one int32 register with
// VNNI (maddubs pairs times the int16 scales, vpdpwssd), 64 elements per instruction,
// and only then folds them into ktile4x's [r0..r3 lo | r0..r3 hi] lanes. With the
// offset types, (u - off) a pairs come out as maddubs(u, a) - maddubs(off, a), exact in
// int16 (|pair| <= 2 * 63 * 128).
template <class B, int C>
void ktile512(const KPanel* panel, int64_t nbk, const uint8_t* a, size_t as, float* s, size_t lds) {
    constexpr int kOff = kPanelOffset<B>;
    constexpr bool kMins = std::is_same<B, BlockQ2_K>::value || std::is_same<B, BlockQ4_K>::value ||
                           std::is_same<B, BlockQ5_K>::value;
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
                if constexpr (kOff != 0) q[r] = _mm512_add_epi8(q[r], _mm512_set1_epi8((char)kOff));
                sc[r] = _mm512_loadu_si512(P[r]->scv[2 * h]);  // scv[2h] and scv[2h + 1]
            }
            for (int c = 0; c < C; ++c) {
                const __m512i av = _mm512_loadu_si512(y[c]->qs + 64 * h);
                __m512i off = _mm512_setzero_si512();
                if constexpr (kOff != 0) off = _mm512_maddubs_epi16(_mm512_set1_epi8((char)kOff), av);
                for (int r = 0; r < 4; ++r) {
                    __m512i pairs = _mm512_maddubs_epi16(q[r], av);
                    if constexpr (kOff != 0) pairs = _mm512_sub_epi16(pairs, off);
                    isum[r][c] = _mm512_dpwssd_epi32(isum[r][c], pairs, sc[r]);
                }
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
            const __m256i is = hadd4(v[0], v[1], v[2], v[3]);
            const __m256 da = _mm256_set1_ps(y[c]->d);
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), _mm256_mul_ps(d, da), acc[c]);
            __m256i mins = _mm256_setzero_si256();
            if constexpr (kMins) {
                const __m256i bs = loadu256(y[c]->bsums);
                mins = hadd4(_mm256_madd_epi16(loadu256(P[0]->mn), bs), _mm256_madd_epi16(loadu256(P[1]->mn), bs),
                             _mm256_madd_epi16(loadu256(P[2]->mn), bs), _mm256_madd_epi16(loadu256(P[3]->mn), bs));
            }
            acc[c] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(mins), _mm256_mul_ps(dm, da), acc[c]);
        }
    }
    for (int c = 0; c < C; ++c)
        _mm_storeu_ps(s + c * lds, _mm_add_ps(_mm256_castps256_ps128(acc[c]), _mm256_extractf128_ps(acc[c], 1)));
}

template <class B, DType T>
void gemm_k512(int64_t n, int nr, int nc, const void* w, size_t ws, const void* a, size_t as, float* s,
               size_t lds) {
    const DotKernels& avx2 = avx2_table[(int)T];
    if (nc == 1) {  // decoding: the AVX2 path, whose bits the tiles reproduce
        avx2.gemm(n, nr, nc, w, ws, a, as, s, lds);
        return;
    }
    const int64_t nbk = n / QK_K;
    const uint8_t* W = static_cast<const uint8_t*>(w);
    const uint8_t* A = static_cast<const uint8_t*>(a);
    // every four rows of the call unpacked first (kept in L2), then the columns stream
    // past them four at a time, as the AVX2 gemm_k does
    const int groups = nr / 4;
    thread_local std::vector<KPanel> panel;  // grows to the largest call once per thread
    if ((int64_t)panel.size() < 4 * groups * nbk) panel.resize((size_t)(4 * groups * nbk));
    for (int g = 0; g < groups; ++g)
        for (int rr = 0; rr < 4; ++rr) {
            const B* x = reinterpret_cast<const B*>(W + (size_t)(4 * g + rr) * ws);
            for (int64_t i = 0; i < nbk; ++i) unpack_panel(x[i], panel[(size_t)((4 * g + rr) * nbk + i)]);
        }
    int c = 0;
    for (; c + 4 <= nc; c += 4)
        for (int g = 0; g < groups; ++g)
            ktile512<B, 4>(panel.data() + 4 * g * nbk, nbk, A + c * as, as, s + c * lds + 4 * g, lds);
    for (; c < nc; ++c)
        for (int g = 0; g < groups; ++g)
            ktile512<B, 1>(panel.data() + 4 * g * nbk, nbk, A + c * as, as, s + c * lds + 4 * g, lds);
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
template <class D>
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
    for (int64_t i = 0; i < nb; ++i) {
        Panel8& p = out[i];
        const B* x[8];
        for (int r = 0; r < 8; ++r) x[r] = reinterpret_cast<const B*>(w + r * ws) + i;
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
        const __m128i dh = _mm_setr_epi16((short)x[0]->d, (short)x[1]->d, (short)x[2]->d, (short)x[3]->d,
                                          (short)x[4]->d, (short)x[5]->d, (short)x[6]->d, (short)x[7]->d);
        _mm512_store_ps(p.wd, _mm512_broadcast_f32x8(_mm256_cvtph_ps(dh)));
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

template <class D, DType T>
void gemm_legacy512(int64_t n, int nr, int nc, const void* w, size_t ws, const void* a, size_t as, float* s,
                    size_t lds) {
    constexpr int C = 4;
    const DotKernels& avx2 = avx2_table[(int)T];
    const int groups = nr / 8;
    if (nc < C || groups == 0) {  // decoding (and slivers): the AVX2 path, whose bits the tiles reproduce
        avx2.gemm(n, nr, nc, w, ws, a, as, s, lds);
        return;
    }
    const int64_t nb = n / QK;
    const uint8_t* W = static_cast<const uint8_t*>(w);
    const uint8_t* A = static_cast<const uint8_t*>(a);
    thread_local std::vector<Panel8> panel;  // std::vector keeps Panel8's alignment (C++17)
    if (panel.size() < (size_t)(groups * nb)) panel.resize((size_t)(groups * nb));
    for (int g = 0; g < groups; ++g) pack_panel8<D>(W + (size_t)(8 * g) * ws, ws, nb, panel.data() + g * nb);
    int c = 0;
    for (; c + C <= nc; c += C)
        for (int g = 0; g < groups; ++g)
            tile8_legacy<D, C>(nb, panel.data() + g * nb, A + c * as, as, s + c * lds + 8 * g, lds);
    for (; c < nc; ++c)
        for (int g = 0; g < groups; ++g)
            tile8_legacy<D, 1>(nb, panel.data() + g * nb, A + c * as, as, s + c * lds + 8 * g, lds);
    const int r0 = 8 * groups;
    if (r0 < nr) avx2.gemm(n, nr - r0, nc, W + (size_t)r0 * ws, ws, a, as, s + r0, lds);
}

}  // namespace

void register_avx512_kernels(KernelTable& t) {
    register_avx2_kernels(avx2_table);
    // the rest of a row (activation format, converter, one-column dot) is AVX2's
    auto tile = [&](DType type, GemmFn gemm) {
        t[(int)type] = avx2_table[(int)type];
        t[(int)type].gemm = gemm;
        t[(int)type].gemm_x4 = nullptr;  // its tiles read rows as they are (AVX2's x4 bits differ)
    };
    tile(DType::Q2_K, gemm_k512<BlockQ2_K, DType::Q2_K>);
    tile(DType::Q3_K, gemm_k512<BlockQ3_K, DType::Q3_K>);
    tile(DType::Q4_K, gemm_k512<BlockQ4_K, DType::Q4_K>);
    tile(DType::Q5_K, gemm_k512<BlockQ5_K, DType::Q5_K>);
    tile(DType::Q6_K, gemm_k512<BlockQ6_K, DType::Q6_K>);
    tile(DType::Q4_0, gemm_legacy512<DecQ4_0, DType::Q4_0>);
    tile(DType::Q4_1, gemm_legacy512<DecQ4_1, DType::Q4_1>);
    tile(DType::Q5_0, gemm_legacy512<DecQ5_0, DType::Q5_0>);
    tile(DType::Q5_1, gemm_legacy512<DecQ5_1, DType::Q5_1>);
    tile(DType::Q8_0, gemm_legacy512<DecQ8_0, DType::Q8_0>);
}

}  // namespace ember

#else

namespace ember {
// Built without AVX-512 VNNI: every entry falls back to the AVX2 kernels.
void register_avx512_kernels(KernelTable&) {}
}  // namespace ember

#endif
