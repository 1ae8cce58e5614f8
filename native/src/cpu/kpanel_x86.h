// Weight decoding shared by the x86 SIMD levels (AVX2 and AVX-512 both include this): the
// 32-element block decoders, and the K-quant prefill panels (a super-block unpacked once
// per matrix product into int8 values with int16 scales laid out for madd, so the tile
// kernels only multiply and add). The helpers sit in
// an unnamed namespace on purpose: each kernel file compiles its own copy with its own
// instruction-set flags, and no AVX-512 code can leak into the AVX2 file's copy.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "cpu/kernels.h"
#include "cpu/kernels_ref.h"
#include "quant/types.h"

namespace ember {
namespace {

// F16C instead of the 256 KiB lookup table: block scales are scattered, and table
// lookups miss L1 in the inner loops.
inline float f16(uint16_t h) { return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h))); }

inline __m256i loadu256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// Decoding reads every weight once, front to back through a chunk of contiguous rows. A
// tile reads its R rows side by side, so having consumed `off` bytes of each row it has
// used about the first R * off bytes of the tile's span: one software prefetch stream runs
// decode_ahead() bytes in front of that point. Each call covers the lines that start in
// [from, to) + decode_ahead(), and successive calls continue where the last stopped, so
// every line is requested once and in address order. Per-row prefetches (R streams, a
// few rows ahead) left rows of 576 F16 values at about 80% of this stream's bandwidth.
// The distance is decode_prefetch() (kernels.h), decided per CPU: 2 KiB, or none on Zen 4.
// 2 KiB: on a Sapphire Rapids-class Xeon, one thread decoding a 16384 x 16384 matrix
// from memory on the four-row copy (bench_kernels), 4 KiB ahead read Q8_0 at 25 GOP/s,
// Q5_1 31, Q5_0 35, Q4_0 56; 2 KiB 30, 38, 40, 61; 8 KiB and more were slower still.
// On Zen 3, distances of 2-16 KiB were within noise of each other.
inline uintptr_t decode_ahead() { return detail::g_decode_prefetch.load(std::memory_order_relaxed); }
inline void prefetch_ahead(const uint8_t* from, const uint8_t* to) {
    const uintptr_t ahead = decode_ahead();
    if (!ahead) return;
    uintptr_t line = ((uintptr_t)from + ahead + 63) & ~(uintptr_t)63;
    const uintptr_t end = (uintptr_t)to + ahead;
    for (; line < end; line += 64) _mm_prefetch(reinterpret_cast<const char*>(line), _MM_HINT_T0);
}
// The same for a span of a compile-time size (a Q4_0 or legacy four-row group block): a
// request every 64 bytes from its first byte and one for its last, decode_ahead() in
// front, unrolled, with no branch but the one on the distance; every line the span
// touches is requested, and a line two neighbouring spans share twice. prefetch_ahead's
// loop cost a dozen instructions a span and kept the compiler from unrolling the streams'
// loop around it, so their accumulators went through memory: the AVX2 Q4_0 decode took
// 47% fewer instructions with this. The K-quant kernels' long spans (576-840 bytes) keep the loop: issued all at
// once they decoded slower (docs/DESIGN.md).
template <size_t Bytes>
inline void prefetch_span(const uint8_t* from) {
    const uintptr_t ahead = decode_ahead();
    if (!ahead) return;
    const char* p = reinterpret_cast<const char*>(from + ahead);
#pragma GCC unroll 16
    for (size_t k = 0; k < Bytes / 64; ++k) _mm_prefetch(p + 64 * k, _MM_HINT_T0);
    _mm_prefetch(p + Bytes - 1, _MM_HINT_T0);
}

