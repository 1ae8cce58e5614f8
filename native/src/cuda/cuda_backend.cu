// The CUDA backend (libember-cuda.so / ember-cuda.dll): Ember's own kernels, no cuBLAS.
// Loaded at run time through the table in backend/backend.h; the CUDA runtime is linked
// statically, so the library loads on machines without a driver and says why it cannot run.
//
// Kernels, one per op of core/tensor.h (the CPU backend's semantics, cpu/ops.cpp):
//  - MUL_MAT, decoding (up to 8 columns): one warp per weight row, each lane dequantizing
//    whole 32-element sub-blocks of the row in registers and dotting them with every column;
//  - MUL_MAT, prefill: 64x64 output tiles, the weights dequantized into shared memory
//    32 elements of K at a time (one sub-block of every quant type), 4x4 outputs a thread;
//  - GET_ROWS, RMS_NORM_MUL, ADD, GLU (SiLU, and GELU rounded through F16 as the CPU's
//    table), SCALE / soft-cap, ROPE (normal and NeoX, factors, YaRN: the CPU's angle
//    recurrence), KV_STORE (F16 ring rows), ATTENTION (one warp per token and query head,
//    an online softmax over the F16 cache, sliding window, soft-cap, grouped heads).
// A decode step's launches are captured in a CUDA graph the first time its node list is
// seen and replayed after (EMBER_CUDA_GRAPHS=0 turns that off).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "cuda/dequant.cuh"
#include "quant/types.h"


namespace {

using namespace ember;
using namespace ember::cuda;

void set_err(char* err, size_t n, const std::string& msg) {
    if (err && n) std::snprintf(err, n, "%s", msg.c_str());
}

bool cuda_ok(cudaError_t e, const char* what, char* err, size_t n) {
    if (e == cudaSuccess) return true;
    set_err(err, n, std::string(what) + ": " + cudaGetErrorString(e));
    cudaGetLastError();  // clear it
    return false;
}

// ---- tensors as the kernels see them --------------------------------------------------

struct TD {
    char* data;
    int64_t ne[4];
    int64_t nb[4];
};

TD td(const Tensor* t) {
    TD d;
    d.data = static_cast<char*>(t->data);
    for (int i = 0; i < 4; ++i) {
        d.ne[i] = t->ne[i];
        d.nb[i] = (int64_t)t->nb[i];
    }
    return d;
}

// row i of a tensor's rows (dims 1..3 flattened, dim 1 fastest)
__device__ __forceinline__ char* row_ptr(const TD& t, int64_t i) {
    const int64_t i1 = i % t.ne[1], rest = i / t.ne[1];
    return t.data + i1 * t.nb[1] + (rest % t.ne[2]) * t.nb[2] + (rest / t.ne[2]) * t.nb[3];
}

// ---- matrix products --------------------------------------------------------------------

constexpr int kMaxDecodeCols = 8;
constexpr int kWarpsPerBlock = 4;

// y[:, c] = W x[:, c] for c < ncols (<= 8): a warp per row of W.
template <int T>
__global__ void mul_mat_vec(const uint8_t* w, int64_t w_nb1, const char* x, int64_t x_nb1, char* y, int64_t y_nb1,
                            int64_t K, int64_t M, int ncols) {
    const int lane = threadIdx.x % 32;
    const int64_t r = (int64_t)blockIdx.x * kWarpsPerBlock + threadIdx.x / 32;
    if (r >= M) return;
    const uint8_t* wr = w + r * w_nb1;
    float acc[kMaxDecodeCols];
    for (int c = 0; c < kMaxDecodeCols; ++c) acc[c] = 0.0f;
    const int64_t nsub = (K + 31) / 32;
    for (int64_t s = lane; s < nsub; s += 32) {
        const int n = (int)min((int64_t)32, K - s * 32);
        float v[32];
        dq<T>(wr, s, 0, n, v);
        for (int c = 0; c < ncols; ++c) {
            const float* xc = reinterpret_cast<const float*>(x + c * x_nb1) + s * 32;
            float a = 0.0f;
            for (int l = 0; l < n; ++l) a += v[l] * xc[l];
            acc[c] += a;
        }
    }
    for (int c = 0; c < ncols; ++c) {
        float a = acc[c];
        for (int o = 16; o > 0; o >>= 1) a += __shfl_xor_sync(0xffffffffu, a, o);
        if (lane == 0) reinterpret_cast<float*>(y + c * y_nb1)[r] = a;
    }
}

constexpr int kBM = 64, kBN = 64, kBK = 32;

// y = W x for many columns: 64x64 tiles of y, 256 threads, 4x4 outputs each.
template <int T>
__global__ void mul_mat_tiled(const uint8_t* w, int64_t w_nb1, const char* x, int64_t x_nb1, char* y, int64_t y_nb1,
                              int64_t K, int64_t M, int64_t N) {
    __shared__ float ws[kBM][kBK + 1];
    __shared__ float xs[kBN][kBK + 1];
    const int tid = threadIdx.x;
    const int64_t m0 = (int64_t)blockIdx.x * kBM, n0 = (int64_t)blockIdx.y * kBN;
    const int tm = (tid / 16) * 4, tn = (tid % 16) * 4;
    float acc[4][4] = {};
    for (int64_t k0 = 0; k0 < K; k0 += kBK) {
        const int64_t sub = k0 / 32;
        const int kn = (int)min((int64_t)kBK, K - k0);
        {   // weights: thread -> (row, quarter of the sub-block)
            const int r = tid / 4, part = (tid % 4) * 8;
            float v[8] = {};
            const int n = max(0, min(8, kn - part));
            if (m0 + r < M && n > 0) dq<T>(w + (m0 + r) * w_nb1, sub, part, n, v);
            for (int j = 0; j < 8; ++j) ws[r][part + j] = v[j];
        }
        for (int i = tid; i < kBN * kBK; i += 256) {  // activations
            const int c = i / kBK, k = i % kBK;
            float v = 0.0f;
            if (n0 + c < N && k < kn) v = reinterpret_cast<const float*>(x + (n0 + c) * x_nb1)[k0 + k];
            xs[c][k] = v;
        }
        __syncthreads();
        for (int k = 0; k < kBK; ++k) {
            float a[4], b[4];
            for (int i = 0; i < 4; ++i) a[i] = ws[tm + i][k];
            for (int j = 0; j < 4; ++j) b[j] = xs[tn + j][k];
            for (int i = 0; i < 4; ++i)
                for (int j = 0; j < 4; ++j) acc[i][j] += a[i] * b[j];
        }
        __syncthreads();
    }
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) {
            const int64_t m = m0 + tm + i, n = n0 + tn + j;
            if (m < M && n < N) reinterpret_cast<float*>(y + n * y_nb1)[m] = acc[i][j];
        }
}

