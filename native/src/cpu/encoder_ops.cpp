// The CPU's encoder ops (core/tensor.h: LAYER_NORM, GELU, ATTENTION_BIDIR): what BERT-style
// embedding models need beyond the decoder families' ops. The encoder runs each batch once
// over short texts, so these are plain loops written for the compiler to vectorise, not
// hand-tuned kernels; the matrix products around them take nearly all the time.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>

#include "core/thread_state.h"
#include "cpu/ops.h"

namespace ember {

namespace {

// Row i of a tensor counted over dimensions 1..3, whatever its strides.
template <typename T>
T* row_of(const Tensor* t, int64_t i) {
    const int64_t i1 = i % t->ne[1], rest = i / t->ne[1];
    return t->row<T>(i1, rest % t->ne[2], rest / t->ne[2]);
}

// Eight partial sums, so the compiler can keep them in one vector register without
// reordering a single chain (the build has no -ffast-math).
inline float dot(const float* a, const float* b, int64_t n) {
    float acc[8] = {};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; ++l) acc[l] += a[i + l] * b[i + l];
    for (int l = 0; i < n; ++i, ++l) acc[l & 7] += a[i] * b[i];
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
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

void op_attention_bidir(const Tensor* t, ComputeParams& p) {
    const Tensor* q = t->src[0];
    const Tensor* k = t->src[1];
    const Tensor* v = t->src[2];
    const int32_t* pos = static_cast<const int32_t*>(t->src[3]->data);
    const float scale = t->fparams[0];
    const int64_t head_dim = q->ne[0], n_head = q->ne[1], n_tok = q->ne[2];
    const int64_t group = n_head / k->ne[1];
    // Each token's sequence is [j - pos[j], end): the batch holds whole sequences, each
    // starting at position 0, so it ends where the next one starts (or at the batch's end).
    auto sequence_end = [&](int64_t j) {
        int64_t e = j + 1;
        while (e < n_tok && pos[e] != 0) ++e;
        return e;
    };
    struct Site;
    float* score = thread_scratch<float, Site>((size_t)n_tok);
    int64_t cached_tok = -1, begin = 0, end = 0;
    auto one = [&](int64_t item) {
        const int64_t j = item / n_head, h = item % n_head, hk = h / group;
        if (j != cached_tok) {
            cached_tok = j;
            begin = j - pos[j];
            end = sequence_end(j);
        }
        const float* qi = q->row<const float>(h, j);
        float max = -INFINITY;
        for (int64_t s = begin; s < end; ++s) {
            score[s - begin] = dot(qi, k->row<const float>(hk, s), head_dim) * scale;
            max = std::max(max, score[s - begin]);
        }
        double sum = 0.0;
        for (int64_t s = 0; s < end - begin; ++s) {
            score[s] = std::exp(score[s] - max);
            sum += score[s];
        }
        const float inv = (float)(1.0 / sum);
        float* out = reinterpret_cast<float*>(static_cast<uint8_t*>(t->data) + j * t->nb[1]) + h * head_dim;
        for (int64_t d = 0; d < head_dim; ++d) out[d] = 0.0f;
        for (int64_t s = begin; s < end; ++s) {
            const float* vs = v->row<const float>(hk, s);
            const float w = score[s - begin];
            for (int64_t d = 0; d < head_dim; ++d) out[d] += w * vs[d];
        }
        for (int64_t d = 0; d < head_dim; ++d) out[d] *= inv;
    };
    const int64_t items = n_tok * n_head;
    if (p.next_chunk) {
        // chunks of a token's heads, so a thread slowed by the machine does less of it
        for (int64_t c; (c = p.next_chunk->fetch_add(1, std::memory_order_relaxed)) < n_tok;)
            for (int64_t h = 0; h < n_head; ++h) one(c * n_head + h);
    } else {
        const Range r = split(items, p.ith, p.nth);
        for (int64_t it = r.begin; it < r.end; ++it) one(it);
    }
}

}  // namespace ember