// Decoding reads a call's four-row groups as N streams at once: the call's groups cut
// into N runs, group g of each run side by side, block by block, each group with its own
// accumulators and float operations in its own order (the decode kernels' S form), so the
// same bits as one group at a time; the groups past N whole runs go one at a time. One
// stream per thread left a 1B Q4_0 decode at 77% of the probed read rate, and 86-89% even
// with the arithmetic taken out of the kernels; two streams far apart, 85%: the hardware
// prefetchers keep more lines in flight for more streams. Neighbouring groups as the pair
// (4.6 KiB apart) were 8% slower than one stream. Three streams (N = 3) against two, per
// kernel, decoding from memory alone (benchmarks/bench_decode_stream, 48 matrices of
// 8192 x 2048, two threads, in-process alternation, Sapphire Rapids-class Xeon), share
// of the probed rate: AVX-512 Q4_0 92-94% -> 95-99%, Q4_K 86-89% -> 91-92%, Q5_K 84-86%
// -> 88%, Q8_0 87-89% -> 94-97%; AVX2 Q4_0 83-86% -> 92-94%, Q4_K 85-88% -> 95%, Q5_K
// 82% -> 86-88%, Q8_0 88-89% -> 95%; Q6_K in the plain interleave no better. Re-encoded,
// Q6_K takes three as well: in-model 1B Q6_K pairs on Zen 3 (tg32, two threads) +4%, +16%,
// one thread +17%, -8% (a pair there swings by 10%). Four streams were slower than three
// for every type.
// The decode kernels' last step: stream j's accumulator holds its four rows' sums in two
// halves, [r0 r1 r2 r3 | r0 r1 r2 r3]; they are added and stored at s[j].
template <int S>
inline void store_rows4(const __m256 (&acc)[S], float* const* s) {
    for (int j = 0; j < S; ++j)
        _mm_storeu_ps(s[j], _mm_add_ps(_mm256_castps256_ps128(acc[j]), _mm256_extractf128_ps(acc[j], 1)));
}
// decode_groups<N>(groups, group, out, kernel): group(g) points at group g, its results go
// to out + 4 g; kernel(std::integral_constant<int, S>, x, o) runs S groups side by side.
template <int N, class Group, class Kernel>
inline void decode_groups(int groups, Group group, float* out, Kernel kernel) {
    using Ptr = decltype(group(0));
    const int run = groups / N;
    for (int g = 0; g < run; ++g) {
        Ptr x[N];
        float* o[N];
        for (int k = 0; k < N; ++k) {
            x[k] = group(g + k * run);
            o[k] = out + 4 * (g + k * run);
        }
        kernel(std::integral_constant<int, N>(), x, o);
    }
    for (int g = N * run; g < groups; ++g) {
        const Ptr x[1] = {group(g)};
        float* const o[1] = {out + 4 * g};
        kernel(std::integral_constant<int, 1>(), x, o);
    }
}

// Decoding a few columns on the four-row copy (the 32-element block types, whose
// activation rows are Q8_0): for each column, prepare(y) makes what the kernel reads of
// its activation row y, then the call's groups go as three streams (decode_groups) to
// kernel(streams, x, y, o).
template <class Prepare, class Kernel>
inline void decode_columns(int groups, int nc, const uint8_t* W, size_t ws, const uint8_t* A, size_t as, float* s,
                           size_t lds, Prepare prepare, Kernel kernel) {
    for (int c = 0; c < nc; ++c) {
        const BlockQ8_0* const y = reinterpret_cast<const BlockQ8_0*>(A + (size_t)c * as);
        prepare(y);
        decode_groups<3>(groups, [&](int g) { return W + (size_t)(4 * g) * ws; }, s + (size_t)c * lds,
                         [&](auto streams, auto x, float* const* o) { kernel(streams, x, y, o); });
    }
}

// ---- Q4_0 in its re-encoded four-row groups (kernels.h: four_row_reencoded) ------
// A group block is 72 bytes: the four rows' f16 scales, then the four steps in two
// nibble-packed halves. Unpacking the 128 values is two loads and six logic operations,
// where four interleaved blocks took a 128-bit load, a shift, an insert and a mask each.
constexpr size_t kQ40Group = 4 * sizeof(BlockQ4_0);

inline void q4_0_group_steps(const uint8_t* gb, __m256i S[4]) {
    const __m256i m = _mm256_set1_epi8(0x0f);
    const __m256i v01 = loadu256(gb + 8), v23 = loadu256(gb + 40);
    S[0] = _mm256_and_si256(v01, m);
    S[1] = _mm256_and_si256(_mm256_srli_epi16(v01, 4), m);
    S[2] = _mm256_and_si256(v23, m);
    S[3] = _mm256_and_si256(_mm256_srli_epi16(v23, 4), m);
}
// What the Q4_0 decodes read of an activation block, made once per call for all the
// groups: its values, 8 x the sums of its two halves (the offset term: sum (u - 8) a =
// sum u a - 8 sum a, taken out in int32 instead of per row in int16; the same integers,
// exactly) and its scale, in 48 bytes. The values are copied so that one record is all a
// block needs: with the block and a 64-byte record of vectors beside it (98 bytes a block),
// the activations fell out of L1 between a group's passes on rows of 4096 values or more,
// and a thread read its weights at 63-76% of the probe there (bench_decode_stream, one
// thread, Zen 4) against 88-94% since.
struct Q40Act {
    int8_t qs[32];
    int32_t off[2];
    float d;
    int32_t pad;
};
inline void q4_0_prepare(int64_t nb, const BlockQ8_0* y, Q40Act* pre) {
    for (int64_t i = 0; i < nb; ++i) {
        const __m256i av = loadu256(y[i].qs);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(pre[i].qs), av);
        __m256i q = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), av), _mm256_set1_epi16(1));
        q = _mm256_add_epi32(q, _mm256_shuffle_epi32(q, 0x4e));
        q = _mm256_add_epi32(q, _mm256_shuffle_epi32(q, 0xb1));  // each 128-bit half's sum
        pre[i].off[0] = 8 * _mm256_extract_epi32(q, 0);
        pre[i].off[1] = 8 * _mm256_extract_epi32(q, 4);
        pre[i].d = f16(y[i].d);
        pre[i].pad = 0;
    }
}
// the offsets in the rows' lanes [o0 o0 o0 o0 | o1 o1 o1 o1]
inline __m256i q4_0_act_off(const Q40Act& p) {
    return _mm256_permutevar8x32_epi32(_mm256_castsi128_si256(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p.off))),
                                       _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1));
}

