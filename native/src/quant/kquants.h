// Reference quantizers of the K-quants, byte-identical to llama.cpp's (see kquants.cpp).
#pragma once

#include <cstdint>

namespace ember {

void quantize_q2_k(const float* src, void* dst, int64_t n);
void quantize_q3_k(const float* src, void* dst, int64_t n);
void quantize_q4_k(const float* src, void* dst, int64_t n);
void quantize_q5_k(const float* src, void* dst, int64_t n);
void quantize_q6_k(const float* src, void* dst, int64_t n);

}  // namespace ember