// y row i = table row ids[i], dequantized
template <int T>
__global__ void get_rows(const uint8_t* table, int64_t t_nb1, int64_t n_rows, const int32_t* ids, char* y,
                         int64_t y_nb1, int64_t ne0) {
    const int64_t i = blockIdx.x;
    const int32_t id = ids[i];
    if (id < 0 || id >= n_rows) return;
    const uint8_t* tr = table + (int64_t)id * t_nb1;
    float* yr = reinterpret_cast<float*>(y + i * y_nb1);
    const int64_t nsub = (ne0 + 31) / 32;
    for (int64_t s = threadIdx.x; s < nsub; s += blockDim.x) {
        const int n = (int)min((int64_t)32, ne0 - s * 32);
        float v[32];
        dq<T>(tr, s, 0, n, v);
        for (int l = 0; l < n; ++l) yr[s * 32 + l] = v[l];
    }
}

// ---- elementwise and normalization ------------------------------------------------------

__global__ void rms_norm_mul(TD x, const float* w, TD y, float eps) {
    const int64_t i = blockIdx.x;
    const float* xi = reinterpret_cast<const float*>(row_ptr(x, i));
    float* yi = reinterpret_cast<float*>(row_ptr(y, i));
    const int64_t n = x.ne[0];
    double s = 0.0;
    for (int64_t k = threadIdx.x; k < n; k += blockDim.x) s += (double)xi[k] * (double)xi[k];
    __shared__ double part[32];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = s;
    __syncthreads();
    if (threadIdx.x < 32) {
        s = threadIdx.x < blockDim.x / 32 ? part[threadIdx.x] : 0.0;
        for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        if (threadIdx.x == 0) part[0] = s;
    }
    __syncthreads();
    const float mean = (float)(part[0] / (double)n);
    const float scale = 1.0f / sqrtf(mean + eps);
    for (int64_t k = threadIdx.x; k < n; k += blockDim.x) yi[k] = __fmul_rn(__fmul_rn(xi[k], scale), w[k]);
}