// [d0 d1 d2 d3 | d0 d1 d2 d3]
inline __m256 q4_0_group_scales(const uint8_t* gb) {
    int64_t d4;
    std::memcpy(&d4, gb, 8);
    return _mm256_cvtph_ps(_mm_set1_epi64x(d4));
}

// ---- block decoders: 32 weights as int8 in element order -------------------------

inline __m256i nibbles32(const uint8_t* qs) {
    const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
    const __m256i v = _mm256_set_m128i(_mm_srli_epi16(t, 4), t);  // high nibbles are elements 16..31
    return _mm256_and_si256(v, _mm256_set1_epi8(0x0f));
}

// byte j = 0xff where bit j of x is set
inline __m256i bits32(const uint8_t* p) {
    uint32_t x;
    std::memcpy(&x, p, 4);
    const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                          2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)x), shuf);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    return _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
}

// kOffset: the signed value is dec_u() - kOffset, with dec_u() unsigned (the tiles use
// that form: maddubs takes the unsigned side directly and the offset comes off through
// the activation block sum, which leaves fewer registers live than the sign trick).
struct DecQ4_0 {
    using Block = BlockQ4_0;
    static constexpr bool kSigned = true, kMin = false;
    static constexpr int kOffset = 8;
    static __m256i dec_u(const Block& b) { return nibbles32(b.qs); }
    static __m256i dec(const Block& b) { return _mm256_sub_epi8(dec_u(b), _mm256_set1_epi8(8)); }
};
struct DecQ4_1 {
    using Block = BlockQ4_1;
    static constexpr bool kSigned = false, kMin = true;
    static constexpr int kOffset = 0;
    static __m256i dec(const Block& b) { return nibbles32(b.qs); }
};
struct DecQ5_0 {
    using Block = BlockQ5_0;
    static constexpr bool kSigned = true, kMin = false;
    static constexpr int kOffset = 16;
    static __m256i dec_u(const Block& b) {
        return _mm256_or_si256(nibbles32(b.qs), _mm256_and_si256(bits32(b.qh), _mm256_set1_epi8(0x10)));
    }
    static __m256i dec(const Block& b) { return _mm256_sub_epi8(dec_u(b), _mm256_set1_epi8(16)); }
};
struct DecQ5_1 {
    using Block = BlockQ5_1;
    static constexpr bool kSigned = false, kMin = true;
    static constexpr int kOffset = 0;
    static __m256i dec(const Block& b) {
        return _mm256_or_si256(nibbles32(b.qs), _mm256_and_si256(bits32(b.qh), _mm256_set1_epi8(0x10)));
    }
};
struct DecQ8_0 {
    using Block = BlockQ8_0;
    static constexpr bool kSigned = true, kMin = false;
    static constexpr int kOffset = 0;  // the full int8 range: the sign trick
    static __m256i dec(const Block& b) { return loadu256(b.qs); }
};

// The 4-bit table types (MXFP4, IQ4_NL): the nibbles (element order) as indices into
// 16 values, one pshufb.
inline __m256i table32(const uint8_t* qs, const int8_t (&values)[16]) {
    const __m256i t = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(values)));
    return _mm256_shuffle_epi8(t, nibbles32(qs));
}
// MXFP4's doubled E2M1 values plus 12 (0..24): the offset form of Q4_0 (kOffset below),
// whose sums fit int16 as Q4_0's do (|w| <= 12 < 16)
alignas(16) inline constexpr int8_t kValuesMXFP4Plus12[16] = {12, 13, 14, 15, 16, 18, 20, 24,
                                                              12, 11, 10, 9,  8,  6,  4,  0};
struct DecMXFP4 {
    using Block = BlockMXFP4;
    static constexpr bool kSigned = true, kMin = false;
    static constexpr int kOffset = 12;
    static __m256i dec_u(const Block& b) { return table32(b.qs, kValuesMXFP4Plus12); }
    static __m256i dec(const Block& b) { return table32(b.qs, kValuesMXFP4); }
};
// IQ4_NL's values span -127..113: an unsigned u + off times an activation would pass int16
// in maddubs's pair sums, so its tiles take Q8_0's sign trick (kTable: the tiles keep the
// decoded signs in registers rather than decode a block again per column)
struct DecIQ4_NL {
    using Block = BlockIQ4_NL;
    static constexpr bool kSigned = true, kMin = false, kTable = true;
    static constexpr int kOffset = 0;
    static __m256i dec(const Block& b) { return table32(b.qs, kValuesIQ4NL); }
};
// Signed values over much of int8 (Q8_0, IQ4_NL): the sign trick in every tile, no prefill
// panels of offset or unsigned values.
template <class D>
constexpr bool kWideSigned = D::kSigned && D::kOffset == 0;
template <class D, class = void>
struct IsTable : std::false_type {};
template <class D>
struct IsTable<D, std::void_t<decltype(D::kTable)>> : std::bool_constant<D::kTable> {};

