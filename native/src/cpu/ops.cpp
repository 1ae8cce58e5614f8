#include "cpu/ops.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#if defined(__SSE2__) || defined(_M_X64)
#include <emmintrin.h>
#elif defined(__aarch64__) || defined(_M_ARM64)
#include <arm_neon.h>
#endif

#include "core/error.h"
#include "core/fp16.h"
#include "core/thread_state.h"
#include "cpu/kernels.h"
#include "quant/types.h"

namespace ember {

namespace {

// Row i of a tensor counted over dimensions 1..3, whatever its strides (per-head views of
// a product, halves of a fused one).
template <typename T>
T* row_at(const Tensor* t, int64_t i) {
    const int64_t i1 = i % t->ne[1], rest = i / t->ne[1];
    return t->row<T>(i1, rest % t->ne[2], rest / t->ne[2]);
}

void op_get_rows(const Tensor* t, int ith, int nth) {
    const Tensor* table = t->src[0];
    const Tensor* ids = t->src[1];
    const TypeTraits* tt = type_traits((uint32_t)table->type);
    const Range r = split(t->ne[1], ith, nth);
    const int64_t x4_rows = four_row_rows(table);
    for (int64_t i = r.begin; i < r.end; ++i) {
        const int32_t id = static_cast<const int32_t*>(ids->data)[i];
        if (id < 0 || id >= table->ne[1]) continue;  // ids are validated before decode
        if (id < x4_rows) {
            // the four-row copy (cpu/kernels.h), block by block: the file's pages of a tied
            // embedding then stay unmapped (a prompt's rows would map them back piecemeal)
            const uint8_t* g = static_cast<const uint8_t*>(row_groups(table)->data) + (size_t)(id / 4 * 4) * table->nb[1];
            float* out = t->row<float>(i);
            alignas(16) uint8_t block[512];  // one block of any type (the largest, Q8_K, is 292 bytes)
            for (int64_t b = 0; b < table->ne[0] / tt->block_size; ++b) {
                four_row_block(table->type, g, b, (int)(id % 4), block);
                tt->dequantize(block, out + b * tt->block_size, tt->block_size);
            }
            continue;
        }
        tt->dequantize(table->row(id), t->row<float>(i), table->ne[0]);
    }
}

void op_rms_norm_mul(const Tensor* t, int ith, int nth) {
    const Tensor* x = t->src[0];
    const float* w = static_cast<const float*>(t->src[1]->data);
    const float eps = t->fparams[0];
    const int64_t n = x->ne[0];
    const Range r = split(x->n_rows(), ith, nth);
    for (int64_t i = r.begin; i < r.end; ++i) {
        const float* xi = row_at<const float>(x, i);
        float* yi = row_at<float>(t, i);
        double sum = 0.0;
        for (int64_t k = 0; k < n; ++k) sum += (double)xi[k] * (double)xi[k];
        const float mean = (float)(sum / (double)n);
        const float scale = 1.0f / std::sqrt(mean + eps);
        for (int64_t k = 0; k < n; ++k) yi[k] = (xi[k] * scale) * w[k];
    }
}

void op_add(const Tensor* t, int ith, int nth) {
    const Tensor* a = t->src[0];
    const Tensor* b = t->src[1];
    const bool bcast = b->n_rows() == 1;
    const Range r = split(a->n_rows(), ith, nth);
    for (int64_t i = r.begin; i < r.end; ++i) {
        const float* ai = row_at<const float>(a, i);
        const float* bi = bcast ? b->row<const float>(0) : row_at<const float>(b, i);
        float* yi = row_at<float>(t, i);
        for (int64_t k = 0; k < a->ne[0]; ++k) yi[k] = ai[k] + bi[k];
    }
}

// GELU with the tanh approximation, as Gemma's feed-forward uses it, read from a table
// indexed by the F16 bits of x and holding F16 values, as llama.cpp's CPU backend does:
// the same activations as the reference, and a load instead of a tanh per element.
inline float gelu_tanh(float x) {
    constexpr float kSqrt2OverPi = 0.79788456080286535588f, kCoef = 0.044715f;
    return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kCoef * x * x)));
}

const uint16_t* gelu_table() {
    static const std::vector<uint16_t> table = [] {
        std::vector<uint16_t> t(1 << 16);
        for (uint32_t i = 0; i < t.size(); ++i) t[i] = fp32_to_fp16(gelu_tanh(fp16_to_fp32((uint16_t)i)));
        return t;
    }();
    return table.data();
}

