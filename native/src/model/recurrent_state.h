// The recurrent layers' memory (Qwen3.5's gated delta-net blocks): per layer, the
// convolution's last d_conv - 1 inputs per channel (F32 [d_conv - 1, channels]) and the
// delta rule's state (F32 [S, S, value heads]). Every token overwrites them, so unlike the
// KV cache they cannot be cut back to an earlier position: a rewind restores a snapshot.
//
// Snapshots (DESIGN.md, "recurrent state"): after every successful piece of a prompt (each
// n_batch piece of a long one, and everything but the last token: Context::decode runs a
// prompt's last token on its own) the state is copied into one of a fixed number of slots,
// the least recently used replaced first. A decode may start at the live state's
// position, at a snapshot's, or at 0; restart_point tells the caller the latest of those
// at or before where it would like to start, and storing() restores that snapshot. A
// generated reply's tokens (one per decode) take none: regenerating a reply restarts just
// before the prompt's last token, editing the last message at the latest snapshot before
// the edit. Memory: (1 + slots) copies of bytes(),
// reserved once with the context (a slot's pages are committed when it is first used);
// nothing is allocated while decoding.
#pragma once

#include <cstdint>
#include <vector>

#include "core/arena.h"
#include "core/tensor.h"
#include "model/memory.h"
#include "model/model.h"

namespace ember {

class RecurrentState : public LayerMemory {
public:
    static constexpr int32_t kDefaultSnapshots = 4;

    // Shapes and memory (zeroed) at once: the state always lives on the host.
    RecurrentState(const HParams& h, int32_t n_snapshots);

    std::vector<Tensor> conv, ssm;  // per layer: the graphs' state leaves (empty: not recurrent)

    size_t bytes() const { return bytes_; }  // one copy of every layer's state
    // bytes() of a state for h, before one is made (model/footprint.cpp's memory check)
    static size_t bytes_for(const HParams& h);
    int32_t n_snapshots() const { return (int32_t)snaps_.size(); }
    // positions of the snapshots held, ascending (tests, traces)
    std::vector<int32_t> snapshot_positions() const;

    void storing(int32_t pos0, int32_t n) override;
    void stored(int32_t pos0, int32_t n, bool keep) override;
    int32_t rewind_limit() const override { return 0; }
    int32_t restart_point(int32_t pos) const override;

private:
    struct Slot {
        int32_t pos = -1;  // -1: empty
        uint64_t when = 0;
    };
    uint8_t* copy(int32_t i) { return storage_.data() + (size_t)i * bytes_; }  // 0: live, 1..: slots

    size_t bytes_ = 0;
    AlignedBuffer storage_;
    int32_t pos_ = 0;  // the position the live state is at (-1: unknown, after a failed batch)
    std::vector<Slot> snaps_;
    uint64_t clock_ = 0;
};

}  // namespace ember
