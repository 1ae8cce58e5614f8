// The CPU's mixture-of-experts ops (core/tensor.h: MOE_ROUTE, MOE_WEIGHTS, MUL_MAT_ID,
// MOE_SUM). The router follows llama.cpp's build_moe_ffn step by step (softmax with the
// exponentials summed in double and scaled by the reciprocal, the top k by value, the
// normalisation's sum clamped at F16's smallest normal), so the same experts are chosen
// as the reference chooses. The indexed product groups each expert's (token, slot) pairs
// together and multiplies them by that expert's rows with the dense product's own
// kernels (mul_mat_rows): decoding reads only the k chosen experts, and a batch streams
// each chosen expert's weights once.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/thread_state.h"
#include "cpu/ops.h"
#include "quant/types.h"

namespace ember {

namespace {

// The router's per-expert score before the choice: a softmax over the row, a sigmoid,
// or (SOFTMAX_WEIGHT) the logits themselves.
void gate_scores(const float* logits, int64_t n, ExpertGating gating, float* out) {
    if (gating == ExpertGating::SOFTMAX) {
        float max = -INFINITY;
        for (int64_t i = 0; i < n; ++i) max = std::max(max, logits[i]);
        double sum = 0.0;
        for (int64_t i = 0; i < n; ++i) {
            out[i] = std::exp(logits[i] - max);
            sum += (double)out[i];
        }
        const float inv = (float)(1.0 / sum);
        for (int64_t i = 0; i < n; ++i) out[i] *= inv;
    } else if (gating == ExpertGating::SIGMOID) {
        for (int64_t i = 0; i < n; ++i) out[i] = 1.0f / (1.0f + std::exp(-logits[i]));
    } else {
        std::memcpy(out, logits, (size_t)n * sizeof(float));
    }
}

// Larger first, then the lower index; NaN below everything, so the order stays strict.
bool before(float a, int32_t ia, float b, int32_t ib) {
    const bool na = std::isnan(a), nb = std::isnan(b);
    if (na != nb) return nb;
    if (!na && a != b) return a > b;
    return ia < ib;
}

constexpr float kMinWeightSum = 6.103515625e-5f;  // F16's smallest normal, as llama.cpp clamps
constexpr int64_t kIdRows = 64;                    // weight rows per work item of a batch's mul_mat_id

// Weight rows per work item. A batch: kIdRows against all of the expert's tokens (the rows
// stay in cache across them). Decoding reuses nothing, and each item restarts the kernel's
// streams and widens the activation again: items as large as keep about four per thread
// (claimed dynamically, so a thread the machine slows down takes fewer), whole experts
// when they are few. (64-row items decoded Qwen3-30B-A3B's experts at 5.6 GB/s on one
// thread, where a dense product of the same type reads 14 GB/s.)
int64_t id_rows(int64_t M, int64_t k, int64_t N, int nth) {
    if (N > 1) return kIdRows;
    const int64_t want = (M * k + 4 * nth - 1) / (4 * nth);
    const int64_t rows = (want + kIdRows - 1) / kIdRows * kIdRows;
    return rows < M ? rows : M;
}

// The (token, slot) pairs of a batch grouped by expert: expert e's pairs are
// order[start[e] .. start[e + 1]), each as slot + k * token, in token order. In the
// calling thread's scratch (core/thread_state.h): every thread builds the same grouping.
struct ExpertGroups {
    int64_t* start;
    int32_t* order;

    ExpertGroups(const Tensor* ids, int64_t n_expert) {
        struct StartSite {};
        struct FillSite {};
        struct OrderSite {};
        const int64_t k = ids->ne[0], N = ids->ne[1];
        start = thread_scratch<int64_t, StartSite>((size_t)n_expert + 1);
        int64_t* fill = thread_scratch<int64_t, FillSite>((size_t)n_expert);
        order = thread_scratch<int32_t, OrderSite>((size_t)(k * N));
        for (int64_t e = 0; e <= n_expert; ++e) start[e] = 0;
        for (int64_t t = 0; t < N; ++t)
            for (int64_t j = 0; j < k; ++j) {
                const int32_t e = ids->row<const int32_t>(t)[j];
                if (e >= 0 && e < n_expert) ++start[e + 1];
            }
        for (int64_t e = 0; e < n_expert; ++e) start[e + 1] += start[e];
        for (int64_t e = 0; e < n_expert; ++e) fill[e] = start[e];
        for (int64_t t = 0; t < N; ++t)
            for (int64_t j = 0; j < k; ++j) {
                const int32_t e = ids->row<const int32_t>(t)[j];
                if (e >= 0 && e < n_expert) order[fill[e]++] = (int32_t)(j + k * t);
            }
    }
    int64_t count(int64_t e) const { return start[e + 1] - start[e]; }
};

size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

// The layout of mul_mat_id's work buffer: the activations in expert order (one region per
// thread when decoding, each thread converting the k rows itself; one shared region for
// a batch), then each thread's block of product rows before they are scattered.
struct IdWork {
    size_t act_row, act_region, out_block;
    int64_t rows;  // weight rows per work item
    bool shared;