inline float gelu_tanh_f16(float x, const uint16_t* table) {
    if (x <= -10.0f) return 0.0f;  // F16 has no room for the tail; the limits are exact enough
    if (x >= 10.0f) return x;
    return fp16_to_fp32(table[fp32_to_fp16(x)]);
}

void op_glu(const Tensor* t, int ith, int nth, Isa isa) {
    const Tensor* g = t->src[0];
    const Tensor* u = t->src[1];
    const int64_t n = g->ne[0];
    const auto swiglu = attention_kernels(isa).swiglu;
    const Activation act = (Activation)t->iparams[0];
    const Range r = split(g->n_rows(), ith, nth);
    for (int64_t i = r.begin; i < r.end; ++i) {
        const float* gi = row_at<const float>(g, i);
        const float* ui = row_at<const float>(u, i);
        float* yi = row_at<float>(t, i);
        if (act == Activation::SILU) {
            swiglu(gi, ui, yi, n);
        } else if (act == Activation::LINEAR) {
            for (int64_t k = 0; k < n; ++k) yi[k] = gi[k] * ui[k];
        } else if (act == Activation::SIGMOID) {
            for (int64_t k = 0; k < n; ++k) yi[k] = ui[k] * (1.0f / (1.0f + std::exp(-gi[k])));
        } else if (act == Activation::SWIGLU_OAI) {
            const float alpha = t->fparams[0], limit = t->fparams[1];
            for (int64_t k = 0; k < n; ++k) {
                const float x = std::min(gi[k], limit);
                const float y = std::min(std::max(ui[k], -limit), limit);
                yi[k] = x / (1.0f + std::exp(alpha * -x)) * (y + 1.0f);
            }
        } else {
            const uint16_t* table = gelu_table();
            for (int64_t k = 0; k < n; ++k) yi[k] = gelu_tanh_f16(gi[k], table) * ui[k];
        }
    }
}

void op_scale(const Tensor* t, int ith, int nth) {
    const Tensor* x = t->src[0];
    const float s = t->fparams[0];
    const bool capped = t->iparams[0] == 1;
    const float inv = 1.0f / s;
    const Range r = split(x->n_rows(), ith, nth);
    for (int64_t i = r.begin; i < r.end; ++i) {
        const float* xi = row_at<const float>(x, i);
        float* yi = row_at<float>(t, i);
        if (capped) {
            for (int64_t k = 0; k < x->ne[0]; ++k) yi[k] = s * std::tanh(xi[k] * inv);
        } else {
            for (int64_t k = 0; k < x->ne[0]; ++k) yi[k] = xi[k] * s;
        }
    }
}

// YaRN's blend between the interpolated and the original angle of pair i0/2: 1 below the
// low correction dimension (keep the original), 0 above the high one.
inline float yarn_ramp(float lo, float hi, int64_t i0) {
    const float y = ((float)(i0 / 2) - lo) / std::max(0.001f, hi - lo);
    return 1.0f - std::min(1.0f, std::max(0.0f, y));
}