// Blocks scaled by an E8M0 byte `e` (MXFP4, and its unpacked form) instead of an f16 `d`
template <class B, class = void>
struct HasE8M0 : std::false_type {};
template <class B>
struct HasE8M0<B, std::void_t<decltype(std::declval<const B&>().e)>> : std::true_type {};

// A 32-block's weight scale as a float: its f16 d, or MXFP4's E8M0 half scale (a power
// of two, so its products with the activation scale are exact in any order).
template <class B>
inline float block_scale(const B& b) {
    if constexpr (HasE8M0<B>::value) return e8m0_to_fp32_half(b.e);
    else return f16(b.d);
}

// Bit k of every byte of h moved to bit 4 (0x10 or 0): Q5_K's fifth bits. Two
// instructions: a 16-bit shift by |4 - k| cannot carry a neighbouring byte's bit into
// bit 4 of either byte.
inline __m256i bit_to_16(__m256i h, int k) {
    const __m256i s = k < 4 ? _mm256_slli_epi16(h, 4 - k) : _mm256_srli_epi16(h, k - 4);
    return _mm256_and_si256(s, _mm256_set1_epi8(0x10));
}

// Q4_K/Q5_K's unsigned values of 32-groups 2j (lo) and 2j + 1 (hi), element order; hv:
// the block's qh (Q5_K only)
template <bool kQ5>
inline void q45_values(const uint8_t* qs, __m256i hv, int j, __m256i* lo, __m256i* hi) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    const __m256i qv = loadu256(qs + 32 * j);
    *lo = _mm256_and_si256(qv, m4);
    *hi = _mm256_and_si256(_mm256_srli_epi16(qv, 4), m4);
    if constexpr (kQ5) {
        *lo = _mm256_or_si256(*lo, bit_to_16(hv, 2 * j));
        *hi = _mm256_or_si256(*hi, bit_to_16(hv, 2 * j + 1));
    }
}
// Q6_K's unsigned values (q + 32, 0..63) of 32-groups 4c .. 4c + 3, element order
inline void q6_values(const BlockQ6_K& b, int c, __m256i q[4]) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), m3 = _mm256_set1_epi8(3);
    const __m256i l0 = loadu256(b.ql + 64 * c), l1 = loadu256(b.ql + 64 * c + 32);
    const __m256i h = loadu256(b.qh + 32 * c);
    q[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_slli_epi16(_mm256_and_si256(h, m3), 4));
    q[1] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2), m3), 4));
    q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                           _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 4), m3), 4));
    q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                           _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 6), m3), 4));
}

// ---- Q4_K's and Q5_K's whole 32-groups ---------------------------------------------------
//
// The x86 K-quant kernels keep each row's sums over the first and the second sixteen
// elements of every 32-group apart ("lo" and "hi": AVX2's [r0..r3 lo | r0..r3 hi] lanes),
// and the min terms over groups 0-3 and 4-7 likewise, each converted to float and
// multiply-added on its own. Q4_K's and Q5_K's scales and mins are per 32 elements, so
// for them every kernel (decode and prefill, AVX2 and AVX-512, the AMX epilogue) adds hi
// into lo as integers first and leaves hi zero: the float operations are unchanged and
// the same in every kernel (so decode and prefill keep identical bits), and the
// sixteen-row prefill tile may scale whole 32-element sums, one multiply where it took
// two (kernels_avx512.cpp, ktile16).
template <class B>
constexpr bool kKWhole32 = std::is_same<B, BlockQ4_K>::value || std::is_same<B, BlockQ5_K>::value;
// [lo | hi] -> [lo + hi | 0]
inline __m256i whole32(__m256i v) {
    return _mm256_zextsi128_si256(_mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1)));
}

// ---- K-quant tiles: rows unpacked once per call, then a pure int8 micro-kernel --------
//
// Prefill reuses every weight row across many columns, so each super-block is first
// unpacked (per thread, once per gemm call) into signed int8 values with the offset
// applied, int16 scales laid out for madd, and int16 mins per 16. The micro-kernel then
// only does sign/maddubs/madd per 32 elements and converts to float once per super-block.
struct KPanel {
    int8_t q[QK_K];
    int16_t scv[8][16];  // for 32 elements j*32..: lanes 0-7 scale of the first 16, 8-15 the second
    int16_t mn[16];      // min of each 16 (zero for the symmetric types)
    float d, dmin;
};

inline void put_scales(KPanel& p, const int sc[16], const int mn[16]) {
    for (int j = 0; j < 8; ++j)
        for (int l = 0; l < 16; ++l) p.scv[j][l] = (int16_t)sc[2 * j + l / 8];
    for (int g = 0; g < 16; ++g) p.mn[g] = (int16_t)mn[g];
}
inline void store32(int8_t* dst, __m256i v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), v); }