__global__ void add_rows(TD a, TD b, TD y, bool bcast) {
    const int64_t i = blockIdx.x;
    const float* ai = reinterpret_cast<const float*>(row_ptr(a, i));
    const float* bi = reinterpret_cast<const float*>(bcast ? b.data : row_ptr(b, i));
    float* yi = reinterpret_cast<float*>(row_ptr(y, i));
    for (int64_t k = threadIdx.x; k < a.ne[0]; k += blockDim.x) yi[k] = ai[k] + bi[k];
}

__device__ __forceinline__ float gelu_tanh(float x) {
    const float kSqrt2OverPi = 0.79788456080286535588f, kCoef = 0.044715f;
    return 0.5f * x * (1.0f + tanhf(kSqrt2OverPi * x * (1.0f + kCoef * x * x)));
}

__global__ void glu_rows(TD g, TD u, TD y, int act) {
    const int64_t i = blockIdx.x;
    const float* gi = reinterpret_cast<const float*>(row_ptr(g, i));
    const float* ui = reinterpret_cast<const float*>(row_ptr(u, i));
    float* yi = reinterpret_cast<float*>(row_ptr(y, i));
    for (int64_t k = threadIdx.x; k < g.ne[0]; k += blockDim.x) {
        const float x = gi[k];
        float a;
        if (act == (int)Activation::SILU) {
            a = x / (1.0f + expf(-x));
        } else if (x <= -10.0f) {
            a = 0.0f;
        } else if (x >= 10.0f) {
            a = x;
        } else {
            // the CPU reads a table indexed by x's F16 bits, holding F16 values
            a = h2f(f2h(gelu_tanh(h2f(f2h(x)))));
        }
        yi[k] = a * ui[k];
    }
}

__global__ void scale_rows(TD x, TD y, float s, bool capped) {
    const int64_t i = blockIdx.x;
    const float* xi = reinterpret_cast<const float*>(row_ptr(x, i));
    float* yi = reinterpret_cast<float*>(row_ptr(y, i));
    const float inv = 1.0f / s;
    for (int64_t k = threadIdx.x; k < x.ne[0]; k += blockDim.x) yi[k] = capped ? s * tanhf(xi[k] * inv) : xi[k] * s;
}

struct RopeArgs {
    int n_rot;
    bool neox;
    float freq_base, freq_scale, ext_factor, attn_factor, corr_lo, corr_hi;
};

// one thread per (token, head): the pairs in order, as the CPU's angle recurrence
__global__ void rope(TD x, const int32_t* pos, const float* factors, TD y, RopeArgs a) {
    const int64_t n_head = x.ne[1], n_tok = x.ne[2];
    const int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= n_head * n_tok) return;
    const int64_t j = idx / n_head, h = idx % n_head;
    const float* xi = reinterpret_cast<const float*>(x.data + h * x.nb[1] + j * x.nb[2]);
    float* yi = reinterpret_cast<float*>(y.data + h * y.nb[1] + j * y.nb[2]);
    const float mscale = a.ext_factor != 0.0f ? a.attn_factor * (1.0f + 0.1f * logf(1.0f / a.freq_scale)) : a.attn_factor;
    const float theta_scale = powf(a.freq_base, -2.0f / (float)a.n_rot);
    float theta = (float)pos[j];
    for (int i0 = 0; i0 < a.n_rot; i0 += 2) {
        const float extrap = factors ? theta / factors[i0 / 2] : theta;
        float angle = __fmul_rn(a.freq_scale, extrap);
        if (a.ext_factor != 0.0f) {
            const float yv = ((float)(i0 / 2) - a.corr_lo) / fmaxf(0.001f, a.corr_hi - a.corr_lo);
            const float mix = (1.0f - fminf(1.0f, fmaxf(0.0f, yv))) * a.ext_factor;
            angle = angle * (1.0f - mix) + extrap * mix;
        }
        const float c = cosf(angle) * mscale, s = sinf(angle) * mscale;
        const int ia = a.neox ? i0 / 2 : i0;
        const int ib = a.neox ? i0 / 2 + a.n_rot / 2 : i0 + 1;
        const float x0 = xi[ia], x1 = xi[ib];
        yi[ia] = x0 * c - x1 * s;
        yi[ib] = x0 * s + x1 * c;
        theta = __fmul_rn(theta, theta_scale);
    }
    for (int64_t i0 = a.n_rot; i0 < x.ne[0]; ++i0) yi[i0] = xi[i0];
}

