// Reference quantizers of the K-quants and the IQ4 types, byte-identical to llama.cpp's (see kquants.cpp).
#pragma once

#include <cstdint>

namespace ember {

void quantize_q2_k(const float* src, void* dst, int64_t n);
void quantize_q3_k(const float* src, void* dst, int64_t n);
void quantize_q4_k(const float* src, void* dst, int64_t n);
void quantize_q5_k(const float* src, void* dst, int64_t n);
void quantize_q6_k(const float* src, void* dst, int64_t n);
// IQ4_NL / IQ4_XS as llama-quantize makes them without an importance matrix (ggml's
// quantize_iq4_nl / quantize_iq4_xs: a search over 15 scales per 32-group)
void quantize_iq4_nl(const float* src, void* dst, int64_t n);
void quantize_iq4_xs(const float* src, void* dst, int64_t n);

}  // namespace ember