inline void unpack_panel(const BlockQ2_K& b, KPanel& p) {
    const __m256i m3 = _mm256_set1_epi8(3);
    for (int c = 0; c < 2; ++c) {
        const __m256i qv = loadu256(b.qs + 32 * c);
        for (int sh = 0; sh < 4; ++sh) store32(p.q + 128 * c + 32 * sh, _mm256_and_si256(_mm256_srli_epi16(qv, 2 * sh), m3));
    }
    int sc[16], mn[16];
    for (int g = 0; g < 16; ++g) {
        sc[g] = b.scales[g] & 15;
        mn[g] = b.scales[g] >> 4;
    }
    put_scales(p, sc, mn);
    p.d = f16(b.d);
    p.dmin = f16(b.dmin);
}
inline void unpack_panel(const BlockQ3_K& b, KPanel& p) {
    const __m256i m3 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1), four = _mm256_set1_epi8(4);
    const __m256i hm = loadu256(b.hmask);
    for (int c = 0; c < 2; ++c) {
        const __m256i qv = loadu256(b.qs + 32 * c);
        for (int sh = 0; sh < 4; ++sh) {
            const int k = 4 * c + sh;
            const __m256i hb = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hm, k), one), 2);
            const __m256i q = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qv, 2 * sh), m3), hb);
            store32(p.q + 32 * k, _mm256_sub_epi8(q, four));
        }
    }
    int sc[16], mn[16] = {};
    for (int k = 0; k < 16; ++k) {
        const int lo = (b.scales[k % 8] >> (4 * (k / 8))) & 0x0f;
        const int hi = (b.scales[8 + k % 4] >> (2 * (k / 4))) & 0x03;
        sc[k] = (lo | (hi << 4)) - 32;
    }
    put_scales(p, sc, mn);
    p.d = f16(b.d);
    p.dmin = 0.0f;
}
template <class B>
inline void unpack_panel_q45(const B& b, KPanel& p) {
    constexpr bool kQ5 = std::is_same<B, BlockQ5_K>::value;
    __m256i hv = _mm256_setzero_si256();
    if constexpr (kQ5) hv = loadu256(b.qh);
    for (int j = 0; j < 4; ++j) {
        __m256i lo, hi;
        q45_values<kQ5>(b.qs, hv, j, &lo, &hi);
        store32(p.q + 64 * j, lo);
        store32(p.q + 64 * j + 32, hi);
    }
    int sc[16], mn[16];
    for (int g = 0; g < 8; ++g) {
        k_scale_min_ref(b.scales, g, &sc[2 * g], &mn[2 * g]);
        sc[2 * g + 1] = sc[2 * g];
        mn[2 * g + 1] = mn[2 * g];
    }
    put_scales(p, sc, mn);
    p.d = f16(b.d);
    p.dmin = f16(b.dmin);
}
inline void unpack_panel(const BlockQ4_K& b, KPanel& p) { unpack_panel_q45(b, p); }
inline void unpack_panel(const BlockQ5_K& b, KPanel& p) { unpack_panel_q45(b, p); }
inline void unpack_panel(const BlockQ6_K& b, KPanel& p) {
    const __m256i k32 = _mm256_set1_epi8(32);
    for (int c = 0; c < 2; ++c) {
        __m256i q[4];
        q6_values(b, c, q);
        for (int k = 0; k < 4; ++k) store32(p.q + 128 * c + 32 * k, _mm256_sub_epi8(q[k], k32));
    }
    int sc[16], mn[16] = {};
    for (int g = 0; g < 16; ++g) sc[g] = b.scales[g];
    put_scales(p, sc, mn);
    p.d = f16(b.d);
    p.dmin = 0.0f;
}