void op_rope(const Tensor* t, int ith, int nth) {
    const Tensor* x = t->src[0];
    const int32_t* pos = static_cast<const int32_t*>(t->src[1]->data);
    const float* factors = t->src[2] ? static_cast<const float*>(t->src[2]->data) : nullptr;
    const int n_rot = t->iparams[0];
    const bool neox = t->iparams[1] == (int32_t)RopeMode::NEOX;
    const float freq_base = t->fparams[0];
    const float freq_scale = t->fparams[1];
    const float ext_factor = t->fparams[2];
    const float attn_factor = t->fparams[3];
    const float corr_lo = t->fparams[4], corr_hi = t->fparams[5];
    const float temp_scale = t->fparams[6];
    const int temp_floor = t->iparams[2];
    // YaRN raises the magnitude as it interpolates
    const float mscale = ext_factor != 0.0f ? attn_factor * (1.0f + 0.1f * std::log(1.0f / freq_scale)) : attn_factor;
    const float theta_scale = std::pow(freq_base, -2.0f / (float)n_rot);
    const int64_t head_dim = x->ne[0], n_head = x->ne[1], n_tok = x->ne[2];
    // A token's angles are the same for all its heads: each thread works out the cos/sin
    // pairs once per token of its range (libm's cos and sin took 1.5% of a 3B prefill
    // when they were taken per head), with the same float operations as before.
    struct Site;
    float (*cs)[2] = thread_scratch<float[2], Site>((size_t)(n_rot / 2));
    int64_t cs_tok = -1;
    const Range r = split(n_tok * n_head, ith, nth);
    for (int64_t idx = r.begin; idx < r.end; ++idx) {
        const int64_t j = idx / n_head, h = idx % n_head;
        const float* xi = x->row<float>(h, j);
        float* yi = t->row<float>(h, j);
        if (cs_tok != j) {
            float theta = (float)pos[j];
            for (int64_t i0 = 0; i0 < n_rot; i0 += 2) {
                const float extrap = factors ? theta / factors[i0 / 2] : theta;
                float angle = freq_scale * extrap;
                if (ext_factor != 0.0f) {
                    const float mix = yarn_ramp(corr_lo, corr_hi, i0) * ext_factor;
                    angle = angle * (1.0f - mix) + extrap * mix;
                }
                cs[i0 / 2][0] = std::cos(angle) * mscale;
                cs[i0 / 2][1] = std::sin(angle) * mscale;
                theta *= theta_scale;
            }
            cs_tok = j;
        }
        for (int64_t i0 = 0; i0 < n_rot; i0 += 2) {
            const float c = cs[i0 / 2][0], s = cs[i0 / 2][1];
            const int64_t a = neox ? i0 / 2 : i0;
            const int64_t b = neox ? i0 / 2 + n_rot / 2 : i0 + 1;
            const float x0 = xi[a], x1 = xi[b];
            yi[a] = x0 * c - x1 * s;
            yi[b] = x0 * s + x1 * c;
        }
        for (int64_t i0 = n_rot; i0 < head_dim; ++i0) yi[i0] = xi[i0];
        if (temp_scale != 0.0f) {
            // the position's attention temperature, worked out as llama.cpp's input does (double)
            const float tq = (float)(std::log(std::floor((double)pos[j] / temp_floor) + 1.0) * temp_scale + 1.0);
            for (int64_t i0 = 0; i0 < head_dim; ++i0) yi[i0] *= tq;
        }
    }
}

void op_kv_store(const Tensor* t, int ith, int nth, Isa isa) {
    const Tensor* k = t->src[0];
    const Tensor* v = t->src[1];
    const Tensor* kc = t->src[2];
    const Tensor* vc = t->src[3];
    const int32_t* pos = static_cast<const int32_t*>(t->src[4]->data);
    const int64_t n_tok = k->ne[2];  // K and V are [head_dim, n_head_kv, N], rows contiguous
    const int64_t hd = kc->ne[0], n_head_kv = kc->ne[1];
    // The level's F32 -> F16 row converter (F16C, NEON): the same rounding as
    // fp32_to_fp16 (test_kernels checks every level's converter against the scalar one).
    const DotKernels& f16 = dot_kernels(DType::F16, isa);
    const ConvertRowFn convert = f16.act_type == DType::F16 ? f16.convert : nullptr;
    const Range r = split(n_tok, ith, nth);
    for (int64_t j = r.begin; j < r.end; ++j) {
        const float* kj = k->row<float>(0, j);
        const float* vj = v->row<float>(0, j);
        // position p lives in row p % rows (rows < n_ctx for sliding-window caches); a head
        // at a time, the caches' strides say where (the CPU's are head-major: Context)
        for (int64_t h = 0; h < n_head_kv; ++h) {
            uint16_t* kd = kc->row<uint16_t>(h, pos[j] % kc->ne[2]);
            uint16_t* vd = vc->row<uint16_t>(h, pos[j] % vc->ne[2]);
            if (convert) {
                convert(kj + h * hd, kd, hd);
                convert(vj + h * hd, vd, hd);
                continue;
            }
            for (int64_t i = 0; i < hd; ++i) {
                kd[i] = fp32_to_fp16(kj[h * hd + i]);
                vd[i] = fp32_to_fp16(vj[h * hd + i]);
            }
        }
    }
}

// A thread's slot for a converted one-row activation: whole cache lines, so the
// threads' slots never share one.
size_t decode_slot_bytes(size_t act_row) { return (act_row + 63) & ~(size_t)63; }

