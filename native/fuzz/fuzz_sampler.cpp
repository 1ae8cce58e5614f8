// The sampler chain on arbitrary logits (NaN, inf, all equal, denormals) and parameters
// (negative, zero, NaN, huge). The first 40 bytes hold the parameters, a mode and the
// length of a history of accepted tokens (34 bytes used, the rest reserved), then float logits. Whatever comes in, the drawn id must be a valid
// index into the logits.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "sample/sampler.h"

namespace {

template <typename T>
T take(const uint8_t*& p) {
    T v;
    std::memcpy(&v, p, sizeof v);
    p += sizeof v;
    return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const size_t header = 40;
    if (size < header + 4) return 0;
    const uint8_t* p = data;
    ember::SamplerParams sp;
    sp.temperature = take<float>(p);
    sp.top_k = take<int32_t>(p);
    sp.top_p = take<float>(p);
    sp.min_p = take<float>(p);
    sp.repeat_penalty = take<float>(p);
    sp.presence_penalty = take<float>(p);
    sp.frequency_penalty = take<float>(p);
    sp.penalty_last_n = take<int16_t>(p);
    sp.seed = take<uint16_t>(p);
    const uint8_t mode = take<uint8_t>(p);
    const uint8_t n_history = take<uint8_t>(p);
    const int32_t n_vocab = (int32_t)((size - header) / 4);
    std::vector<float> logits(n_vocab);
    std::memcpy(logits.data(), data + header, (size_t)n_vocab * 4);
    if (mode & 1) logits.assign(n_vocab, logits[0]);  // all equal (possibly NaN or inf)
    try {
        ember::Sampler s(sp);
        for (int i = 0; i < n_history; ++i) s.accept((int32_t)((i * 2654435761u) % (uint32_t)(n_vocab + 3)) - 1);
        for (int step = 0; step < 1 + (mode >> 5); ++step) {
            const int32_t id = s.sample(logits.data(), n_vocab);
            if (id < 0 || id >= n_vocab) __builtin_trap();
            s.accept(id);
        }
    } catch (const ember::Error&) {
    }
    return 0;
}