// Q4_K/Q5_K re-encoded groups (four_row_layout), shared by the AVX2 and AVX-512 decode
// kernels.
// bytes 4g + r: row r's scale (scb) and min (mb) of 32-group g
inline void q4_k_group_scales(const uint8_t* gb, __m256i* scb, __m256i* mb) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(3);
    const __m256i lv = loadu256(gb + 16);
    const __m256i hb = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(gb + 48)));
    const __m256i hv = _mm256_and_si256(_mm256_srlv_epi64(hb, _mm256_setr_epi64x(0, 0, 4, 4)), m4);
    *scb = _mm256_or_si256(_mm256_and_si256(lv, m4), _mm256_slli_epi16(_mm256_and_si256(hv, m2), 4));
    *mb = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(lv, 4), m4),
                          _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hv, 2), m2), 4));
}
// int16 words [m(r, 2p) m(r, 2p + 1)] per row r in the low half, groups + 4 in the high
alignas(32) const int8_t kQ4KMin[2][32] = {
#define EMBER_M(a, r) (int8_t)((a) + (r)), (int8_t)0x80, (int8_t)((a) + 4 + (r)), (int8_t)0x80
#define EMBER_P(a) EMBER_M(a, 0), EMBER_M(a, 1), EMBER_M(a, 2), EMBER_M(a, 3)
    {EMBER_P(0), EMBER_P(0)}, {EMBER_P(8), EMBER_P(8)},
#undef EMBER_P
#undef EMBER_M
};
// the min term's int32 lanes [r0..r3 | r0..r3] from mb and q4_k_min_pairs' amin
inline __m256i q4_k_min_sum(__m256i mb, const int16_t amin[2][16]) {
    const __m256i m01 = _mm256_shuffle_epi8(mb, _mm256_load_si256(reinterpret_cast<const __m256i*>(kQ4KMin[0])));
    const __m256i m23 = _mm256_shuffle_epi8(mb, _mm256_load_si256(reinterpret_cast<const __m256i*>(kQ4KMin[1])));
    return _mm256_add_epi32(_mm256_madd_epi16(m01, loadu256(amin[0])), _mm256_madd_epi16(m23, loadu256(amin[1])));
}
// Four 16-bit values (four rows' f16 scales) in the low 64 bits
inline __m128i pack_u16x4(uint16_t a, uint16_t b, uint16_t c, uint16_t d) {
    // pinsrw straight from memory: five instructions, where shifting and or-ing pairs took ten
    return _mm_insert_epi16(_mm_insert_epi16(_mm_insert_epi16(_mm_cvtsi32_si128(a), b, 1), c, 2), d, 3);
}
// e8m0_to_fp32_half of int32 lanes 0..255, by their bits (no float arithmetic, so no
// flush of the subnormal halves e = 0, 1 whatever the MXCSR says)
inline __m128 e8m0_half4(__m128i e) {
    const __m128i normal = _mm_slli_epi32(_mm_sub_epi32(e, _mm_set1_epi32(1)), 23);
    const __m128i sub = _mm_sllv_epi32(_mm_set1_epi32(0x00200000), e);
    return _mm_castsi128_ps(_mm_blendv_epi8(normal, sub, _mm_cmpgt_epi32(_mm_set1_epi32(2), e)));
}
inline __m256 e8m0_half8(__m256i e) {
    const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
    const __m256i sub = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
    return _mm256_castsi256_ps(_mm256_blendv_epi8(normal, sub, _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e)));
}

// Four rows' block scales, twice: [d0 d1 d2 d3 | d0 d1 d2 d3]
template <class B>
inline __m256 block_scales4(const B& b0, const B& b1, const B& b2, const B& b3) {
    if constexpr (HasE8M0<B>::value) {
        const __m128 d = e8m0_half4(_mm_setr_epi32(b0.e, b1.e, b2.e, b3.e));
        return _mm256_set_m128(d, d);
    } else {
        const __m128i dh = pack_u16x4(b0.d, b1.d, b2.d, b3.d);
        return _mm256_cvtph_ps(_mm_unpacklo_epi64(dh, dh));
    }
}
// Eight rows' block scales [d0 .. d7]
template <class B>
inline __m256 block_scales8(const B* const x[8]) {
    if constexpr (HasE8M0<B>::value)
        return e8m0_half8(_mm256_setr_epi32(x[0]->e, x[1]->e, x[2]->e, x[3]->e, x[4]->e, x[5]->e, x[6]->e, x[7]->e));
    else
        return _mm256_cvtph_ps(_mm_setr_epi16((short)x[0]->d, (short)x[1]->d, (short)x[2]->d, (short)x[3]->d,
                                              (short)x[4]->d, (short)x[5]->d, (short)x[6]->d, (short)x[7]->d));
}
// [x0 x1 x2 x3 | x0 x1 x2 x3] from four f16 at p
inline __m256 f16x4_twice(const uint8_t* p) {
    int64_t v;
    std::memcpy(&v, p, 8);
    return _mm256_cvtph_ps(_mm_set1_epi64x(v));
}

// Q4_K/Q5_K decoding of the re-encoded groups: an activation super-block's 32-group sums
// (|A| <= 32 * 127) as the min shuffles pair them, [A0 A1] x 4 | [A4 A5] x 4 in amin[0],
// groups 2, 3 | 6, 7 in amin[1]
inline void q4_k_min_pairs(const BlockQ8_K& y, int16_t amin[2][16]) {
    int16_t A[8];
    for (int g = 0; g < 8; ++g) A[g] = (int16_t)(y.bsums[2 * g] + y.bsums[2 * g + 1]);
    for (int h = 0; h < 2; ++h)
        for (int r = 0; r < 4; ++r) {
            amin[h][2 * r] = A[2 * h];
            amin[h][2 * r + 1] = A[2 * h + 1];
            amin[h][8 + 2 * r] = A[4 + 2 * h];
            amin[h][8 + 2 * r + 1] = A[4 + 2 * h + 1];
        }
}
// What the Q4_K and Q5_K decodes (AVX2 and AVX-512) read of an activation super-block
// besides its values and d, made once per call: the min sums as q4_k_min_pairs pairs them.
// Each 32-group's steps (dword k broadcast in each 128-bit half) are made in the kernels,
// shared by the streams: stored once per call they were four times the activations and,
// on rows of 4096 values or more, fell out of L1 between one group of streams and the next.
struct Q4KPre {
    int16_t amin[2][16];
};
inline void q4_k_prepare(int64_t nbk, const BlockQ8_K* y, Q4KPre* pre) {
    for (int64_t i = 0; i < nbk; ++i) q4_k_min_pairs(y[i], pre[i].amin);
}

