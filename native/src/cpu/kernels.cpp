// The CPU's matrix product over the kernel tables (rows in chunks of threads, panels for
// prefill) and the scalar helpers attention and the feed-forward use on every level.
#include "cpu/kernels.h"

#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "quant/types.h"

namespace ember {

// Eight independent accumulators: lets the compiler keep the adds in flight (and
// vectorize) without reassociating a single running sum.
float dot_f32(const float* a, const float* b, int64_t n) {
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; ++j) acc[j] += a[i + j] * b[i + j];
    float s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for (; i < n; ++i) s += a[i] * b[i];
    return s;
}

float dot_f32_f16(const float* a, const uint16_t* b, int64_t n) {
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; ++j) acc[j] += a[i + j] * fp16_to_fp32(b[i + j]);
    float s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for (; i < n; ++i) s += a[i] * fp16_to_fp32(b[i]);
    return s;
}

void axpy_f16(float* y, const uint16_t* x, float a, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] += a * fp16_to_fp32(x[i]);
}

void attn_scores(const float* q, size_t qs, int G, const uint16_t* k, size_t stride, int64_t nk, int64_t d,
                 float scale, float* out, size_t ldo) {
    for (int g = 0; g < G; ++g)
        for (int64_t j = 0; j < nk; ++j) out[g * ldo + j] = dot_f32_f16(q + g * qs, k + j * stride, d) * scale;
}

void attn_accumulate(float* acc, size_t as, int G, const uint16_t* v, size_t stride, const float* w, size_t ldw,
                     int64_t nk, int64_t d) {
    for (int g = 0; g < G; ++g)
        for (int64_t j = 0; j < nk; ++j) axpy_f16(acc + g * as, v + j * stride, w[g * ldw + j], d);
}

void swiglu_f32(const float* g, const float* u, float* y, int64_t n) {
    for (int64_t k = 0; k < n; ++k) y[k] = (g[k] / (1.0f + std::exp(-g[k]))) * u[k];
}

void delta_step_f32(float* M, const float* k, const float* q, const float* v, float decay, float beta, float scale,
                    float* out, int64_t S) {
    for (int64_t j = 0; j < S; ++j) {
        float* m = M + j * S;
        for (int64_t i = 0; i < S; ++i) m[i] *= decay;
        const float d = (v[j] - dot_f32(m, k, S)) * beta;
        for (int64_t i = 0; i < S; ++i) m[i] += d * k[i];
        out[j] = dot_f32(m, q, S) * scale;
    }
}

float exp_sub_sum(float* s, int64_t n, float max) {
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) {
        s[i] = std::exp(s[i] - max);
        sum += s[i];
    }
    return sum;
}

namespace {

// rows [r_begin, r_end) of w, whose bytes start at base (w->data, or its four-row copy for gemm_x4)
void gemm_rows(GemmFn gemm, const uint8_t* base, const Tensor* w, const Tensor* x, const Tensor* out,
               int64_t r_begin, int64_t r_end, bool packs, int64_t row_block) {
    const int64_t K = w->ne[0], N = x->ne[1];
    const size_t lds = out->nb[1] / sizeof(float);
    const size_t ws = w->nb[1];
    {
        // Also for N == 1: the tile kernels give each (row, column) the same operations
        // whatever N is, so one-token decoding and batched prefill agree bit for bit.
        // Cache blocking: the rows kMulMatRowBlock at a time against every column. The
        // block types' tiles unpack those rows into a panel (kept in L2) once per call and
        // stream the activation columns past it (from L3 at worst: a batch of 512 columns
        // of 8192 Q8 values is 4.5 MB); the tile kernel reuses each loaded block across
        // its register tile. Each weight row is read from memory once per product. (With
        // chunks of 60 columns every row was read, and unpacked, once per chunk.)
        // 60-column chunks remain where rows are not unpacked: the float types, and the
        // levels whose tiles walk the columns row by row (NEON, scalar), which want the
        // chunk's activations in L2 across rows.
        const bool blocks = w->type != DType::F32 && w->type != DType::F16 && w->type != DType::BF16;
        const int64_t kColChunk = packs && blocks ? N : 60;
        if (N == 1) {
            // Decoding reuses nothing across rows: one call for the whole range, so any
            // per-call set-up (widening the activation row) happens once.
            gemm(K, (int)(r_end - r_begin), 1, base + (size_t)r_begin * ws, ws, x->row(0), x->nb[1],
                 out->row<float>(0) + r_begin, lds);
            return;
        }
        for (int64_t c0 = 0; c0 < N; c0 += kColChunk) {
            const int nc = (int)(N - c0 < kColChunk ? N - c0 : kColChunk);
            for (int64_t r0 = r_begin; r0 < r_end; r0 += row_block) {
                const int nr = (int)(r_end - r0 < row_block ? r_end - r0 : row_block);
                gemm(K, nr, nc, base + (size_t)r0 * ws, ws, x->row(c0), x->nb[1], out->row<float>(c0) + r0, lds);
            }
        }
    }
}

}  // namespace