void op_mul_mat(const Tensor* t, ComputeParams& p) {
    const Tensor* w = t->src[0];
    const Tensor* x = t->src[1];
    const DotKernels& k = dot_kernels(w->type, p.isa);
    if (k.act_type == DType::F32) {
        mul_mat(w, x, t, p.ith, p.nth, p.isa, p.next_chunk);
        return;
    }
    // Convert the activations once into the shared work buffer (all threads take a
    // share of the columns), unless the previous product already did.
    const TypeTraits* at = type_traits((uint32_t)k.act_type);
    const size_t act_row = (size_t)row_bytes(*at, x->ne[0]);
    if (x->ne[1] == 1) {
        // Decoding: one short row. Every thread converts it into its own slot, which
        // costs less than a barrier (and barrier_plan knows there is none here).
        uint8_t* slot = p.work + (size_t)p.ith * decode_slot_bytes(act_row);
        if (mul_mat_converts(t, p.isa, p.converted, p.converted_type)) k.convert(x->row<float>(0), slot, x->ne[0]);
        const Tensor xa = tensor_2d(k.act_type, x->ne[0], 1, slot);
        mul_mat(w, &xa, t, p.ith, p.nth, p.isa, p.next_chunk);
        return;
    }
    if (mul_mat_converts(t, p.isa, p.converted, p.converted_type)) {
        const Range r = split(x->ne[1], p.ith, p.nth);
        for (int64_t c = r.begin; c < r.end; ++c) k.convert(x->row<float>(c), p.work + c * act_row, x->ne[0]);
        if (p.pool) p.pool->barrier();
    }
    const Tensor xa = tensor_2d(k.act_type, x->ne[0], x->ne[1], p.work);
    mul_mat(w, &xa, t, p.ith, p.nth, p.isa, p.next_chunk);
}

// Causal attention with an online softmax over blocks of keys: the scores of a block
// are computed, the running maximum raised (rescaling the accumulator) once per block,
// and the block's exponentials taken together, so no buffer of n_kv scores is needed
// however long the prompt is. Work items are (token, head) pairs handed out one by one
// from the node's counter: causal rows differ in length, so a static split would leave
// one thread waiting. A token's result does not depend on the batch it is in.
constexpr int64_t kAttnBlock = 32;

// One head's keys (or values) at consecutive positions: on the CPU's head-major caches
// one stream (Context), on a cache laid out position-major (all heads of a position
// together) a stride of n_head_kv * head_dim * 2 bytes. The next block's rows are asked
// for while this one is computed, except on x86 CPUs that take no software prefetches
// (attention_prefetch(), cpu/kernels.h: with none asked for, 1B at a depth of 4096 spent a
// quarter more time in attention on a Sapphire Rapids-class Xeon). Zen 4 takes none: its
// hardware prefetchers alone read the head's stream faster (1B Q4_0 at a depth of 4096,
// tg alternated: one thread +6 to +13% in four runs of five, two threads +7% on average
// over five noisy pairs), and the prefetch instructions were 70% of the op's own samples
// there, waiting on lines already in flight.
inline void prefetch_rows(const uint16_t* first, size_t stride, int64_t n, int64_t row_elems) {
    for (int64_t r = 0; r < n; ++r) {
        const char* row = reinterpret_cast<const char*>(first + (size_t)r * stride);
        for (int64_t b = 0; b < row_elems * 2; b += 64) {
#if defined(__GNUC__) || defined(__clang__)
            __builtin_prefetch(row + b, 0, 3);
#else
            (void)row;
#endif
        }
    }
}