// K and V of every token into their rows (position p in row p % rows), F16
__global__ void kv_store(TD k, TD v, TD kc, TD vc, const int32_t* pos) {
    const int64_t row = kc.ne[0] * kc.ne[1];
    const int64_t j = blockIdx.x;
    const float* kj = reinterpret_cast<const float*>(k.data + j * k.nb[2]);
    const float* vj = reinterpret_cast<const float*>(v.data + j * v.nb[2]);
    uint16_t* kd = reinterpret_cast<uint16_t*>(kc.data + (int64_t)(pos[j] % kc.ne[2]) * kc.nb[2]);
    uint16_t* vd = reinterpret_cast<uint16_t*>(vc.data + (int64_t)(pos[j] % vc.ne[2]) * vc.nb[2]);
    for (int64_t i = threadIdx.x; i < row; i += blockDim.x) {
        kd[i] = f2h(kj[i]);
        vd[i] = f2h(vj[i]);
    }
}

constexpr int kMaxHeadDim = 256;

// one warp per (token, query head): scores against every visible key, an online softmax,
// the values weighed in; each lane holds head_dim / 32 of the query and the accumulator
__global__ void attention(TD q, TD kc, TD vc, const int32_t* pos, TD out, float scale, int window, float softcap) {
    const int lane = threadIdx.x % 32;
    const int64_t n_head = q.ne[1], n_tok = q.ne[2];
    const int64_t item = (int64_t)blockIdx.x * kWarpsPerBlock + threadIdx.x / 32;
    if (item >= n_head * n_tok) return;
    const int64_t j = item / n_head, h = item % n_head;
    const int64_t hd = q.ne[0], group = n_head / kc.ne[1], hk = h / group, rows = kc.ne[2];
    const int per = (int)(hd / 32);
    const float* qi = reinterpret_cast<const float*>(q.data + h * q.nb[1] + j * q.nb[2]);
    float qv[kMaxHeadDim / 32], acc[kMaxHeadDim / 32];
    for (int e = 0; e < per; ++e) {
        qv[e] = qi[lane + 32 * e];
        acc[e] = 0.0f;
    }
    const int64_t n_kv = (int64_t)pos[j] + 1;
    const int64_t first = window > 0 && n_kv > window ? n_kv - window : 0;
    float m = -INFINITY, sum = 0.0f;
    for (int64_t p = first; p < n_kv; ++p) {
        const int64_t r = p % rows;
        const uint16_t* kr = reinterpret_cast<const uint16_t*>(kc.data + r * kc.nb[2] + hk * kc.nb[1]);
        float d = 0.0f;
        for (int e = 0; e < per; ++e) d += qv[e] * h2f(kr[lane + 32 * e]);
        for (int o = 16; o > 0; o >>= 1) d += __shfl_xor_sync(0xffffffffu, d, o);
        float s = d * scale;
        if (softcap > 0.0f) s = softcap * tanhf(s / softcap);
        const float mn = fmaxf(m, s);
        const float corr = expf(m - mn);  // 0 on the first key
        const float wgt = expf(s - mn);
        const uint16_t* vr = reinterpret_cast<const uint16_t*>(vc.data + r * vc.nb[2] + hk * vc.nb[1]);
        for (int e = 0; e < per; ++e) acc[e] = acc[e] * corr + wgt * h2f(vr[lane + 32 * e]);
        sum = sum * corr + wgt;
        m = mn;
    }
    float* o = reinterpret_cast<float*>(out.data + j * out.nb[1]) + h * hd;
    const float inv = 1.0f / sum;
    for (int e = 0; e < per; ++e) o[lane + 32 * e] = acc[e] * inv;
}

// ---- dispatch ---------------------------------------------------------------------------

bool weight_type_ok(DType t) {
    switch (t) {
        case DType::F32: case DType::F16: case DType::BF16: case DType::Q4_0: case DType::Q4_1:
        case DType::Q5_0: case DType::Q5_1: case DType::Q8_0: case DType::Q2_K: case DType::Q3_K:
        case DType::Q4_K: case DType::Q5_K: case DType::Q6_K: case DType::MXFP4: case DType::IQ4_NL:
        case DType::IQ4_XS: return true;
        default: return false;
    }
}

