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
    // The batch [pos0, pos0 + n) was computed and stored; keep: a piece of a prompt, whose
    // end is worth restarting from later.
    virtual void stored(int32_t pos0, int32_t n, bool keep) {
        (void)pos0;
        (void)n;
        (void)keep;
    }
    // The earliest position a decode may restart from, given what is stored (0: any).
    virtual int32_t rewind_limit() const = 0;
    // The latest position at or before pos a decode may start at and keep what precedes it
    // (0 always qualifies): a cache that keeps every row from rewind_limit() on allows any
    // of those; a recurrent state only the positions it holds a state for.
    virtual int32_t restart_point(int32_t pos) const { return pos >= rewind_limit() ? pos : 0; }
};

}  // namespace ember