// Q5_K's re-encoded values (kernels.h): 32-group g's four steps (0..31) from its X and Y
// and its pair's W, two and a half loads and twelve logic operations for the four rows'
// 128 values. The 16-bit shifts' spill from the neighbouring byte lands outside each mask.
inline void q5_k_group_steps(const uint8_t* gb, int g, __m256i S[4]) {
    const uint8_t* v = gb + 64 + 160 * (g / 2) + 32 * (g % 2);  // pairs of groups: X X Y Y W
    const __m256i m31 = _mm256_set1_epi8(31), m7 = _mm256_set1_epi8(7), m18 = _mm256_set1_epi8(0x18);
    const __m256i X = loadu256(v), Y = loadu256(v + 64), W = loadu256(gb + 64 + 160 * (g / 2) + 128);
    // bits 3-4 of step 2 are W's bits 4 (g % 2) + 0..1, of step 3 its bits 4 (g % 2) + 2..3
    const __m256i w2 = g % 2 ? _mm256_srli_epi16(W, 1) : _mm256_slli_epi16(W, 3);
    const __m256i w3 = g % 2 ? _mm256_srli_epi16(W, 3) : _mm256_slli_epi16(W, 1);
    S[0] = _mm256_and_si256(X, m31);
    S[1] = _mm256_and_si256(Y, m31);
    S[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(X, 5), m7), _mm256_and_si256(w2, m18));
    S[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(Y, 5), m7), _mm256_and_si256(w3, m18));
}
// A 32-group's four steps (minus `off` from every value) into the four rows' panels in
// element order: a 4 x 4 dword transpose in each 128-bit lane
inline void steps_to_panels(const __m256i S[4], __m256i off, int g, KPanel* const p[4]) {
    const __m256i t0 = _mm256_unpacklo_epi32(S[0], S[1]), t1 = _mm256_unpackhi_epi32(S[0], S[1]);
    const __m256i t2 = _mm256_unpacklo_epi32(S[2], S[3]), t3 = _mm256_unpackhi_epi32(S[2], S[3]);
    store32(p[0]->q + 32 * g, _mm256_sub_epi8(_mm256_unpacklo_epi64(t0, t2), off));
    store32(p[1]->q + 32 * g, _mm256_sub_epi8(_mm256_unpackhi_epi64(t0, t2), off));
    store32(p[2]->q + 32 * g, _mm256_sub_epi8(_mm256_unpacklo_epi64(t1, t3), off));
    store32(p[3]->q + 32 * g, _mm256_sub_epi8(_mm256_unpackhi_epi64(t1, t3), off));
}
// A re-encoded Q5_K group super-block into the four rows' KPanels, as unpack_panel makes
// them from the four blocks (the AVX-512 prefill's; the AVX2 one reads the steps as they are)
inline void unpack_panels_q5_k_x4(const uint8_t* gb, KPanel* const p[4]) {
    for (int g = 0; g < 8; ++g) {
        __m256i S[4];
        q5_k_group_steps(gb, g, S);
        steps_to_panels(S, _mm256_setzero_si256(), g, p);
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

// Dword k of each 128-bit lane of v in all four of its dwords: the 512-bit decodes' step
// broadcasts (vpshufd; a template, so that it is compiled only where AVX-512 code is).
// Under SIMDe (test_kquant512_emulated), which lacks the 512-bit vpshufd, the same as a
// byte shuffle.
template <int K>
inline __m512i dword_bcast512(__m512i v) {
#ifdef SIMDE_VERSION
    return _mm512_shuffle_epi8(v, _mm512_set1_epi32(0x03020100 + 0x04040404 * K));
#else
    return _mm512_shuffle_epi32(v, (_MM_PERM_ENUM)(0x55 * K));
#endif
}

// Q6_K re-encoded groups (four_row_layout), shared by the AVX2 and AVX-512 kernels.
constexpr size_t kQ6Group = 4 * sizeof(BlockQ6_K);
// 32-group g's four steps (unsigned values 0..63): three loads and eleven logic
// operations for the four rows' 128 values. The 16-bit shifts' spill from the
// neighbouring byte lands outside each mask.
inline void q6_k_group_steps(const uint8_t* gb, int g, __m256i S[4]) {
    const uint8_t* v = gb + 72 + 192 * (g / 2) + 32 * (g % 2);  // pairs of groups: X X Y Y Z Z
    const __m256i m63 = _mm256_set1_epi8(63);
    const __m256i X = loadu256(v), Y = loadu256(v + 64), Z = loadu256(v + 128);
    S[0] = _mm256_and_si256(X, m63);
    S[1] = _mm256_and_si256(Y, m63);
    S[3] = _mm256_and_si256(Z, m63);
    S[2] = _mm256_or_si256(
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(X, 6), _mm256_set1_epi8(3)),
                        _mm256_and_si256(_mm256_srli_epi16(Y, 4), _mm256_set1_epi8(12))),
        _mm256_and_si256(_mm256_srli_epi16(Z, 2), _mm256_set1_epi8(48)));
}
// Group g's scale bytes (8 + 8g + 4h + r, in the sixteen of groups 2q, 2q + 1 loaded into
// both halves) into the high byte of int16 words [s0 s0 s1 s1 s2 s2 s3 s3]: h = 0 in the
// low 128 bits, 1 in the high ones; the table's index is g % 2
alignas(32) const int8_t kQ6KScale[2][32] = {
#define EMBER_W(j) (int8_t)0x80, (int8_t)(j), (int8_t)0x80, (int8_t)(j)
#define EMBER_H(b) EMBER_W(b), EMBER_W((b) + 1), EMBER_W((b) + 2), EMBER_W((b) + 3)
    {EMBER_H(0), EMBER_H(4)}, {EMBER_H(8), EMBER_H(12)},
#undef EMBER_H
#undef EMBER_W
};
// group g's scale vector: rows' scale 2g (twice each) in the low half, 2g + 1 in the high
inline __m256i q6_k_scale_vector(const uint8_t* gb, int g) {
    const __m256i b = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(gb + 8 + 16 * (g / 2))));
    return _mm256_srai_epi16(
        _mm256_shuffle_epi8(b, _mm256_load_si256(reinterpret_cast<const __m256i*>(kQ6KScale[g & 1]))), 8);
}
// An activation 32-group (32 bytes at qs) as the re-encoded Q6_K decodes read it: with
// dword k broadcast in each 128-bit half (st[k], against step k), and returned, 32 x the
// sums of the eight activations each int16 word of a step's maddubs covers (|sum| <= 8 *
// 127), which the decodes subtract to take the -32 off inside the group
inline __m256i q6_k_group_acts(const int8_t* qs, __m256i st[4]) {
    const __m256i av = loadu256(qs), ones = _mm256_set1_epi8(1);
    st[0] = _mm256_shuffle_epi32(av, 0x00);
    st[1] = _mm256_shuffle_epi32(av, 0x55);
    st[2] = _mm256_shuffle_epi32(av, 0xaa);
    st[3] = _mm256_shuffle_epi32(av, 0xff);
    const __m256i sum = _mm256_add_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(ones, st[0]), _mm256_maddubs_epi16(ones, st[1])),
                                         _mm256_add_epi16(_mm256_maddubs_epi16(ones, st[2]), _mm256_maddubs_epi16(ones, st[3])));
    return _mm256_slli_epi16(sum, 5);
}
// What the Q6_K decodes (AVX2 and AVX-512) read of an activation super-block besides its
// values and d, made once per call: per 32-group g, q6_k_group_acts' -32 terms, which hold
// one pair of int16 words repeated across each 128-bit half, as those two 32-bit pairs
// (q6_k_off256 repeats them; the AVX-512 decode reads groups 2q and 2q + 1 as one 16-byte
// row). 64 bytes a super-block where the vectors took 288: with them the activations fell
// out of L1 between a group's passes on rows of 4096 values or more, and a thread read
// its weights at 69-76% of the probe there (bench_decode_stream, one thread, Zen 4).
struct Q6KPre {
    uint32_t off[8][2];
};
inline void q6_k_prepare(int64_t nbk, const BlockQ8_K* y, Q6KPre* pre) {
    for (int64_t i = 0; i < nbk; ++i)
        for (int g = 0; g < 8; ++g) {
            __m256i st[4];
            const __m256i off = q6_k_group_acts(y[i].qs + 32 * g, st);
            pre[i].off[g][0] = (uint32_t)_mm256_extract_epi32(off, 0);
            pre[i].off[g][1] = (uint32_t)_mm256_extract_epi32(off, 4);
        }
}
inline __m256i q6_k_off256(const uint32_t (&off)[2]) {
    return _mm256_permutevar8x32_epi32(_mm256_castsi128_si256(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(off))),
                                       _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1));
}