int64_t block_elems(DType t) {
    switch (t) {
        case DType::F32: case DType::F16: case DType::BF16: return 1;
        case DType::Q2_K: case DType::Q3_K: case DType::Q4_K: case DType::Q5_K: case DType::Q6_K:
        case DType::IQ4_XS: return kQKK;
        default: return kQK;
    }
}

bool rows_contiguous_f32(const Tensor* t) { return t->type == DType::F32 && t->nb[0] == sizeof(float); }

#define EMBER_TYPE_SWITCH(type, KERNEL, ...)                                                         \
    switch (type) {                                                                                  \
        case DType::F32: KERNEL<(int)DType::F32> __VA_ARGS__; break;                                 \
        case DType::F16: KERNEL<(int)DType::F16> __VA_ARGS__; break;                                 \
        case DType::BF16: KERNEL<(int)DType::BF16> __VA_ARGS__; break;                               \
        case DType::Q4_0: KERNEL<(int)DType::Q4_0> __VA_ARGS__; break;                               \
        case DType::Q4_1: KERNEL<(int)DType::Q4_1> __VA_ARGS__; break;                               \
        case DType::Q5_0: KERNEL<(int)DType::Q5_0> __VA_ARGS__; break;                               \
        case DType::Q5_1: KERNEL<(int)DType::Q5_1> __VA_ARGS__; break;                               \
        case DType::Q8_0: KERNEL<(int)DType::Q8_0> __VA_ARGS__; break;                               \
        case DType::Q2_K: KERNEL<(int)DType::Q2_K> __VA_ARGS__; break;                               \
        case DType::Q3_K: KERNEL<(int)DType::Q3_K> __VA_ARGS__; break;                               \
        case DType::Q4_K: KERNEL<(int)DType::Q4_K> __VA_ARGS__; break;                               \
        case DType::Q5_K: KERNEL<(int)DType::Q5_K> __VA_ARGS__; break;                               \
        case DType::Q6_K: KERNEL<(int)DType::Q6_K> __VA_ARGS__; break;                               \
        case DType::MXFP4: KERNEL<(int)DType::MXFP4> __VA_ARGS__; break;                             \
        case DType::IQ4_NL: KERNEL<(int)DType::IQ4_NL> __VA_ARGS__; break;                           \
        case DType::IQ4_XS: KERNEL<(int)DType::IQ4_XS> __VA_ARGS__; break;                           \
        default: return false;                                                                       \
    }

int64_t n_rows(const Tensor* t) { return t->ne[1] * t->ne[2] * t->ne[3]; }

int threads_for(int64_t n) { return n >= 256 ? 256 : n >= 128 ? 128 : 64; }

