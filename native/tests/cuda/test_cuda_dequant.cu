// The CUDA kernels' dequantizers (cuda/dequant.cuh), run on the host, against the
// reference dequantizers of every weight type: random rows quantized by the reference
// quantizers, each 32-element sub-block read whole and in the pieces the tiled product
// reads (8 elements at offsets 0, 8, 16, 24). Runs without a GPU.
#include <cmath>
#include <cstring>
#include <cstdio>
#include <random>
#include <vector>

#include "core/fp16.h"
#include "cuda/dequant.cuh"
#include "quant/types.h"

using namespace ember;

template <int T>
int check(int64_t k, std::mt19937& rng) {
    const TypeTraits* tt = type_traits((uint32_t)T);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> src((size_t)k), ref((size_t)k);
    for (auto& x : src) x = u(rng);
    std::vector<uint8_t> row((size_t)row_bytes(*tt, k));
    if (tt->quantize) {
        tt->quantize(src.data(), row.data(), k);
    } else {  // no reference quantizer (IQ4_NL, IQ4_XS): random blocks with a finite f16 d first
        for (auto& b : row) b = (uint8_t)(rng() & 0xff);
        for (int64_t i = 0; i < k / tt->block_size; ++i) {
            const uint16_t h = fp32_to_fp16(0.01f * u(rng));
            memcpy(row.data() + i * tt->block_bytes, &h, 2);
        }
    }
    tt->dequantize(row.data(), ref.data(), k);
    int bad = 0;
    double worst = 0;
    for (int64_t s = 0; s < k / 32; ++s) {
        float whole[32], part[32];
        cuda::dq<T>(row.data(), s, 0, 32, whole);
        for (int p = 0; p < 32; p += 8) cuda::dq<T>(row.data(), s, p, 8, part + p);
        for (int l = 0; l < 32; ++l) {
            const float want = ref[(size_t)(s * 32 + l)];
            const double err = std::fabs((double)whole[l] - want) / std::fmax(1e-3, std::fabs(want));
            worst = std::fmax(worst, err);
            if (err > 1e-6 || whole[l] != part[l]) ++bad;
        }
    }
    std::printf("%s %-5s k=%lld worst relative error %.2g\n", bad ? "FAIL" : "ok  ", tt->name, (long long)k, worst);
    return bad ? 1 : 0;
}

int main() {
    std::mt19937 rng(7);
    int failures = 0;
    for (int64_t k : {256, 4096}) {
        failures += check<(int)DType::F32>(k, rng);
        failures += check<(int)DType::F16>(k, rng);
        failures += check<(int)DType::BF16>(k, rng);
        failures += check<(int)DType::Q4_0>(k, rng);
        failures += check<(int)DType::Q4_1>(k, rng);
        failures += check<(int)DType::Q5_0>(k, rng);
        failures += check<(int)DType::Q5_1>(k, rng);
        failures += check<(int)DType::Q8_0>(k, rng);
        failures += check<(int)DType::Q2_K>(k, rng);
        failures += check<(int)DType::Q3_K>(k, rng);
        failures += check<(int)DType::Q4_K>(k, rng);
        failures += check<(int)DType::Q5_K>(k, rng);
        failures += check<(int)DType::Q6_K>(k, rng);
        failures += check<(int)DType::MXFP4>(k, rng);
        failures += check<(int)DType::IQ4_NL>(k, rng);
        failures += check<(int)DType::IQ4_XS>(k, rng);
    }
    std::printf("%s\n", failures ? "FAILED" : "all dequantizers agree with the reference");
    return failures ? 1 : 0;
}