// A re-encoded group super-block into the four rows' KPanels, as unpack_panel makes them
// from the four blocks: the steps transposed back into each row's element order (a 4 x 4
// dword transpose in each 128-bit lane), the offset taken off.
inline void unpack_panels_q6_k_x4(const uint8_t* gb, KPanel* const p[4]) {
    const __m256i k32 = _mm256_set1_epi8(32);
    for (int g = 0; g < 8; ++g) {
        __m256i S[4];
        q6_k_group_steps(gb, g, S);
        steps_to_panels(S, k32, g, p);
    }
    for (int r = 0; r < 4; ++r) {
        int sc[16], mn[16] = {};
        for (int j = 0; j < 16; ++j) sc[j] = (int8_t)gb[8 + 8 * (j / 2) + 4 * (j % 2) + r];
        put_scales(*p[r], sc, mn);
        uint16_t d;
        std::memcpy(&d, gb + 2 * r, 2);
        p[r]->d = f16(d);
        p[r]->dmin = 0.0f;
    }
}

inline __m256i hadd4(__m256i p0, __m256i p1, __m256i p2, __m256i p3) {
    return _mm256_hadd_epi32(_mm256_hadd_epi32(p0, p1), _mm256_hadd_epi32(p2, p3));
}

}  // namespace
}  // namespace ember