// Launches one node on the stream (no synchronization); false for what it cannot do.
bool launch(const Tensor* t, cudaStream_t st) {
    switch (t->op) {
        case Op::NONE:
        case Op::VIEW: return true;
        case Op::MUL_MAT: {
            const Tensor* w = t->src[0];
            const Tensor* x = t->src[1];
            const int64_t K = w->ne[0], M = w->ne[1], N = x->ne[1];
            const auto* wd = static_cast<const uint8_t*>(w->data);
            const char* xd = static_cast<const char*>(x->data);
            char* yd = static_cast<char*>(t->data);
            if (N <= kMaxDecodeCols) {
                const dim3 grid((unsigned)((M + kWarpsPerBlock - 1) / kWarpsPerBlock));
                EMBER_TYPE_SWITCH(w->type, mul_mat_vec,
                                  <<<grid, 32 * kWarpsPerBlock, 0, st>>>(wd, (int64_t)w->nb[1], xd, (int64_t)x->nb[1], yd,
                                                                         (int64_t)t->nb[1], K, M, (int)N))
            } else {
                const dim3 grid((unsigned)((M + kBM - 1) / kBM), (unsigned)((N + kBN - 1) / kBN));
                EMBER_TYPE_SWITCH(w->type, mul_mat_tiled,
                                  <<<grid, 256, 0, st>>>(wd, (int64_t)w->nb[1], xd, (int64_t)x->nb[1], yd, (int64_t)t->nb[1],
                                                         K, M, N))
            }
            return true;
        }
        case Op::GET_ROWS: {
            const Tensor* table = t->src[0];
            EMBER_TYPE_SWITCH(table->type, get_rows,
                              <<<(unsigned)t->ne[1], 64, 0, st>>>(static_cast<const uint8_t*>(table->data),
                                                                  (int64_t)table->nb[1], table->ne[1],
                                                                  static_cast<const int32_t*>(t->src[1]->data),
                                                                  static_cast<char*>(t->data), (int64_t)t->nb[1], table->ne[0]))
            return true;
        }
        case Op::RMS_NORM_MUL:
            rms_norm_mul<<<(unsigned)n_rows(t->src[0]), threads_for(t->ne[0]), 0, st>>>(
                td(t->src[0]), static_cast<const float*>(t->src[1]->data), td(t), t->fparams[0]);
            return true;
        case Op::ADD:
            add_rows<<<(unsigned)n_rows(t->src[0]), threads_for(t->ne[0]), 0, st>>>(td(t->src[0]), td(t->src[1]), td(t),
                                                                                  n_rows(t->src[1]) == 1);
            return true;
        case Op::GLU:
            glu_rows<<<(unsigned)n_rows(t->src[0]), threads_for(t->ne[0]), 0, st>>>(td(t->src[0]), td(t->src[1]), td(t),
                                                                                  t->iparams[0]);
            return true;
        case Op::SCALE:
            scale_rows<<<(unsigned)n_rows(t->src[0]), threads_for(t->ne[0]), 0, st>>>(td(t->src[0]), td(t), t->fparams[0],
                                                                                    t->iparams[0] == 1);
            return true;
        case Op::ROPE: {
            RopeArgs a;
            a.n_rot = t->iparams[0];
            a.neox = t->iparams[1] == (int32_t)RopeMode::NEOX;
            a.freq_base = t->fparams[0];
            a.freq_scale = t->fparams[1];
            a.ext_factor = t->fparams[2];
            a.attn_factor = t->fparams[3];
            a.corr_lo = t->fparams[4];
            a.corr_hi = t->fparams[5];
            const int64_t items = t->src[0]->ne[1] * t->src[0]->ne[2];
            rope<<<(unsigned)((items + 127) / 128), 128, 0, st>>>(
                td(t->src[0]), static_cast<const int32_t*>(t->src[1]->data),
                t->src[2] ? static_cast<const float*>(t->src[2]->data) : nullptr, td(t), a);
            return true;
        }
        case Op::KV_STORE:
            kv_store<<<(unsigned)t->src[0]->ne[2], 128, 0, st>>>(td(t->src[0]), td(t->src[1]), td(t->src[2]), td(t->src[3]),
                                                                static_cast<const int32_t*>(t->src[4]->data));
            return true;
        case Op::ATTENTION: {
            const Tensor* q = t->src[0];
            const int64_t items = q->ne[1] * q->ne[2];
            attention<<<(unsigned)((items + kWarpsPerBlock - 1) / kWarpsPerBlock), 32 * kWarpsPerBlock, 0, st>>>(
                td(q), td(t->src[1]), td(t->src[2]), static_cast<const int32_t*>(t->src[3]->data), td(t), t->fparams[0],
                t->iparams[0], t->fparams[1]);
            return true;
        }
        default: return false;
    }
}

// ---- the table --------------------------------------------------------------------------

int g_devices = 0;

int cu_init(char* err, size_t n) {
    const cudaError_t e = cudaGetDeviceCount(&g_devices);
    if (e == cudaSuccess) return 0;
    g_devices = 0;
    std::string why;
    switch (e) {
        case cudaErrorNoDevice: why = "no CUDA device"; break;
        case cudaErrorInsufficientDriver:
            why = "no NVIDIA driver, or one older than this build needs (CUDA " + std::to_string(CUDART_VERSION / 1000) + "." +
                  std::to_string(CUDART_VERSION % 1000 / 10) + ")";
            break;
        default: why = std::string("the CUDA runtime could not start: ") + cudaGetErrorString(e); break;
    }
    cudaGetLastError();
    set_err(err, n, why);
    return 1;
}

int cu_device_count() { return g_devices; }