    IdWork(const Tensor* t, Isa isa, int n_threads) {
        const Tensor* w = t->src[0];
        const DotKernels& k = dot_kernels(w->type, isa);
        act_row = k.act_type == DType::F32 ? (size_t)w->ne[0] * sizeof(float)
                                           : (size_t)row_bytes(*type_traits((uint32_t)k.act_type), w->ne[0]);
        const int64_t pairs = t->src[2]->ne[0] * t->src[2]->ne[1];
        shared = t->src[2]->ne[1] > 1;
        act_region = align64(act_row * (size_t)pairs);
        rows = id_rows(w->ne[1], t->src[2]->ne[0], t->src[2]->ne[1], n_threads);
        out_block = align64((size_t)rows * (size_t)t->src[2]->ne[1] * sizeof(float));
    }
    size_t bytes(int n_threads) const {
        return (shared ? act_region : act_region * (size_t)n_threads) + out_block * (size_t)n_threads;
    }
    uint8_t* act(uint8_t* work, int ith) const { return work + (shared ? 0 : act_region * (size_t)ith); }
    float* out(uint8_t* work, int ith, int n_threads) const {
        return reinterpret_cast<float*>(work + (shared ? act_region : act_region * (size_t)n_threads) +
                                        out_block * (size_t)ith);
    }
};

}  // namespace

void op_moe_route(const Tensor* t, int ith, int nth) {
    const Tensor* logits = t->src[0];
    const Tensor* bias = t->src[1];
    const int64_t n = logits->ne[0], k = t->ne[0];
    const ExpertGating gating = (ExpertGating)t->iparams[1];
    struct ScoreSite {};
    struct IndexSite {};
    float* scores = thread_scratch<float, ScoreSite>((size_t)n);
    int32_t* idx = thread_scratch<int32_t, IndexSite>((size_t)n);
    const Range r = split(logits->ne[1], ith, nth);
    for (int64_t tok = r.begin; tok < r.end; ++tok) {
        gate_scores(logits->row<const float>(tok), n, gating, scores);
        if (bias)
            for (int64_t e = 0; e < n; ++e) scores[e] += bias->row<const float>(0)[e];
        for (int64_t e = 0; e < n; ++e) idx[e] = (int32_t)e;
        std::partial_sort(idx, idx + k, idx + n,
                          [&](int32_t a, int32_t b) { return before(scores[a], a, scores[b], b); });
        std::memcpy(t->row<int32_t>(tok), idx, (size_t)k * sizeof(int32_t));
    }
}

void op_moe_weights(const Tensor* t, int ith, int nth) {
    const Tensor* logits = t->src[0];
    const Tensor* ids = t->src[1];
    const int64_t n = logits->ne[0], k = t->ne[0];
    const ExpertGating gating = (ExpertGating)t->iparams[1];
    const bool normalise = t->iparams[2] != 0;
    const float scale = t->fparams[0];
    const float* per_expert = t->src[2] ? static_cast<const float*>(t->src[2]->data) : nullptr;
    struct ScoreSite {};
    float* scores = thread_scratch<float, ScoreSite>((size_t)n);
    const Range r = split(logits->ne[1], ith, nth);
    for (int64_t tok = r.begin; tok < r.end; ++tok) {
        gate_scores(logits->row<const float>(tok), n, gating, scores);
        const int32_t* id = ids->row<const int32_t>(tok);
        float* w = t->row<float>(tok);
        for (int64_t j = 0; j < k; ++j) w[j] = id[j] >= 0 && id[j] < n ? scores[id[j]] : 0.0f;
        if (gating == ExpertGating::SOFTMAX_WEIGHT) gate_scores(w, k, ExpertGating::SOFTMAX, w);
        if (normalise) {
            double sum = 0.0;
            for (int64_t j = 0; j < k; ++j) sum += (double)w[j];
            const float s = std::max((float)sum, kMinWeightSum);
            for (int64_t j = 0; j < k; ++j) w[j] = w[j] / s;
        }
        if (scale != 0.0f && scale != 1.0f)
            for (int64_t j = 0; j < k; ++j) w[j] *= scale;
        if (per_expert)
            for (int64_t j = 0; j < k; ++j) w[j] *= id[j] >= 0 && id[j] < n ? per_expert[id[j]] : 0.0f;
    }
}

void op_mul_mat_id(const Tensor* t, ComputeParams& p) {
    const Tensor* w = t->src[0];
    const Tensor* x = t->src[1];
    const Tensor* ids = t->src[2];
    const Tensor* bias = t->src[3];
    const int64_t K = w->ne[0], M = w->ne[1], E = w->ne[2], k = ids->ne[0], N = ids->ne[1];
    const DotKernels& kern = dot_kernels(w->type, p.isa);
    const IdWork lay(t, p.isa, p.nth);
    const ExpertGroups g(ids, E);
    p.converted = nullptr;  // the work buffer is overwritten

    // the activations of every (token, slot) pair, in expert order, in the kernel's format
    uint8_t* act = lay.act(p.work, p.ith);
    auto convert = [&](int64_t pos) {
        const int32_t pair = g.order[pos];
        const int64_t j = pair % k, tok = pair / k;
        const float* src = x->row<const float>(x->ne[1] == 1 ? 0 : j, tok);
        uint8_t* dst = act + (size_t)pos * lay.act_row;
        if (kern.act_type == DType::F32) std::memcpy(dst, src, (size_t)K * sizeof(float));
        else kern.convert(src, dst, K);
    };
    const int64_t pairs = g.start[E];
    if (lay.shared) {
        const Range r = split(pairs, p.ith, p.nth);
        for (int64_t pos = r.begin; pos < r.end; ++pos) convert(pos);
        if (p.pool && p.nth > 1) p.pool->barrier();
    } else {
        for (int64_t pos = 0; pos < pairs; ++pos) convert(pos);
    }

    // work items: lay.rows rows of one expert against all of that expert's pairs
    const int64_t chunks = (M + lay.rows - 1) / lay.rows;
    int64_t items = 0;
    for (int64_t e = 0; e < E; ++e) items += g.count(e) ? chunks : 0;
    const bool packs = p.isa == Isa::AVX2 || p.isa == Isa::AVX512;
    float* out_block = lay.out(p.work, p.ith, p.nth);
    int64_t e = 0, before_e = 0;  // the expert of the last item, and the items before its first
    auto run = [&](int64_t item) {
        if (item < before_e) e = 0, before_e = 0;
        for (;; ++e) {
            const int64_t n_items = g.count(e) ? chunks : 0;
            if (item < before_e + n_items) break;
            before_e += n_items;
        }
        const int64_t r0 = (item - before_e) * lay.rows, nr = std::min(lay.rows, M - r0);
        const int64_t n_e = g.count(e), first = g.start[e];
        const Tensor rows = tensor_2d(w->type, K, nr, static_cast<uint8_t*>(w->data) + (size_t)e * w->nb[2] +
                                                          (size_t)r0 * w->nb[1]);
        Tensor xa = tensor_2d(kern.act_type, K, n_e, act + (size_t)first * lay.act_row);
        xa.nb[1] = lay.act_row;
        const Tensor out = tensor_2d(DType::F32, nr, n_e, out_block);
        mul_mat_rows(kern, &rows, &xa, &out, 0, nr, packs);
        const float* b = bias ? bias->row<const float>(e) + r0 : nullptr;
        for (int64_t c = 0; c < n_e; ++c) {
            const int32_t pair = g.order[first + c];
            float* dst = t->row<float>(pair % k, pair / k) + r0;
            const float* src = out_block + c * nr;
            if (b) for (int64_t i = 0; i < nr; ++i) dst[i] = src[i] + b[i];
            else std::memcpy(dst, src, (size_t)nr * sizeof(float));
        }
    };
    if (p.next_chunk && p.nth > 1) {
        for (int64_t it; (it = p.next_chunk->fetch_add(1, std::memory_order_relaxed)) < items;) run(it);
    } else {
        const Range r = split(items, p.ith, p.nth);
        for (int64_t it = r.begin; it < r.end; ++it) run(it);
    }
    (void)N;
}

void op_moe_sum(const Tensor* t, int ith, int nth) {
    const Tensor* y = t->src[0];
    const Tensor* w = t->src[1];
    const int64_t M = y->ne[0], k = y->ne[1];
    const Range r = split(y->ne[2], ith, nth);
    for (int64_t tok = r.begin; tok < r.end; ++tok) {
        const float* wt = w->row<const float>(tok);
        float* o = t->row<float>(tok);
        const float* y0 = y->row<const float>(0, tok);
        for (int64_t i = 0; i < M; ++i) o[i] = y0[i] * wt[0];
        for (int64_t j = 1; j < k; ++j) {
            const float* yj = y->row<const float>(j, tok);
            const float wj = wt[j];
            for (int64_t i = 0; i < M; ++i) o[i] = o[i] + yj[i] * wj;
        }
    }
}

size_t mul_mat_id_work_size(const Tensor* t, Isa isa, int n_threads) {
    return IdWork(t, isa, n_threads).bytes(n_threads);
}

}  // namespace ember
