// Reference quantizers of the K-quants (Q2_K..Q6_K), the ones llama-quantize runs when no
// importance matrix is given. The bytes must equal llama.cpp's, so every float operation
// below happens in the order and precision ggml's reference code uses: float32 throughout,
// no fused multiply-add (the build sets -ffp-contract=off), ints converted where ggml's C
// converts them. The search strategy per type (how many candidate scales, which weights)
// is a fact about the file format's reference encoder, not a free choice.
#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "quant/kquants.h"
#include "quant/types.h"

namespace ember {

namespace {

// Groups whose largest magnitude is below this are encoded as all zeros.
constexpr float kGroupMaxEps = 1e-15f;

// Round to nearest, ties to even, for |v| < 2^22: adding 1.5 * 2^23 puts the integer in the
// low mantissa bits (the float addition itself does the rounding).
inline int round_nearest(float v) {
    const float shifted = v + 12582912.0f;
    int32_t bits;
    std::memcpy(&bits, &shifted, 4);
    return (bits & 0x007fffff) - 0x00400000;
}

inline int clamp_int(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

// Symmetric levels L in [0, 2*nmax) for n values, scale chosen by a weighted least-squares
// fit over 19 trial inverse scales around -nmax/max; weights are x^2 (Q6_K's choice).
float fit_symmetric_weighted(int n, int nmax, const float* x, int8_t* L) {
    float max = 0.0f, amax = 0.0f;
    for (int i = 0; i < n; ++i) {
        const float ax = std::fabs(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < kGroupMaxEps) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        return 0.0f;
    }
    const float fnmax = (float)nmax;
    float iscale = (float)(-nmax) / max;
    float sumlx = 0.0f, suml2 = 0.0f;
    for (int i = 0; i < n; ++i) {
        const int l = clamp_int(round_nearest(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)(l + nmax);
        const float w = x[i] * x[i];
        sumlx += w * x[i] * (float)l;
        suml2 += w * (float)l * (float)l;
    }
    float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int step = -9; step <= 9; ++step) {
        if (step == 0) continue;
        iscale = -(fnmax + 0.1f * (float)step) / max;
        sumlx = suml2 = 0.0f;
        for (int i = 0; i < n; ++i) {
            const int l = clamp_int(round_nearest(iscale * x[i]), -nmax, nmax - 1);
            const float w = x[i] * x[i];
            sumlx += w * x[i] * (float)l;
            suml2 += w * (float)l * (float)l;
        }
        if (suml2 > 0.0f && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; ++i)
                L[i] = (int8_t)(nmax + clamp_int(round_nearest(iscale * x[i]), -nmax, nmax - 1));
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

// Q3_K's symmetric fit: start from -nmax/max, then up to 5 passes of moving single levels
// while the weighted (x^2) error falls. Levels returned in [0, 2*nmax).
float fit_symmetric_greedy(int n, int nmax, const float* x, int8_t* L) {
    float max = 0.0f, amax = 0.0f;
    for (int i = 0; i < n; ++i) {
        const float ax = std::fabs(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < kGroupMaxEps) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        return 0.0f;
    }
    const float iscale = (float)(-nmax) / max;
    float sumlx = 0.0f, suml2 = 0.0f;
    for (int i = 0; i < n; ++i) {
        const int l = clamp_int(round_nearest(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)l;
        const float w = x[i] * x[i];
        sumlx += w * x[i] * (float)l;
        suml2 += w * (float)l * (float)l;
    }
    for (int pass = 0; pass < 5; ++pass) {
        int changed = 0;
        for (int i = 0; i < n; ++i) {
            const float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * (float)L[i];
            if (slx > 0.0f) {
                float sl2 = suml2 - w * (float)L[i] * (float)L[i];
                const int nl = clamp_int(round_nearest(x[i] * sl2 / slx), -nmax, nmax - 1);
                if (nl != L[i]) {
                    slx += w * x[i] * (float)nl;
                    sl2 += w * (float)nl * (float)nl;
                    if (sl2 > 0.0f && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (int8_t)nl;
                        sumlx = slx;
                        suml2 = sl2;
                        ++changed;
                    }
                }
            }
        }
        if (!changed) break;
    }
    for (int i = 0; i < n; ++i) L[i] = (int8_t)(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// Asymmetric fit x ~ scale * L - min with L in [0, nmax], min >= 0 returned in *min_out:
// nstep+1 trial inverse scales (rmin + rdelta*k + nmax) / (max - min), each refined by a
// weighted least-squares solve for scale and offset; the lowest weighted error wins
// (absolute error when use_mad, squared otherwise).
float fit_affine(int n, int nmax, const float* x, const float* w, uint8_t* L, float* min_out, uint8_t* Laux,
                 float rmin, float rdelta, int nstep, bool use_mad) {
    float min = x[0], max = x[0];
    float sum_w = w[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; ++i) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (min > 0.0f) min = 0.0f;
    if (max == min) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        *min_out = -min;
        return 0.0f;
    }
    const float fnmax = (float)nmax;
    float iscale = fnmax / (max - min);
    float scale = 1.0f / iscale;
    float best_error = 0.0f;
    for (int i = 0; i < n; ++i) {
        L[i] = (uint8_t)clamp_int(round_nearest(iscale * (x[i] - min)), 0, nmax);
        float diff = scale * (float)L[i] + min - x[i];
        diff = use_mad ? std::fabs(diff) : diff * diff;
        best_error += w[i] * diff;
    }
    for (int k = 0; k <= nstep; ++k) {
        iscale = (rmin + rdelta * (float)k + fnmax) / (max - min);
        float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;
        for (int i = 0; i < n; ++i) {
            const int l = clamp_int(round_nearest(iscale * (x[i] - min)), 0, nmax);
            Laux[i] = (uint8_t)l;
            const float fl = (float)l;
            sum_l += w[i] * fl;
            sum_l2 += w[i] * fl * fl;
            sum_xl += w[i] * fl * x[i];
        }
        const float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0.0f) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0.0f) {
                this_min = 0.0f;
                this_scale = sum_xl / sum_l2;
            }
            float err = 0.0f;
            for (int i = 0; i < n; ++i) {
                float diff = this_scale * (float)Laux[i] + this_min - x[i];
                diff = use_mad ? std::fabs(diff) : diff * diff;
                err += w[i] * diff;
            }
            if (err < best_error) {
                std::memcpy(L, Laux, (size_t)n);
                best_error = err;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *min_out = -min;
    return scale;
}

// Q4_K/Q5_K: 8 sub-blocks of 32, each an affine fit with weights sqrt(mean x^2) + |x|;
// the 6-bit sub-block scales and mins are quantized against the largest of each.
template <int NMAX>
void quantize_affine_k(const float* x, uint16_t* d_out, uint16_t* dmin_out, uint8_t* scales12, uint8_t* L,
                       float rmin, int nstep) {
    float scales[8], mins[8], w[32];
    uint8_t Laux[32];
    float max_scale = 0.0f, max_min = 0.0f;
    for (int j = 0; j < 8; ++j) {
        const float* xs = x + 32 * j;
        float sum_x2 = 0.0f;
        for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
        const float av_x = std::sqrt(sum_x2 / 32.0f);
        for (int l = 0; l < 32; ++l) w[l] = av_x + std::fabs(xs[l]);
        scales[j] = fit_affine(32, NMAX, xs, w, L + 32 * j, &mins[j], Laux, rmin, 0.1f, nstep, false);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    const float inv_scale = max_scale > 0.0f ? 63.0f / max_scale : 0.0f;
    const float inv_min = max_min > 0.0f ? 63.0f / max_min : 0.0f;
    for (int j = 0; j < 8; ++j) {
        // ggml stores the rounded value in a uint8_t before clamping: keep that wrap
        uint8_t ls = (uint8_t)round_nearest(inv_scale * scales[j]);
        uint8_t lm = (uint8_t)round_nearest(inv_min * mins[j]);
        if (ls > 63) ls = 63;
        if (lm > 63) lm = 63;
        if (j < 4) {
            scales12[j] = ls;
            scales12[j + 4] = lm;
        } else {
            scales12[j + 4] = (uint8_t)((ls & 0x0f) | ((lm & 0x0f) << 4));
            scales12[j - 4] |= (uint8_t)((ls >> 4) << 6);
            scales12[j] |= (uint8_t)((lm >> 4) << 6);
        }
    }
    *d_out = fp32_to_fp16(max_scale / 63.0f);
    *dmin_out = fp32_to_fp16(max_min / 63.0f);
    const float d_all = fp16_to_fp32_exact(*d_out), dmin_all = fp16_to_fp32_exact(*dmin_out);
    for (int j = 0; j < 8; ++j) {
        uint8_t sc, m;
        if (j < 4) {
            sc = scales12[j] & 63;
            m = scales12[j + 4] & 63;
        } else {
            sc = (uint8_t)((scales12[j + 4] & 0x0f) | ((scales12[j - 4] >> 6) << 4));
            m = (uint8_t)((scales12[j + 4] >> 4) | ((scales12[j] >> 6) << 4));
        }
        const float d = d_all * (float)sc;
        if (d == 0.0f) continue;
        const float dm = dmin_all * (float)m;
        for (int i = 0; i < 32; ++i)
            L[32 * j + i] = (uint8_t)clamp_int(round_nearest((x[32 * j + i] + dm) / d), 0, NMAX);
    }
}

}  // namespace

void quantize_q2_k(const float* src, void* dst, int64_t n) {
    BlockQ2_K* y = static_cast<BlockQ2_K*>(dst);
    for (int64_t b = 0; b < n / QK_K; ++b, src += QK_K) {
        uint8_t L[QK_K], Laux[16];
        float w[16], scales[16], mins[16];
        float max_scale = 0.0f, max_min = 0.0f;
        for (int j = 0; j < 16; ++j) {
            for (int l = 0; l < 16; ++l) w[l] = std::fabs(src[16 * j + l]);
            scales[j] = fit_affine(16, 3, src + 16 * j, w, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, true);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        if (max_scale > 0.0f) {
            const float iscale = 15.0f / max_scale;
            for (int j = 0; j < 16; ++j) y[b].scales[j] = (uint8_t)round_nearest(iscale * scales[j]);
            y[b].d = fp32_to_fp16(max_scale / 15.0f);
        } else {
            for (int j = 0; j < 16; ++j) y[b].scales[j] = 0;
            y[b].d = fp32_to_fp16(0.0f);
        }
        if (max_min > 0.0f) {
            const float iscale = 15.0f / max_min;
            for (int j = 0; j < 16; ++j) y[b].scales[j] |= (uint8_t)(round_nearest(iscale * mins[j]) << 4);
            y[b].dmin = fp32_to_fp16(max_min / 15.0f);
        } else {
            y[b].dmin = fp32_to_fp16(0.0f);
        }
        const float d_all = fp16_to_fp32_exact(y[b].d), dmin_all = fp16_to_fp32_exact(y[b].dmin);
        for (int j = 0; j < 16; ++j) {
            const float d = d_all * (float)(y[b].scales[j] & 0x0f);
            if (d == 0.0f) continue;
            const float dm = dmin_all * (float)(y[b].scales[j] >> 4);
            for (int i = 0; i < 16; ++i)
                L[16 * j + i] = (uint8_t)clamp_int(round_nearest((src[16 * j + i] + dm) / d), 0, 3);
        }
        for (int c = 0; c < QK_K; c += 128)
            for (int l = 0; l < 32; ++l)
                y[b].qs[c / 4 + l] = (uint8_t)(L[c + l] | (L[c + l + 32] << 2) | (L[c + l + 64] << 4) |
                                               (L[c + l + 96] << 6));
    }
}

void quantize_q3_k(const float* src, void* dst, int64_t n) {
    BlockQ3_K* y = static_cast<BlockQ3_K*>(dst);
    for (int64_t b = 0; b < n / QK_K; ++b, src += QK_K) {
        int8_t L[QK_K];
        float scales[16];
        float max_scale = 0.0f, amax = 0.0f;
        for (int j = 0; j < 16; ++j) {
            scales[j] = fit_symmetric_greedy(16, 4, src + 16 * j, L + 16 * j);
            const float a = std::fabs(scales[j]);
            if (a > amax) {
                amax = a;
                max_scale = scales[j];
            }
        }
        std::memset(y[b].scales, 0, 12);
        if (max_scale != 0.0f) {
            const float iscale = -32.0f / max_scale;
            for (int j = 0; j < 16; ++j) {
                // ggml narrows the rounded value to int8 before clamping
                int8_t l = (int8_t)round_nearest(iscale * scales[j]);
                l = (int8_t)(clamp_int(l, -32, 31) + 32);
                if (j < 8)
                    y[b].scales[j] = (uint8_t)(l & 0x0f);
                else
                    y[b].scales[j - 8] |= (uint8_t)((l & 0x0f) << 4);
                l = (int8_t)(l >> 4);
                y[b].scales[j % 4 + 8] |= (uint8_t)(l << (2 * (j / 4)));
            }
            y[b].d = fp32_to_fp16(1.0f / iscale);
        } else {
            y[b].d = fp32_to_fp16(0.0f);
        }
        const float d_all = fp16_to_fp32_exact(y[b].d);
        for (int j = 0; j < 16; ++j) {
            int lo = j < 8 ? (y[b].scales[j] & 0x0f) : (y[b].scales[j - 8] >> 4);
            const int sc = (lo | (((y[b].scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
            const float d = d_all * (float)sc;
            if (d == 0.0f) continue;
            for (int i = 0; i < 16; ++i)
                L[16 * j + i] = (int8_t)(clamp_int(round_nearest(src[16 * j + i] / d), -4, 3) + 4);
        }
        // high bit of element e goes to hmask[e % 32], bit e / 32
        std::memset(y[b].hmask, 0, QK_K / 8);
        for (int e = 0; e < QK_K; ++e) {
            if (L[e] > 3) {
                y[b].hmask[e % 32] |= (uint8_t)(1u << (e / 32));
                L[e] = (int8_t)(L[e] - 4);
            }
        }
        for (int c = 0; c < QK_K; c += 128)
            for (int l = 0; l < 32; ++l)
                y[b].qs[c / 4 + l] = (uint8_t)(L[c + l] | (L[c + l + 32] << 2) | (L[c + l + 64] << 4) |
                                               (L[c + l + 96] << 6));
    }
}

void quantize_q4_k(const float* src, void* dst, int64_t n) {
    BlockQ4_K* y = static_cast<BlockQ4_K*>(dst);
    for (int64_t b = 0; b < n / QK_K; ++b, src += QK_K) {
        uint8_t L[QK_K];
        quantize_affine_k<15>(src, &y[b].d, &y[b].dmin, y[b].scales, L, -1.0f, 20);
        uint8_t* q = y[b].qs;
        for (int c = 0; c < QK_K; c += 64, q += 32)
            for (int l = 0; l < 32; ++l) q[l] = (uint8_t)(L[c + l] | (L[c + l + 32] << 4));
    }
}

void quantize_q5_k(const float* src, void* dst, int64_t n) {
    BlockQ5_K* y = static_cast<BlockQ5_K*>(dst);
    for (int64_t b = 0; b < n / QK_K; ++b, src += QK_K) {
        uint8_t L[QK_K];
        quantize_affine_k<31>(src, &y[b].d, &y[b].dmin, y[b].scales, L, -0.5f, 15);
        std::memset(y[b].qh, 0, QK_K / 8);
        uint8_t* ql = y[b].qs;
        for (int c = 0, pair = 0; c < QK_K; c += 64, ++pair, ql += 32) {
            for (int l = 0; l < 32; ++l) {
                int lo = L[c + l], hi = L[c + l + 32];
                if (lo > 15) {
                    lo -= 16;
                    y[b].qh[l] |= (uint8_t)(1u << (2 * pair));
                }
                if (hi > 15) {
                    hi -= 16;
                    y[b].qh[l] |= (uint8_t)(2u << (2 * pair));
                }
                ql[l] = (uint8_t)(lo | (hi << 4));
            }
        }
    }
}

void quantize_q6_k(const float* src, void* dst, int64_t n) {
    BlockQ6_K* y = static_cast<BlockQ6_K*>(dst);
    for (int64_t b = 0; b < n / QK_K; ++b, src += QK_K) {
        int8_t L[QK_K];
        float scales[16];
        float max_scale = 0.0f, max_abs = 0.0f;
        for (int j = 0; j < 16; ++j) {
            scales[j] = fit_symmetric_weighted(16, 32, src + 16 * j, L + 16 * j);
            const float a = std::fabs(scales[j]);
            if (a > max_abs) {
                max_abs = a;
                max_scale = scales[j];
            }
        }
        if (max_abs < kGroupMaxEps) {
            std::memset(&y[b], 0, sizeof(BlockQ6_K));
            continue;
        }
        const float iscale = -128.0f / max_scale;
        y[b].d = fp32_to_fp16(1.0f / iscale);
        for (int j = 0; j < 16; ++j) {
            const int v = round_nearest(iscale * scales[j]);
            y[b].scales[j] = (int8_t)(v < 127 ? v : 127);
        }
        const float d_all = fp16_to_fp32_exact(y[b].d);
        for (int j = 0; j < 16; ++j) {
            const float d = d_all * (float)y[b].scales[j];
            if (d == 0.0f) continue;
            for (int i = 0; i < 16; ++i)
                L[16 * j + i] = (int8_t)(clamp_int(round_nearest(src[16 * j + i] / d), -32, 31) + 32);
        }
        uint8_t* ql = y[b].ql;
        uint8_t* qh = y[b].qh;
        for (int c = 0; c < QK_K; c += 128, ql += 64, qh += 32) {
            for (int l = 0; l < 32; ++l) {
                const int q1 = L[c + l], q2 = L[c + l + 32], q3 = L[c + l + 64], q4 = L[c + l + 96];
                ql[l] = (uint8_t)((q1 & 0x0f) | ((q3 & 0x0f) << 4));
                ql[l + 32] = (uint8_t)((q2 & 0x0f) | ((q4 & 0x0f) << 4));
                qh[l] = (uint8_t)((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
            }
        }
    }
}

// ---- IQ4_NL / IQ4_XS: the non-linear grid (llama-quantize without a matrix) ----------

namespace {

// Index of the grid value nearest x; between two neighbours a tie goes to the upper one,
// and values past either end take the end (the grid is sorted).
int nearest_grid_index(float x) {
    const int8_t* v = kValuesIQ4NL;
    if (x <= (float)v[0]) return 0;
    if (x >= (float)v[15]) return 15;
    int lo = 0, hi = 15;  // v[lo] <= x < v[hi]
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (x < (float)v[mid]) hi = mid;
        else lo = mid;
    }
    return x - (float)v[hi - 1] < (float)v[hi] - x ? hi - 1 : hi;
}

// One group of 32: the weighted least-squares scale (weights x^2) over 15 candidate
// inverse scales around the one that puts the largest magnitude on the grid's end (-127),
// as ggml's quantize_row_iq4_nl_impl with ntry = 7. Returns the scale (0 for a group of
// near-zeros) and leaves the codes of the first pass in L.
float iq4_group_scale(const float* x, uint8_t* L) {
    float w[32];
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 32; ++j) {
        w[j] = x[j] * x[j];
        const float ax = std::fabs(x[j]);
        if (ax > amax) {
            amax = ax;
            max = x[j];
        }
    }
    if (amax < kGroupMaxEps) return 0.0f;
    const float v0 = (float)kValuesIQ4NL[0];
    float d = -max / v0;
    float id = 1.0f / d;
    float sumqx = 0.0f, sumq2 = 0.0f;
    for (int j = 0; j < 32; ++j) {
        const int l = nearest_grid_index(id * x[j]);
        L[j] = (uint8_t)l;
        const float q = (float)kValuesIQ4NL[l];
        sumqx += w[j] * q * x[j];
        sumq2 += w[j] * q * q;
    }
    d = sumq2 > 0.0f ? sumqx / sumq2 : 0.0f;
    float best = d * sumqx;
    for (int t = -7; t <= 7; ++t) {
        id = (float)(t + kValuesIQ4NL[0]) / max;
        sumqx = sumq2 = 0.0f;
        for (int j = 0; j < 32; ++j) {
            const float q = (float)kValuesIQ4NL[nearest_grid_index(id * x[j])];
            sumqx += w[j] * q * x[j];
            sumq2 += w[j] * q * q;
        }
        if (sumq2 > 0.0f && sumqx * sumqx > best * sumq2) {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    return d;
}

void pack_nibbles(const uint8_t* L, int n, uint8_t* qs) {
    for (int g = 0; g < n / 32; ++g)
        for (int j = 0; j < 16; ++j) qs[16 * g + j] = (uint8_t)(L[32 * g + j] | (L[32 * g + 16 + j] << 4));
}

}  // namespace

void quantize_iq4_nl(const float* src, void* dst, int64_t n) {
    BlockIQ4_NL* y = static_cast<BlockIQ4_NL*>(dst);
    uint8_t L[32];
    for (int64_t b = 0; b < n / QK; ++b, src += QK) {
        const float d = iq4_group_scale(src, L);
        y[b].d = fp32_to_fp16(d);
        const float id = d != 0.0f ? 1.0f / d : 0.0f;  // the codes again, for the final scale
        for (int j = 0; j < 32; ++j) L[j] = (uint8_t)nearest_grid_index(id * src[j]);
        pack_nibbles(L, 32, y[b].qs);
    }
}

void quantize_iq4_xs(const float* src, void* dst, int64_t n) {
    BlockIQ4_XS* y = static_cast<BlockIQ4_XS*>(dst);
    uint8_t L[QK_K];
    for (int64_t b = 0; b < n / QK_K; ++b, src += QK_K) {
        float scales[8], max_scale = 0.0f, amax_scale = 0.0f;
        for (int g = 0; g < 8; ++g) {
            scales[g] = iq4_group_scale(src + 32 * g, L + 32 * g);
            if (std::fabs(scales[g]) > amax_scale) {
                amax_scale = std::fabs(scales[g]);
                max_scale = scales[g];
            }
        }
        // the super-block scale maps the largest group scale to -32 (its sign kept in d)
        const float d = -max_scale / 32.0f;
        y[b].d = fp32_to_fp16(d);
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].scales_h = 0;
        for (int g = 0; g < 8; ++g) {
            const int l = clamp_int(round_nearest(id * scales[g]), -32, 31);
            const float dl = d * (float)l;
            const float idl = dl != 0.0f ? 1.0f / dl : 0.0f;
            for (int j = 0; j < 32; ++j) L[32 * g + j] = (uint8_t)nearest_grid_index(idl * src[32 * g + j]);
            const int u = l + 32;
            if (g % 2 == 0) y[b].scales_l[g / 2] = (uint8_t)(u & 0x0f);
            else y[b].scales_l[g / 2] |= (uint8_t)((u & 0x0f) << 4);
            y[b].scales_h |= (uint16_t)((u >> 4) << (2 * g));
        }
        pack_nibbles(L, QK_K, y[b].qs);
    }
}

}  // namespace ember
