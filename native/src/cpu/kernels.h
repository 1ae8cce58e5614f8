// CPU kernels and their run-time selection. Every weight type has a row of dot-product
// kernels per instruction-set level; activations are first converted once per matrix
// product to the format its kernel wants (F32, or 8-bit blocks for integer dot products).
// The scalar level is the reference every SIMD level is tested against.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "core/tensor.h"

namespace ember {

enum class Isa : int32_t { SCALAR = 0, AVX2 = 1, AVX512 = 2, NEON = 3 };

const char* isa_name(Isa isa);
// "AVX2", "AVX-512", "NEON", "scalar": for status lines (isa_name gives the EMBER_ISA spelling)
const char* isa_label(Isa isa);
// The best level this CPU supports (CPUID / getauxval / sysctl).
Isa detect_isa();
// The level in use: detect_isa(), or what the EMBER_ISA environment variable asks for
// ("scalar", "avx2", "avx512", "neon"; a level the CPU lacks falls back to the best it has).
// Read when a context is created, so tests can switch levels between contexts.
Isa active_isa();
bool isa_supported(Isa isa);

// AMX (Sapphire Rapids and later): the tile unit's int8 products, used by the AVX-512
// level's K-quant prefill tiles when the CPU has AMX-TILE and AMX-INT8, the OS saves the
// tile state (XCR0) and grants it to this process (Linux: arch_prctl, asked once). The
// tiles compute the same integers as the 512-bit ones and the same float operations after
// them, so the bits do not depend on it. EMBER_AMX=0 in the environment turns it off.
bool amx_supported();
// Whether the tiles use it now: amx_supported() and not turned off (EMBER_AMX=0, or
// set_amx_enabled(false): tests compare both).
bool amx_enabled();
void set_amx_enabled(bool on);

// Whether the CPU is AMD's (x86 CPUID vendor "AuthenticAMD"): some kernel choices differ
// there (Zen 4 runs 512-bit operations as two halves, and its multiplier is not scarce).
bool cpu_is_amd();
// The kernel choices that follow it (bit-identical either way): cpu_is_amd() unless set
// by EMBER_AMD_TUNING=0 / 1 or with set_amd_tuning (test_kernels runs the AVX-512 tiles
// both ways).
bool amd_tuning();
void set_amd_tuning(bool on);

// How far ahead (bytes) the x86 decode kernels request weight lines with software
// prefetches, 0 for none (the hardware prefetchers alone). Decided once per process by the
// CPU (decode_prefetch_default()), or by EMBER_DECODE_PREFETCH=<bytes> in the environment;
// set_decode_prefetch() changes it between runs (bench_decode_stream alternates them). A
// prefetch moves no result bits.
size_t decode_prefetch();
size_t decode_prefetch_default();
void set_decode_prefetch(size_t bytes);
// Whether attention asks for its next block of keys and values while it computes one
// (cpu/ops.cpp): on x86 where the decode kernels take software prefetches at all
// (decode_prefetch() != 0; Zen 4 takes none), and on other CPUs.
bool attention_prefetch();
namespace detail {
// decode_prefetch()'s value, read by the kernels (resolved before the first table is built)
extern std::atomic<size_t> g_decode_prefetch;
}  // namespace detail

// Converts n activations (one row) to a kernel's activation format.
using ConvertRowFn = void (*)(const float* x, void* y, int64_t n);
// s = dot(w, a) over n elements: w one weight row, a one converted activation row.
using VecDotFn = void (*)(int64_t n, float* s, const void* w, const void* a);
// Tile of dot products for prefill: s[c * lds + r] = dot(w row r, a row c) for r < nr,
// c < nc; rows are w_stride / a_stride bytes apart. Each weight block loaded is reused
// across several columns (register tiling), which is what makes prefill compute-bound
// instead of load-bound. Must equal vec_dot per element up to float summation order.
using GemmFn = void (*)(int64_t n, int nr, int nc, const void* w, size_t w_stride, const void* a,
                        size_t a_stride, float* s, size_t lds);

struct DotKernels {
    DType act_type = DType::F32;       // activation format the kernel reads
    ConvertRowFn convert = nullptr;    // F32 -> act_type (nullptr when act_type is F32)
    VecDotFn vec_dot = nullptr;
    GemmFn gemm = nullptr;             // optional; mul_mat loops vec_dot without it
    // gemm on weights in four-row groups (RowGroups, four_row_layout), nr a multiple of
    // 4, with gemm's bits; null where this level does not read that layout
    GemmFn gemm_x4 = nullptr;
    // rows per gemm call in a batched product (a multiple of kMulMatRowBlock), where the
    // level's tiles reuse each activation block across more rows than one row block (the
    // AMX tiles: 64); null: kMulMatRowBlock. A row's bits do not depend on it.
    int (*batch_rows)() = nullptr;
};

// Four-row groups: a weight matrix of a block type (QK-element blocks) rearranged so that
// a group of four rows is one stream: block i of the group's row r is block 4 i + r of the
// group. Group g starts where row 4g does (byte 4g * row bytes); rows after the last whole
// group stay as they are. Decoding then reads each thread's rows front to back, one
// stream, where the four rows of a tile read side by side are four.
// Q4_0, Q4_K, Q5_K and Q6_K are re-encoded in it as well (four_row_reencoded), in the same
// bytes per group (group g still starts at byte 4g * row bytes). Their values are kept as
// "steps": for a 32-value group, step k holds in 32-bit lane r of each 128-bit half row
// r's values 4k..4k+3 (low half) and 16+4k..19+4k (high half); steps 0 and 1 share 32
// bytes (low and high nibbles), as do 2 and 3. Decoding then takes two loads and six logic
// operations for the four rows' 128 values, and their products add up in the rows' lanes
// with no horizontal adds.
//   - Q4_0 group block i (72 bytes): the four f16 scales, then the steps (64 bytes).
//   - Q4_K / Q5_K group super-block i (576 / 704 bytes): the four d, the four dmin (f16),
//     the 6-bit scales and mins j = 4g + r (g the 32-group) as low nibbles in bytes 16 + j
//     (scale low, min high) and top bits in bytes 48.. (j < 16: low nibble of 48 + j,
//     else high nibble of 48 + j - 16; scale's two bits, then min's), then Q4_K's group g's
//     steps at 64 + 64g. Q5_K's five-bit values: groups 2q and 2q + 1 in 160 bytes from
//     64 + 160q as X X Y Y W (32 bytes each): steps 0 and 1 in the low five bits of X and
//     Y, steps 2 and 3's bits 0-2 in the top three bits of X and Y, their bits 3-4 in W
//     (group 2q + h: step 2 at bits 4h + 0..1, step 3 at 4h + 2..3 of byte p).
//   - Q6_K group super-block i (840 bytes): the four d (f16), the int8 scales (scale
//     2g + h of row r at byte 8 + 8g + 4h + r), then group g's steps as three 32-byte
//     vectors X, Y, Z: steps 0, 1, 3 (values 0..63, before the -32) in their low six
//     bits, step 2's bits 0-1, 2-3, 4-5 in the top two bits of X, Y, Z; groups 2q and
//     2q + 1 side by side from byte 72 + 192q (X X Y Y Z Z: 64 bytes hold a pair's X).
bool four_row_reencoded(DType weight_type);
// A weight's copy in that layout (Tensor::extra on the CPU's weights; cpu/repack.h makes
// them). Rows [0, rows(w)) may be read from data: whole groups only, and with `filled` (the
// copier publishes as it goes) only as many as it says; the rows after them are read from
// the tensor's own data. Both give the same bits, so a reader may see either.
struct RowGroups {
    const void* data = nullptr;
    const std::atomic<int64_t>* filled = nullptr;  // rows copied so far (null: all of them)
    int64_t rows(const Tensor& w) const {
        const int64_t groups = w.ne[1] / 4 * 4;
        if (!filled) return groups;
        const int64_t n = filled->load(std::memory_order_acquire);
        return n < groups ? n : groups;
    }
};
inline const RowGroups* row_groups(const Tensor* w) { return static_cast<const RowGroups*>(w->extra); }
// Rows of w readable from its four-row copy (0 without one).
inline int64_t four_row_rows(const Tensor* w) {
    const RowGroups* g = row_groups(w);
    return g && g->data ? g->rows(*w) : 0;
}
// Block i (in the type's own block format) of row r of the group that starts at `group`.
void four_row_block(DType weight_type, const void* group, int64_t i, int r, void* block);
// Whether isa's kernels read this layout for the type (its table has gemm_x4).
bool four_row_layout_read(DType weight_type, Isa isa);
// w's rows (2-D, contiguous) in that layout into dst (w.n_bytes() bytes), rows [r0, r1)
// of it (r0, r1 multiples of 4, or r1 the row count)
void four_row_layout(const Tensor& w, void* dst, int64_t r0, int64_t r1);

// Kernels for a weight type at the active level. Every type weight_type_supported() admits
// has them at every level (the levels fall back to scalar); asking for another is an
// internal error, never another type's kernel.
const DotKernels& dot_kernels(DType weight_type, Isa isa);
// Whether a matrix product can take weights of this type (the load-time check).
bool weight_type_supported(DType weight_type);
// nullptr when this ISA level has no specialised kernel for the type (the caller may
// then use the level below); used by the per-ISA tests.
const DotKernels* dot_kernels_exact(DType weight_type, Isa isa);

// Per-ISA tables, filled in by each ISA's source file (kernels_<isa>.cpp). An entry
// left empty falls back to the level below it.
using KernelTable = DotKernels[kDTypeCount];  // indexed by type id (core/dtype.h)
void register_scalar_kernels(KernelTable& t);
void register_avx2_kernels(KernelTable& t);
void register_avx512_kernels(KernelTable& t);
void register_neon_kernels(KernelTable& t);

// Attention's inner loops over the F16 KV cache (and the SwiGLU activation), per ISA level.
struct AttentionKernels {
    float (*dot_f32_f16)(const float* a, const uint16_t* b, int64_t n) = nullptr;
    void (*axpy_f16)(float* y, const uint16_t* x, float a, int64_t n) = nullptr;  // y += a * x
    // s[i] = exp(s[i] - max) for i < n; returns their sum
    float (*exp_sub_sum)(float* s, int64_t n, float max) = nullptr;
    // For the G query heads g < G of a group that shares one key head (q + g * qs):
    // out[g * ldo + j] = scale * dot(q + g * qs, k + j * stride) over d elements, j < nk
    // (a block of keys). A head's scores do not depend on G.
    void (*scores)(const float* q, size_t qs, int G, const uint16_t* k, size_t stride, int64_t nk, int64_t d,
                   float scale, float* out, size_t ldo) = nullptr;
    // acc + g * as += sum over j < nk of w[g * ldw + j] * (v + j * stride), d elements (a
    // block of values), for g < G; keys added in order, so the bits do not depend on G.
    void (*accumulate)(float* acc, size_t as, int G, const uint16_t* v, size_t stride, const float* w,
                       size_t ldw, int64_t nk, int64_t d) = nullptr;
    // y = silu(g) * u over n elements (the gated FFN's activation)
    void (*swiglu)(const float* g, const float* u, float* y, int64_t n) = nullptr;
    // One token of the gated delta rule on one head's state M (S x S floats, row j holding
    // column j of the state matrix): per row j, M[j] *= decay; d = beta * (v[j] - M[j].k);
    // M[j] += d k; out[j] = scale * M[j].q (recurrent.cpp: DELTA_NET).
    void (*delta_step)(float* M, const float* k, const float* q, const float* v, float decay, float beta,
                       float scale, float* out, int64_t S) = nullptr;
};
const AttentionKernels& attention_kernels(Isa isa);
void register_avx2_attention(AttentionKernels& k);  // no change when built without AVX2
// AVX2's entries replaced where 512 bits are faster, with the same bits (k holds AVX2's)
void register_avx512_attention(AttentionKernels& k);

// Shared scalar helpers.
float dot_f32(const float* a, const float* b, int64_t n);
float dot_f32_f16(const float* a, const uint16_t* b, int64_t n);
void axpy_f16(float* y, const uint16_t* x, float a, int64_t n);
float exp_sub_sum(float* s, int64_t n, float max);
void swiglu_f32(const float* g, const float* u, float* y, int64_t n);
void delta_step_f32(float* M, const float* k, const float* q, const float* v, float decay, float beta, float scale,
                    float* out, int64_t S);
void attn_scores(const float* q, size_t qs, int G, const uint16_t* k, size_t stride, int64_t nk, int64_t d,
                 float scale, float* out, size_t ldo);
void attn_accumulate(float* acc, size_t as, int G, const uint16_t* v, size_t stride, const float* w, size_t ldw,
                     int64_t nk, int64_t d);

constexpr int64_t kMulMatRowBlock = 16;  // weight rows handled together by one thread

// out[M, N] = w[K, M]^T x[K, N], x already in the kernel's activation format. Weight rows
// are split across threads: statically (next_chunk null: thread ith takes the ith share)
// or dynamically, from counters that start at 0 and are shared by the nth threads' calls,
// so a thread slowed down by the machine does less: a batch takes the next chunk of rows
// from next_chunk[0] until none are left; one column (decoding) takes thread ith's static
// share first, in claims counted in next_chunk[ith], then what the other threads have left
// of theirs (next_chunk must then hold nth counters).
// Chunks start at multiples of kMulMatRowBlock, so a row's result never depends on the
// split or the thread count.
void mul_mat(const Tensor* w, const Tensor* x, const Tensor* out, int ith, int nth, Isa isa,
             std::atomic<int64_t>* next_chunk = nullptr);
// Rows [r_begin, r_end) of out = w^T x on the calling thread, with k = dot_kernels(w's
// type); packs: the level's block tiles pack panels (AVX2, AVX-512). The products of
// mul_mat and of each expert of mul_mat_id.
void mul_mat_rows(const DotKernels& k, const Tensor* w, const Tensor* x, const Tensor* out, int64_t r_begin,
                  int64_t r_end, bool packs);

}  // namespace ember