void op_attention(const Tensor* t, ComputeParams& p) {
    const AttentionKernels& ak = attention_kernels(p.isa);
    const Tensor* q = t->src[0];
    const Tensor* kc = t->src[1];
    const Tensor* vc = t->src[2];
    const int32_t* pos = static_cast<const int32_t*>(t->src[3]->data);
    const float scale = t->fparams[0];
    const float softcap = t->fparams[1];
    const int64_t window = t->iparams[0];
    const float* sinks = t->src[5] ? static_cast<const float*>(t->src[5]->data) : nullptr;
    const int64_t rows = kc->ne[2];
    const int64_t head_dim = q->ne[0], n_head = q->ne[1], n_tok = q->ne[2];
    const int64_t n_head_kv = kc->ne[1];
    const int64_t group = n_head / n_head_kv;
    // One item is a token's group of query heads that share a key head: the group's
    // heads read each key and value block once, converted once.
    // Scratch: group x head_dim accumulators, group x kAttnBlock scores, then per head
    // the running max (float) and sum (double, at an even float offset).
    if (attention_scratch_floats(head_dim, group) > p.scratch_floats)
        fail(EMBER_ERR_INTERNAL, "attention scratch too small");
    const size_t sum_at = attention_scratch_floats(head_dim, group) - 2 * (size_t)group;
    float* acc = p.scratch;
    float* score = acc + group * head_dim;
    float* max = score + group * kAttnBlock;
    double* sum = reinterpret_cast<double*>(p.scratch + sum_at);
    // keys (and values) of one head at consecutive positions, in elements
    const size_t kv_stride = kc->nb[2] / sizeof(uint16_t);
    if (vc->nb[2] != kc->nb[2]) fail(EMBER_ERR_INTERNAL, "attention: K and V cache layouts differ");
    const size_t q_stride = q->nb[1] / sizeof(float);  // between the heads of one token
    const bool prefetch = attention_prefetch();
    auto one = [&](int64_t it) {
        const int64_t j = it / n_head_kv, hk = it % n_head_kv, h0 = hk * group;
        const int64_t n_kv = (int64_t)pos[j] + 1;
        // a sliding window drops the keys more than `window` positions back
        const int64_t first = window > 0 && n_kv > window ? n_kv - window : 0;
        if (n_kv - first > rows) fail(EMBER_ERR_INTERNAL, "attention: the cache holds fewer positions than it needs");
        const float* qi = q->row<float>(h0, j);
        for (int64_t g = 0; g < group; ++g) {
            max[g] = -INFINITY;
            sum[g] = 0.0;
        }
        for (int64_t d = 0; d < group * head_dim; ++d) acc[d] = 0.0f;
        for (int64_t k0 = first, nk; k0 < n_kv; k0 += nk) {
            // a block of consecutive positions in consecutive rows: it ends where the cache
            // wraps around (sliding-window caches keep position p in row p % rows)
            const int64_t row0 = k0 % rows;
            nk = std::min({kAttnBlock, n_kv - k0, rows - row0});
            if (prefetch && k0 + nk < n_kv) {
                const int64_t next = (k0 + nk) % rows, n_next = std::min({kAttnBlock, n_kv - k0 - nk, rows - next});
                prefetch_rows(kc->row<uint16_t>(hk, next), kv_stride, n_next, head_dim);
                prefetch_rows(vc->row<uint16_t>(hk, next), kv_stride, n_next, head_dim);
            }
            ak.scores(qi, q_stride, (int)group, kc->row<uint16_t>(hk, row0), kv_stride, nk, head_dim, scale, score,
                      kAttnBlock);
            for (int64_t g = 0; g < group; ++g) {
                float* sg = score + g * kAttnBlock;
                if (softcap > 0.0f)
                    for (int64_t k = 0; k < nk; ++k) sg[k] = softcap * std::tanh(sg[k] / softcap);
                float* ag = acc + g * head_dim;
                // four running maxima (one SSE register; the max is the same in any order)
                float m4[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
                int64_t k = 0;
                for (; k + 4 <= nk; k += 4)
                    for (int l = 0; l < 4; ++l) m4[l] = sg[k + l] > m4[l] ? sg[k + l] : m4[l];
                for (; k < nk; ++k) m4[0] = sg[k] > m4[0] ? sg[k] : m4[0];
                const float m01 = m4[0] > m4[1] ? m4[0] : m4[1], m23 = m4[2] > m4[3] ? m4[2] : m4[3];
                const float bmax = m01 > m23 ? m01 : m23;
                if (bmax > max[g]) {
                    const float rescale = std::exp(max[g] - bmax);  // exp(-inf) = 0 on the first block
                    for (int64_t d = 0; d < head_dim; ++d) ag[d] *= rescale;
                    sum[g] *= rescale;
                    max[g] = bmax;
                }
                sum[g] += ak.exp_sub_sum(sg, nk, max[g]);
            }
            ak.accumulate(acc, (size_t)head_dim, (int)group, vc->row<uint16_t>(hk, row0), kv_stride, score,
                          kAttnBlock, nk, head_dim);
        }
        float* out = reinterpret_cast<float*>(static_cast<uint8_t*>(t->data) + j * t->nb[1]) + h0 * head_dim;
        if (sinks) {
            // each head's sink joins the denominator as one more exponential, after the keys
            for (int64_t g = 0; g < group; ++g) {
                const float s = sinks[h0 + g];
                if (s > max[g]) {
                    const float rescale = std::exp(max[g] - s);
                    for (int64_t d = 0; d < head_dim; ++d) acc[g * head_dim + d] *= rescale;
                    sum[g] = sum[g] * rescale + 1.0;
                    max[g] = s;
                } else {
                    sum[g] += std::exp(s - max[g]);
                }
            }
        }
        for (int64_t g = 0; g < group; ++g) {
            const float inv = (float)(1.0 / sum[g]);
            for (int64_t d = 0; d < head_dim; ++d) out[g * head_dim + d] = acc[g * head_dim + d] * inv;
        }
    };
    const int64_t items = n_tok * n_head_kv;
    if (p.next_chunk) {
        for (int64_t it; (it = p.next_chunk->fetch_add(1, std::memory_order_relaxed)) < items;) one(it);
    } else {
        const Range r = split(items, p.ith, p.nth);
        for (int64_t it = r.begin; it < r.end; ++it) one(it);
    }
}

}  // namespace

