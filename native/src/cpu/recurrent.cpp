// The CPU's recurrent-layer ops (core/tensor.h: SSM_CONV, GDN_GATES, DELTA_NET): Qwen3.5's
// gated delta-net layers. Each follows the float operations of llama.cpp's CPU ops
// (ggml_ssm_conv, softplus / sigmoid, the l2 norm as rms_norm(eps / n) * 1/sqrt(n), the
// gated delta rule), so that the same inputs give the same numbers up to the order of a
// dot product's sums.
//
// Both stateful ops split their work so that each thread owns whole channels (the
// convolution) or whole heads (the delta rule): a thread reads and overwrites only its own
// part of the state, so the in-place update needs no barrier inside the op.
//
// The delta rule runs token by token, for a batch as for one token. Its state (S x S
// floats per head: 64 KiB at S = 128) stays in the core's L2 over a batch, and one
// token costs about 4 S^2 flops per head: on Qwen3.5-4B's shape that is 1-2% of a
// prefill's products, so the chunked form a GPU needs (a triangular solve per chunk of
// 64 tokens) buys the CPU nothing.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/fp16.h"
#include "core/thread_state.h"
#include "cpu/ops.h"

namespace ember {

void op_ssm_conv(const Tensor* t, int ith, int nth) {
    const Tensor* x = t->src[0];
    const Tensor* w = t->src[1];
    float* state = static_cast<float*>(t->src[2]->data);
    const bool silu = t->iparams[0] == 1;
    const int64_t C = x->ne[0], N = x->ne[1], K = w->ne[0];
    const Range r = split(C, ith, nth);
    if (r.begin >= r.end) return;
    const int64_t n_c = r.end - r.begin;
    // this thread's kernel rows as floats, [c][K]
    struct SiteW;
    float* wk = thread_scratch<float, SiteW>((size_t)(n_c * K));
    for (int64_t c = r.begin; c < r.end; ++c) {
        float* dst = wk + (c - r.begin) * K;
        if (w->type == DType::F32) {
            std::memcpy(dst, w->row<float>(c), (size_t)K * sizeof(float));
        } else {
            const uint16_t* src = w->row<uint16_t>(c);
            for (int64_t i = 0; i < K; ++i) dst[i] = fp16_to_fp32(src[i]);
        }
    }
    // The input at time p of the batch (p < 0: the state's, before the batch) of channel c.
    auto in = [&](int64_t c, int64_t p) -> float {
        return p >= 0 ? x->row<float>(p)[c] : state[c * (K - 1) + (K - 1) + p];
    };
    for (int64_t tk = 0; tk < N; ++tk) {
        float* out = t->row<float>(tk);
        for (int64_t c = r.begin; c < r.end; ++c) {
            const float* wc = wk + (c - r.begin) * K;
            float sum = 0.0f;  // in time order, as ggml_ssm_conv sums
            for (int64_t i = 0; i < K; ++i) sum += in(c, tk - (K - 1) + i) * wc[i];
            out[c] = silu ? sum / (1.0f + std::exp(-sum)) : sum;
        }
    }
    // the last K - 1 inputs become the state (those of the old state first, when the batch
    // is shorter than the window)
    struct SiteS;
    float* keep = thread_scratch<float, SiteS>((size_t)(K - 1));
    for (int64_t c = r.begin; c < r.end; ++c) {
        for (int64_t j = 0; j < K - 1; ++j) keep[j] = in(c, N - (K - 1) + j);
        std::memcpy(state + c * (K - 1), keep, (size_t)(K - 1) * sizeof(float));
    }
}

void op_gdn_gates(const Tensor* t, int ith, int nth) {
    const Tensor* alpha = t->src[0];
    const Tensor* beta = t->src[1];
    const float* dt = static_cast<const float*>(t->src[2]->data);
    const float* a = static_cast<const float*>(t->src[3]->data);
    const int64_t H = alpha->ne[0], N = alpha->ne[1];
    const Range r = split(N, ith, nth);
    for (int64_t tk = r.begin; tk < r.end; ++tk) {
        const float* al = alpha->row<float>(tk);
        const float* be = beta->row<float>(tk);
        for (int64_t h = 0; h < H; ++h) {
            const float x = al[h] + dt[h];
            const float softplus = x > 20.0f ? x : std::log(1.0f + std::exp(x));
            float* out = t->row<float>(h, tk);
            out[0] = softplus * a[h];
            out[1] = 1.0f / (1.0f + std::exp(-be[h]));
        }
    }
}

namespace {

// llama.cpp's l2 norm of a q or k row: rms_norm with eps / n, then times 1/sqrt(n)
void l2_norm_row(const float* x, float* y, int64_t n, float eps) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += (double)(x[i] * x[i]);
    const float mean = (float)(sum / (double)n);
    const float scale = 1.0f / std::sqrt(mean + eps / (float)n);
    const float tail = 1.0f / std::sqrt((float)n);
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] * scale) * tail;
}

}  // namespace

void op_delta_net(const Tensor* t, ComputeParams& p) {
    const Tensor* q = t->src[0];
    const Tensor* k = t->src[1];
    const Tensor* v = t->src[2];
    const Tensor* gates = t->src[3];
    float* state = static_cast<float*>(t->src[4]->data);
    const bool l2 = t->iparams[0] == 1;
    const float eps = t->fparams[0];
    const int64_t S = v->ne[0], H = v->ne[1], N = v->ne[2], Hk = q->ne[1];
    const float scale = 1.0f / std::sqrt((float)S);
    const auto step = attention_kernels(p.isa).delta_step;
    struct Site;
    float* qk = thread_scratch<float, Site>((size_t)(2 * S));
    const Range r = split(H, p.ith, p.nth);
    for (int64_t h = r.begin; h < r.end; ++h) {
        float* M = state + h * S * S;
        const int64_t hk = h % Hk;
        for (int64_t tk = 0; tk < N; ++tk) {
            const float* qr = q->row<float>(hk, tk);
            const float* kr = k->row<float>(hk, tk);
            if (l2) {
                l2_norm_row(qr, qk, S, eps);
                l2_norm_row(kr, qk + S, S, eps);
                qr = qk;
                kr = qk + S;
            }
            const float* g = gates->row<float>(h, tk);
            step(M, kr, qr, v->row<float>(h, tk), std::exp(g[0]), g[1], scale, t->row<float>(h, tk), S);
        }
    }
}

}  // namespace ember
