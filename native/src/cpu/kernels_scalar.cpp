// Scalar reference kernels. Until a type has an integer-dot kernel, its weight row is
// dequantized to F32 and dotted with F32 activations.
#include <vector>

#include "cpu/kernels.h"
#include "quant/types.h"

namespace ember {

namespace {

void vec_dot_f32(int64_t n, float* s, const void* w, const void* a) {
    *s = dot_f32(static_cast<const float*>(w), static_cast<const float*>(a), n);
}

template <DType T>
void vec_dot_dequant(int64_t n, float* s, const void* w, const void* a) {
    thread_local std::vector<float> row;  // grows to the longest row once per thread
    if ((int64_t)row.size() < n) row.resize((size_t)n);
    type_traits((uint32_t)T)->dequantize(w, row.data(), n);
    *s = dot_f32(row.data(), static_cast<const float*>(a), n);
}

}  // namespace

void register_scalar_kernels(KernelTable& t) {
    t[(int)DType::F32] = {DType::F32, nullptr, vec_dot_f32};
    t[(int)DType::F16] = {DType::F32, nullptr, vec_dot_dequant<DType::F16>};
    t[(int)DType::BF16] = {DType::F32, nullptr, vec_dot_dequant<DType::BF16>};
    t[(int)DType::Q4_0] = {DType::F32, nullptr, vec_dot_dequant<DType::Q4_0>};
    t[(int)DType::Q4_1] = {DType::F32, nullptr, vec_dot_dequant<DType::Q4_1>};
    t[(int)DType::Q5_0] = {DType::F32, nullptr, vec_dot_dequant<DType::Q5_0>};
    t[(int)DType::Q5_1] = {DType::F32, nullptr, vec_dot_dequant<DType::Q5_1>};
    t[(int)DType::Q8_0] = {DType::F32, nullptr, vec_dot_dequant<DType::Q8_0>};
    t[(int)DType::Q2_K] = {DType::F32, nullptr, vec_dot_dequant<DType::Q2_K>};
    t[(int)DType::Q3_K] = {DType::F32, nullptr, vec_dot_dequant<DType::Q3_K>};
    t[(int)DType::Q4_K] = {DType::F32, nullptr, vec_dot_dequant<DType::Q4_K>};
    t[(int)DType::Q5_K] = {DType::F32, nullptr, vec_dot_dequant<DType::Q5_K>};
    t[(int)DType::Q6_K] = {DType::F32, nullptr, vec_dot_dequant<DType::Q6_K>};
    t[(int)DType::Q8_K] = {DType::F32, nullptr, vec_dot_dequant<DType::Q8_K>};
}

}  // namespace ember