int cu_device_info(int device, BackendDeviceInfo* info) {
    std::memset(info, 0, sizeof(*info));
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) return 1;
    std::memcpy(info->name, prop.name, std::min(sizeof(info->name) - 1, std::strlen(prop.name)));
    size_t free_b = 0, total_b = 0;
    if (cudaSetDevice(device) != cudaSuccess || cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
        cudaGetLastError();
        info->memory_total = prop.totalGlobalMem;
        return 0;
    }
    info->memory_total = total_b;
    info->memory_free = free_b;
    return 0;
}

void* cu_alloc(int device, size_t bytes, char* err, size_t n) {
    void* p = nullptr;
    if (!cuda_ok(cudaSetDevice(device), "cudaSetDevice", err, n)) return nullptr;
    if (!cuda_ok(cudaMalloc(&p, bytes ? bytes : 1), "cudaMalloc", err, n)) return nullptr;
    return p;
}

void cu_free(int device, void* p) {
    if (!p) return;
    cudaSetDevice(device);
    cudaFree(p);
}

int cu_upload(int device, void* dst, const void* src, size_t bytes, char* err, size_t n) {
    if (!cuda_ok(cudaSetDevice(device), "cudaSetDevice", err, n)) return 1;
    return cuda_ok(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "copy to the device", err, n) ? 0 : 1;
}

int cu_download(int device, void* dst, const void* src, size_t bytes, char* err, size_t n) {
    if (!cuda_ok(cudaSetDevice(device), "cudaSetDevice", err, n)) return 1;
    return cuda_ok(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "copy from the device", err, n) ? 0 : 1;
}

int cu_memset_zero(int device, void* dst, size_t bytes, char* err, size_t n) {
    if (!cuda_ok(cudaSetDevice(device), "cudaSetDevice", err, n)) return 1;
    return cuda_ok(cudaMemset(dst, 0, bytes), "cudaMemset", err, n) ? 0 : 1;
}

bool cu_supports(int, const Tensor* t) {
    switch (t->op) {
        case Op::MUL_MAT: {
            const Tensor* w = t->src[0];
            const Tensor* x = t->src[1];
            return weight_type_ok(w->type) && w->ne[0] % block_elems(w->type) == 0 && rows_contiguous_f32(x) &&
                   x->ne[2] == 1 && t->ne[2] == 1;
        }
        case Op::GET_ROWS:
            return weight_type_ok(t->src[0]->type) && t->src[0]->ne[0] % block_elems(t->src[0]->type) == 0;
        case Op::RMS_NORM_MUL:
        case Op::ADD:
        case Op::GLU:  // SiLU and GELU; gpt-oss's clamped SwiGLU and the sigmoid gate stay on the CPU
            return (t->iparams[0] == (int32_t)Activation::SILU || t->iparams[0] == (int32_t)Activation::GELU_TANH) &&
                   rows_contiguous_f32(t->src[0]) &&
                   rows_contiguous_f32(t);
        case Op::SCALE:
            return rows_contiguous_f32(t->src[0]) && rows_contiguous_f32(t);
        case Op::ROPE:  // the attention temperature (Ministral 3) stays on the CPU
            return t->fparams[6] == 0.0f && rows_contiguous_f32(t->src[0]) && t->iparams[0] <= t->src[0]->ne[0];
        case Op::KV_STORE:
            return t->src[2]->type == DType::F16 && t->src[3]->type == DType::F16 && t->src[2]->nb[2] == t->src[3]->nb[2];
        case Op::ATTENTION: {
            const Tensor* q = t->src[0];
            return !t->src[5] /* sinks: not yet */ && t->src[1]->type == DType::F16 && t->src[2]->type == DType::F16 &&
                   q->ne[0] % 32 == 0 && q->ne[0] <= kMaxHeadDim && rows_contiguous_f32(q);
        }
        default: return false;
    }
}

struct State {
    int device = 0;
    cudaStream_t stream = nullptr;
    bool use_graphs = true;
    struct Captured {
        uint64_t hash = 0;
        cudaGraphExec_t exec = nullptr;
    };
    std::unordered_map<const void*, Captured> graphs;  // by node list
};

