#include "cpu/kernels.h"

#include "core/error.h"
#include "core/fp16.h"

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

void mul_mat(const Tensor* w, const Tensor* x, const Tensor* out, int ith, int nth, float* scratch,
             size_t scratch_floats) {
    const int64_t K = w->ne[0], M = w->ne[1], N = x->ne[1];
    const TypeTraits* tt = type_traits((uint32_t)w->type);
    if ((size_t)(kMulMatRows * K) > scratch_floats) fail(EMBER_ERR_INTERNAL, "mul_mat scratch too small");
    // split whole groups of rows so each thread dequantizes what it multiplies
    const int64_t groups = (M + kMulMatRows - 1) / kMulMatRows;
    const int64_t per = (groups + nth - 1) / nth;
    const int64_t g0 = per * ith, g1 = g0 + per < groups ? g0 + per : groups;
    for (int64_t g = g0; g < g1; ++g) {
        const int64_t r0 = g * kMulMatRows;
        const int64_t nr = r0 + kMulMatRows <= M ? kMulMatRows : M - r0;
        const float* rows[kMulMatRows];
        for (int64_t r = 0; r < nr; ++r) {
            if (w->type == DType::F32) {
                rows[r] = w->row<float>(r0 + r);
            } else {
                tt->dequantize(w->row(r0 + r), scratch + r * K, K);
                rows[r] = scratch + r * K;
            }
        }
        for (int64_t j = 0; j < N; ++j) {
            const float* xj = x->row<float>(j);
            float* oj = out->row<float>(j);
            for (int64_t r = 0; r < nr; ++r) oj[r0 + r] = dot_f32(rows[r], xj, K);
        }
    }
}

}  // namespace ember
