// CPU kernels: the scalar reference implementations every SIMD path is tested against.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/tensor.h"

namespace ember {

constexpr int kMulMatRows = 4;  // weight rows dequantized together and reused across tokens

float dot_f32(const float* a, const float* b, int64_t n);
float dot_f32_f16(const float* a, const uint16_t* b, int64_t n);
// y += a * x (x in F16)
void axpy_f16(float* y, const uint16_t* x, float a, int64_t n);

// out[M, N] = w[K, M]^T x[K, N]; rows of w split across threads.
void mul_mat(const Tensor* w, const Tensor* x, const Tensor* out, int ith, int nth, float* scratch,
             size_t scratch_floats);

}  // namespace ember