// what a captured graph depends on: the nodes' ops, shapes, parameters and addresses
uint64_t node_hash(const Tensor* const* nodes, int32_t n) {
    uint64_t h = 1469598103934665603ull;
    auto mix = [&](const void* p, size_t bytes) {
        const auto* b = static_cast<const uint8_t*>(p);
        for (size_t i = 0; i < bytes; ++i) h = (h ^ b[i]) * 1099511628211ull;
    };
    for (int32_t i = 0; i < n; ++i) {
        const Tensor* t = nodes[i];
        mix(&t->op, sizeof(t->op));
        mix(t->ne, sizeof(t->ne));
        mix(t->nb, sizeof(t->nb));
        mix(&t->data, sizeof(t->data));
        mix(t->iparams, sizeof(t->iparams));
        mix(t->fparams, sizeof(t->fparams));
        for (const Tensor* s : t->src)
            if (s) {
                mix(&s->data, sizeof(s->data));
                mix(s->ne, sizeof(s->ne));
                mix(s->nb, sizeof(s->nb));
                mix(&s->type, sizeof(s->type));
            }
    }
    return h;
}

void* cu_state_create(int device, int64_t, int64_t, int64_t, char* err, size_t n) {
    auto* s = new State;
    s->device = device;
    const char* g = std::getenv("EMBER_CUDA_GRAPHS");
    s->use_graphs = !(g && std::strcmp(g, "0") == 0);
    if (!cuda_ok(cudaSetDevice(device), "cudaSetDevice", err, n) ||
        !cuda_ok(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking), "cudaStreamCreate", err, n)) {
        delete s;
        return nullptr;
    }
    return s;
}

void cu_state_free(void* p) {
    auto* s = static_cast<State*>(p);
    if (!s) return;
    cudaSetDevice(s->device);
    for (auto& [k, c] : s->graphs)
        if (c.exec) cudaGraphExecDestroy(c.exec);
    if (s->stream) cudaStreamDestroy(s->stream);
    delete s;
}

bool launch_all(const Tensor* const* nodes, int32_t n, cudaStream_t st, std::string& bad) {
    for (int32_t i = 0; i < n; ++i)
        if (!launch(nodes[i], st)) {
            bad = nodes[i]->name;
            return false;
        }
    return true;
}

int cu_compute(void* p, const Tensor* const* nodes, int32_t n, const volatile int32_t* cancel, char* err, size_t en) {
    auto* s = static_cast<State*>(p);
    if (cancel && *cancel) return 1;
    if (!cuda_ok(cudaSetDevice(s->device), "cudaSetDevice", err, en)) return 2;
    std::string bad;
    if (s->use_graphs) {
        const uint64_t h = node_hash(nodes, n);
        State::Captured& c = s->graphs[static_cast<const void*>(nodes)];
        if (!c.exec || c.hash != h) {
            if (c.exec) cudaGraphExecDestroy(c.exec);
            c.exec = nullptr;
            cudaGraph_t graph = nullptr;
            if (!cuda_ok(cudaStreamBeginCapture(s->stream, cudaStreamCaptureModeThreadLocal), "graph capture", err, en))
                return 2;
            const bool ok = launch_all(nodes, n, s->stream, bad);
            const cudaError_t e = cudaStreamEndCapture(s->stream, &graph);
            if (!ok) {
                if (graph) cudaGraphDestroy(graph);
                set_err(err, en, "no kernel for node '" + bad + "'");
                return 2;
            }
            if (!cuda_ok(e, "graph capture", err, en)) return 2;
            const cudaError_t ie = cudaGraphInstantiate(&c.exec, graph, 0);
            cudaGraphDestroy(graph);
            if (!cuda_ok(ie, "graph instantiation", err, en)) {
                c.exec = nullptr;
                return 2;
            }
            c.hash = h;
        }
        if (!cuda_ok(cudaGraphLaunch(c.exec, s->stream), "graph launch", err, en)) return 2;
    } else if (!launch_all(nodes, n, s->stream, bad)) {
        set_err(err, en, "no kernel for node '" + bad + "'");
        return 2;
    }
    if (!cuda_ok(cudaGetLastError(), "kernel launch", err, en)) return 2;
    if (!cuda_ok(cudaStreamSynchronize(s->stream), "kernel", err, en)) return 2;
    return 0;
}

const BackendIface g_iface = {
    kBackendAbiVersion, (uint32_t)sizeof(Tensor), "cuda", "CUDA", 100,
    cu_init, cu_device_count, cu_device_info,
    cu_alloc, cu_free, cu_upload, cu_download, cu_memset_zero,
    cu_supports, cu_state_create, cu_state_free, cu_compute,
};

}  // namespace

EMBER_BACKEND_EXPORT const ember::BackendIface* ember_backend_entry(void) { return &g_iface; }
