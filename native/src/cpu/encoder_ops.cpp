// The CPU's encoder ops (core/tensor.h: LAYER_NORM, GELU, ATTENTION_BIDIR): what BERT-style
// embedding models need beyond the decoder families' ops. The encoder runs each batch once
// over short texts, so these are plain loops written for the compiler to vectorise, not
// hand-tuned kernels; the matrix products around them take nearly all the time.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>

#include "core/thread_state.h"
#include "cpu/kernels.h"
#include "cpu/ops.h"

namespace ember {

namespace {

// Row i of a tensor counted over dimensions 1..3, whatever its strides.
template <typename T>
T* row_of(const Tensor* t, int64_t i) {
    const int64_t i1 = i % t->ne[1], rest = i / t->ne[1];
    return t->row<T>(i1, rest % t->ne[2], rest / t->ne[2]);
}

#if defined(__GNUC__) || defined(__clang__)
#define EMBER_INLINE __attribute__((always_inline)) inline
#else
#define EMBER_INLINE inline
#endif

// y += a * x (restrict: the loops vectorise without alias checks)
EMBER_INLINE void madd(float* __restrict y, const float* __restrict x, float a, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

// s *= scale, and the largest of the results (eight running maxima: one vector register)
EMBER_INLINE float scale_max(float* __restrict s, int64_t n, float scale) {
    float m[8] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; ++l) {
            s[i + l] *= scale;
            m[l] = s[i + l] > m[l] ? s[i + l] : m[l];
        }
    for (; i < n; ++i) {
        s[i] *= scale;
        m[0] = s[i] > m[0] ? s[i] : m[0];
    }
    for (int l = 1; l < 8; ++l) m[0] = m[l] > m[0] ? m[l] : m[0];
    return m[0];
}

}  // namespace

void op_layer_norm(const Tensor* t, int ith, int nth) {
    const Tensor* x = t->src[0];
    const float* w = t->src[1] ? static_cast<const float*>(t->src[1]->data) : nullptr;
    const float* b = t->src[2] ? static_cast<const float*>(t->src[2]->data) : nullptr;
    const float eps = t->fparams[0];
    const int64_t n = x->ne[0];
    const Range r = split(x->n_rows(), ith, nth);
    for (int64_t i = r.begin; i < r.end; ++i) {
        const float* xi = row_of<const float>(x, i);
        float* yi = row_of<float>(t, i);
        // mean and variance in double (two passes, as ggml's norm: no cancellation when
        // the mean is large against the spread)
        double sum = 0.0;
        for (int64_t k = 0; k < n; ++k) sum += xi[k];
        const float mean = (float)(sum / (double)n);
        double sum2 = 0.0;
        for (int64_t k = 0; k < n; ++k) {
            const float d = xi[k] - mean;
            sum2 += (double)d * (double)d;
        }
        const float scale = 1.0f / std::sqrt((float)(sum2 / (double)n) + eps);
        for (int64_t k = 0; k < n; ++k) {
            float y = (xi[k] - mean) * scale;
            if (w) y *= w[k];
            if (b) y += b[k];
            yi[k] = y;
        }
    }
}

void op_gelu(const Tensor* t, int ith, int nth) {
    const Tensor* x = t->src[0];
    const int64_t n = x->ne[0];
    constexpr float kInvSqrt2 = 0.70710678118654752440f;
    const Range r = split(x->n_rows(), ith, nth);
    for (int64_t i = r.begin; i < r.end; ++i) {
        const float* xi = row_of<const float>(x, i);
        float* yi = row_of<float>(t, i);
        for (int64_t k = 0; k < n; ++k) yi[k] = 0.5f * xi[k] * (1.0f + std::erf(xi[k] * kInvSqrt2));
    }
}

namespace {

// One head of one sequence [begin, end): its keys transposed once into kt ([head_dim, n]),
// so each query's scores are head_dim passes of a multiply-add along the keys (vectors
// across keys, no horizontal sums), then the softmax and the weighted sum of the values.
// Every loop is elementwise with one chain per score or output element, so the SSE2 and
// AVX2 builds of this function (below) give the same bits; exp_sub_sum is the level's own.
EMBER_INLINE void attend_sequence_head(const Tensor* t, const Tensor* q, const Tensor* k, const Tensor* v, int64_t begin,
                                 int64_t end, int64_t h, int64_t hk, float scale, float* kt, float* score,
                                 float (*exp_sub_sum)(float*, int64_t, float)) {
    const int64_t head_dim = q->ne[0], n = end - begin;
    for (int64_t s = 0; s < n; ++s) {
        const float* ks = k->row<const float>(hk, begin + s);
        for (int64_t d = 0; d < head_dim; ++d) kt[d * n + s] = ks[d];
    }
    for (int64_t j = begin; j < end; ++j) {
        const float* qi = q->row<const float>(h, j);
        for (int64_t s = 0; s < n; ++s) score[s] = 0.0f;
        for (int64_t d = 0; d < head_dim; ++d) madd(score, kt + d * n, qi[d], n);
        const float max = scale_max(score, n, scale);
        const float inv = 1.0f / exp_sub_sum(score, n, max);
        float* out = reinterpret_cast<float*>(static_cast<uint8_t*>(t->data) + j * t->nb[1]) + h * head_dim;
        for (int64_t d = 0; d < head_dim; ++d) out[d] = 0.0f;
        for (int64_t s = 0; s < n; ++s) madd(out, v->row<const float>(hk, begin + s), score[s], head_dim);
        for (int64_t d = 0; d < head_dim; ++d) out[d] *= inv;
    }
}

EMBER_INLINE void attention_bidir_heads(const Tensor* t, ComputeParams& p) {
    const Tensor* q = t->src[0];
    const Tensor* k = t->src[1];
    const Tensor* v = t->src[2];
    const int32_t* pos = static_cast<const int32_t*>(t->src[3]->data);
    const float scale = t->fparams[0];
    const int64_t head_dim = q->ne[0], n_head = q->ne[1], n_tok = q->ne[2];
    const int64_t group = n_head / k->ne[1];
    const auto exp_sub_sum = attention_kernels(p.isa).exp_sub_sum;
    // the sequences' starts (positions restart at 0 at each), the batch's end after them
    struct StartsSite;
    int64_t* starts = thread_scratch<int64_t, StartsSite>((size_t)n_tok + 1);
    int64_t n_seq = 0, longest = 0;
    for (int64_t j = 0; j < n_tok; ++j)
        if (j == 0 || pos[j] == 0) starts[n_seq++] = j;
    starts[n_seq] = n_tok;
    for (int64_t i = 0; i < n_seq; ++i) longest = std::max(longest, starts[i + 1] - starts[i]);
    struct Site;
    float* kt = thread_scratch<float, Site>((size_t)(head_dim + 1) * (size_t)longest + 16);
    float* score = kt + (size_t)head_dim * (size_t)longest + 8;
    // work items are (sequence, head) pairs, taken from the node's counter so a thread the
    // machine slows down does fewer; a token's bits do not depend on who computes it. (No
    // lambda: its body would not be built for the AVX2 caller's target.)
    const int64_t items = n_seq * n_head;
    const Range r = p.next_chunk ? Range{0, 0} : split(items, p.ith, p.nth);
    for (int64_t i = r.begin;;) {
        const int64_t it = p.next_chunk ? p.next_chunk->fetch_add(1, std::memory_order_relaxed) : i++;
        if (it >= (p.next_chunk ? items : r.end)) break;
        const int64_t seq = it / n_head, h = it % n_head;
        attend_sequence_head(t, q, k, v, starts[seq], starts[seq + 1], h, h / group, scale, kt, score, exp_sub_sum);
    }
}

#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
#define EMBER_ENCODER_AVX2 1
// The same loops in 256-bit registers where the CPU has them (this file is built for the
// baseline ISA; the kernels' files are the ones built per level)
__attribute__((target("avx2"))) void attention_bidir_avx2(const Tensor* t, ComputeParams& p) {
    attention_bidir_heads(t, p);
}
#endif

}  // namespace

void op_attention_bidir(const Tensor* t, ComputeParams& p) {
#ifdef EMBER_ENCODER_AVX2
    if (p.isa == Isa::AVX2 || p.isa == Isa::AVX512) {
        attention_bidir_avx2(t, p);
        return;
    }
#endif
    attention_bidir_heads(t, p);
}

}  // namespace ember
