// What a context keeps of the tokens it has seen, between decodes. Attention layers keep
// their keys and values (model/kv_cache.h); a recurrent layer (a gated delta-net, a short
// convolution) keeps a state that every token overwrites, which cannot be cut back to an
// earlier position, only restored from a snapshot. The context asks each of its memories
// how far back a decode may restart, and tells them what was stored and what forgotten.
#pragma once

#include <cstdint>

namespace ember {

class LayerMemory {
public:
    virtual ~LayerMemory() = default;
    // A decode of positions [pos0, pos0 + n) is about to store them (before it computes:
    // a cancelled batch may already have stored some of its rows). pos0 == 0 starts over.
    virtual void storing(int32_t pos0, int32_t n) = 0;
    // The earliest position a decode may restart from, given what is stored (0: any).
    virtual int32_t rewind_limit() const = 0;
};

}  // namespace ember