bool mul_mat_converts(const Tensor* t, Isa isa, const Tensor*& converted, DType& converted_type) {
    const DotKernels& k = dot_kernels(t->src[0]->type, isa);
    if (k.act_type == DType::F32) return false;
    if (converted == t->src[1] && converted_type == k.act_type) return false;
    converted = t->src[1];
    converted_type = k.act_type;
    return true;
}

size_t attention_scratch_floats(int64_t head_dim, int64_t group) {
    // accumulators, scores and maxima, then the sums as doubles at an even float offset
    const size_t sum_at = (size_t)(group * (head_dim + kAttnBlock + 1) + 1) & ~(size_t)1;
    return sum_at + 2 * (size_t)group;
}

void compute_node(const Tensor* t, ComputeParams& p) {
    const int ith = p.ith, nth = p.nth;
    switch (t->op) {
        case Op::NONE:
        case Op::VIEW: return;
        case Op::GET_ROWS: op_get_rows(t, ith, nth); return;
        case Op::RMS_NORM_MUL: op_rms_norm_mul(t, ith, nth); return;
        case Op::MUL_MAT: op_mul_mat(t, p); return;
        case Op::ADD: op_add(t, ith, nth); return;
        case Op::GLU: op_glu(t, ith, nth, p.isa); return;
        case Op::SCALE: op_scale(t, ith, nth); return;
        case Op::ROPE: op_rope(t, ith, nth); return;
        case Op::KV_STORE: op_kv_store(t, ith, nth, p.isa); return;
        case Op::ATTENTION: op_attention(t, p); return;
        case Op::MOE_ROUTE: op_moe_route(t, ith, nth); return;
        case Op::MOE_WEIGHTS: op_moe_weights(t, ith, nth); return;
        case Op::MUL_MAT_ID: op_mul_mat_id(t, p); return;
        case Op::MOE_SUM: op_moe_sum(t, ith, nth); return;
        case Op::SSM_CONV: op_ssm_conv(t, ith, nth); return;
        case Op::GDN_GATES: op_gdn_gates(t, ith, nth); return;
        case Op::DELTA_NET: op_delta_net(t, p); return;
        case Op::LAYER_NORM: op_layer_norm(t, ith, nth); return;
        case Op::GELU: op_gelu(t, ith, nth); return;
        case Op::ATTENTION_BIDIR: op_attention_bidir(t, p); return;
        case Op::COUNT: break;
    }
    fail(EMBER_ERR_INTERNAL, "unknown op " + std::to_string((int)t->op));
}

size_t node_work_size(const Tensor* t, Isa isa, int n_threads) {
    if (t->op == Op::MUL_MAT_ID) return mul_mat_id_work_size(t, isa, n_threads);
    if (t->op != Op::MUL_MAT) return 0;
    const DotKernels& k = dot_kernels(t->src[0]->type, isa);
    if (k.act_type == DType::F32) return 0;
    const size_t row = (size_t)row_bytes(*type_traits((uint32_t)k.act_type), t->src[1]->ne[0]);
    return t->src[1]->ne[1] == 1 ? decode_slot_bytes(row) * (size_t)n_threads : row * (size_t)t->src[1]->ne[1];
}

size_t work_size(const Graph& graph, Isa isa, int n_threads) {
    size_t need = 0;
    for (const Tensor* t : graph.nodes()) need = std::max(need, node_work_size(t, isa, n_threads));
    return need;
}

}  // namespace ember