void mul_mat_rows(const DotKernels& k, const Tensor* w, const Tensor* x, const Tensor* out, int64_t r_begin,
                  int64_t r_end, bool packs) {
    const int64_t K = w->ne[0], N = x->ne[1];
    const int64_t row_block = N > 1 && k.batch_rows ? k.batch_rows() : kMulMatRowBlock;
    const RowGroups* groups = row_groups(w);
    if (k.gemm && groups && groups->data && k.gemm_x4) {
        // the groups filled in the four-row layout, the rows after them as they are
        const int64_t full = groups->rows(*w);
        if (r_begin < full) {
            const int64_t mid = r_end < full ? r_end : full;
            gemm_rows(k.gemm_x4, static_cast<const uint8_t*>(groups->data), w, x, out, r_begin, mid, packs, row_block);
            r_begin = mid;
        }
        if (r_begin >= r_end) return;
    }
    if (k.gemm) {
        gemm_rows(k.gemm, static_cast<const uint8_t*>(w->data), w, x, out, r_begin, r_end, packs, row_block);
        return;
    }
    for (int64_t r0 = r_begin; r0 < r_end; r0 += kMulMatRowBlock) {
        const int64_t r1 = r0 + kMulMatRowBlock < r_end ? r0 + kMulMatRowBlock : r_end;
        for (int64_t c = 0; c < N; ++c) {
            const void* a = x->row(c);
            float* o = out->row<float>(c);
            for (int64_t r = r0; r < r1; ++r) k.vec_dot(K, o + r, w->row(r), a);
        }
    }
}

void mul_mat(const Tensor* w, const Tensor* x, const Tensor* out, int ith, int nth, Isa isa,
             std::atomic<int64_t>* next_chunk) {
    const int64_t M = w->ne[1];
    const DotKernels& k = dot_kernels(w->type, isa);
    const bool packs = isa == Isa::AVX2 || isa == Isa::AVX512;  // block tiles that pack panels
    const int64_t blocks = (M + kMulMatRowBlock - 1) / kMulMatRowBlock;
    if (next_chunk && nth > 1) {
        if (x->ne[1] == 1) {
            // Decoding streams the weights from memory: each thread starts on its own
            // contiguous share (the static split's, counter next_chunk[ith]), taking it in
            // claims of half of what is left of it, so that a thread slowed down by the
            // machine leaves a tail the others take in small claims (counter of the share
            // they take from). An uncontested share is one run of addresses, its software
            // prefetches crossing from claim to claim; guided claims from one counter
            // (each a share of what was left of the whole matrix, the threads' claims
            // interleaved) restarted every thread's stream a dozen times per product:
            // 0.5-1.5% slower (1B Q4_0 and Q6_K, two threads, in-process alternation).
            const int64_t per = (blocks + nth - 1) / nth, least = 4;  // 4 blocks: 64 rows
            for (int j = 0; j < nth; ++j) {
                const int t = (ith + j) % nth;
                const int64_t s0 = per * t, s1 = s0 + per < blocks ? s0 + per : blocks;
                std::atomic<int64_t>& claimed = next_chunk[t];
                int64_t b = claimed.load(std::memory_order_relaxed);
                while (s0 + b < s1) {
                    const int64_t left = s1 - s0 - b;
                    int64_t take = j == 0 ? (left + 1) / 2 : least;
                    if (take < least) take = least;
                    if (take > left) take = left;
                    if (!claimed.compare_exchange_weak(b, b + take, std::memory_order_relaxed)) continue;
                    const int64_t r0 = (s0 + b) * kMulMatRowBlock;
                    const int64_t r1 = (s0 + b + take) * kMulMatRowBlock < M ? (s0 + b + take) * kMulMatRowBlock : M;
                    mul_mat_rows(k, w, x, out, r0, r1, packs);
                    b = claimed.load(std::memory_order_relaxed);
                }
            }
            return;
        }
        const int64_t per_thread = 8;  // about eight chunks per thread for prefill
        int64_t per = blocks / (per_thread * (int64_t)nth);
        if (per < 1) per = 1;
        for (;;) {
            const int64_t b = next_chunk->fetch_add(per, std::memory_order_relaxed);
            if (b >= blocks) return;
            const int64_t r0 = b * kMulMatRowBlock;
            const int64_t r1 = (b + per) * kMulMatRowBlock < M ? (b + per) * kMulMatRowBlock : M;
            mul_mat_rows(k, w, x, out, r0, r1, packs);
        }
    }
    // rows split across threads in whole blocks of kMulMatRowBlock
    const int64_t per = (blocks + nth - 1) / nth;
    const int64_t r_begin = per * ith * kMulMatRowBlock;
    const int64_t r_end = r_begin + per * kMulMatRowBlock < M ? r_begin + per * kMulMatRowBlock : M;
    if (r_begin >= r_end) return;
    mul_mat_rows(k, w, x, out, r_begin, r_end, packs);
}

}  // namespace ember
