// Scalar reference pieces shared by the kernels and their tests: the activation
// converters (bit-exact at every ISA level) and integer unpacking of weight blocks.
#pragma once

#include <cstdint>

namespace ember {

// F32 -> binary16, round to nearest even (the activations of F16 weights, as in ggml:
// half the bytes per load, and the products then match llama.cpp's).
void convert_row_f16_ref(const float* x, void* y, int64_t n);
// F32 -> 8-bit activation blocks, round to nearest even, |q| <= 127.
void quantize_row_q8_0_ref(const float* x, void* y, int64_t n);
void quantize_row_q8_1_ref(const float* x, void* y, int64_t n);  // + s = d * sum(q)
void quantize_row_q8_k_ref(const float* x, void* y, int64_t n);  // + bsums of each 16

// One block's integer values (w = d * q, or d * q + m for the _1 types).
void unpack_q4_0(const void* blk, int8_t q[32]);
void unpack_q4_1(const void* blk, int8_t q[32]);
void unpack_q5_0(const void* blk, int8_t q[32]);
void unpack_q5_1(const void* blk, int8_t q[32]);
// The 4-bit table types: the codes' table values (MXFP4's doubled E2M1, IQ4_NL's grid);
// w = scale * q with MXFP4's scale e8m0_to_fp32_half(e), IQ4_NL's d.
void unpack_mxfp4(const void* blk, int8_t q[32]);
void unpack_iq4_nl(const void* blk, int8_t q[32]);
// IQ4_XS: w[e] = d * sc[g] * q[e], eight groups of 32
void unpack_iq4_xs(const void* blk, int8_t q[256], int sc[8]);
// K-quants: w[e] = d * sc[g] * q[e] - dmin * mn[g] (groups of 16, or 32 for Q4_K/Q5_K).
void unpack_q2_k(const void* blk, int8_t q[256], int sc[16], int mn[16]);
void unpack_q3_k(const void* blk, int8_t q[256], int sc[16]);
void unpack_q4_k(const void* blk, int8_t q[256], int sc[8], int mn[8]);
void unpack_q5_k(const void* blk, int8_t q[256], int sc[8], int mn[8]);
void unpack_q6_k(const void* blk, int8_t q[256], int sc[16]);
void k_scale_min_ref(const uint8_t* s, int j, int* sc, int* m);

}  // namespace ember
