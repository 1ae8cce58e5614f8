#include "model/recurrent_state.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/error.h"

namespace ember {

namespace {

// a layer's convolution state, then its delta-rule state, each from an aligned offset
size_t conv_bytes(const HParams& h) { return align_up((size_t)(h.ssm_d_conv - 1) * (size_t)h.ssm_conv_channels() * sizeof(float)); }
size_t ssm_bytes(const HParams& h) {  // 0 for a convolution-only block (LFM2)
    return align_up((size_t)h.ssm_d_state * (size_t)h.ssm_d_state * (size_t)h.ssm_dt_rank * sizeof(float));
}

}  // namespace

size_t RecurrentState::bytes_for(const HParams& h) {
    if (!h.has_recurrent()) return 0;
    size_t n = 0;
    for (int32_t il = 0; il < h.n_layer; ++il)
        if (h.is_recurrent(il)) n += conv_bytes(h) + ssm_bytes(h);
    return n;
}

RecurrentState::RecurrentState(const HParams& h, int32_t n_snapshots) {
    conv.resize((size_t)h.n_layer);
    ssm.resize((size_t)h.n_layer);
    snaps_.resize((size_t)std::max(0, n_snapshots));
    if (!h.has_recurrent()) return;
    const int64_t C = h.ssm_conv_channels(), S = h.ssm_d_state, H = h.ssm_dt_rank;
    std::vector<size_t> at((size_t)h.n_layer * 2);
    for (int32_t il = 0; il < h.n_layer; ++il) {
        if (!h.is_recurrent(il)) continue;
        Tensor& c = conv[(size_t)il];
        c.type = DType::F32;
        c.ne[0] = h.ssm_d_conv - 1;
        c.ne[1] = C;
        Tensor& s = ssm[(size_t)il];
        s.type = DType::F32;
        s.ne[0] = S;
        s.ne[1] = S;
        s.ne[2] = H;
        for (Tensor* t : {&c, &s}) {
            tensor_set_contiguous_strides(t);
            t->layer = il;
        }
        c.set_name(("cache_conv_l" + std::to_string(il)).c_str());
        if (S > 0) s.set_name(("cache_ssm_l" + std::to_string(il)).c_str());
        at[(size_t)il * 2] = bytes_;
        bytes_ += conv_bytes(h);
        at[(size_t)il * 2 + 1] = bytes_;
        bytes_ += ssm_bytes(h);
    }
    if (bytes_ != bytes_for(h)) fail(EMBER_ERR_INTERNAL, "the recurrent state's layout differs from bytes_for");
    // the live state's pages committed now; a snapshot slot's only when a snapshot is first
    // taken into it (an unused slot costs address space, not memory)
    storage_.resize(bytes_ * (1 + snaps_.size()));
    std::memset(storage_.data(), 0, bytes_);
    for (int32_t il = 0; il < h.n_layer; ++il) {
        if (!h.is_recurrent(il)) continue;
        conv[(size_t)il].data = storage_.data() + at[(size_t)il * 2];
        if (S > 0) ssm[(size_t)il].data = storage_.data() + at[(size_t)il * 2 + 1];
    }
}

std::vector<int32_t> RecurrentState::snapshot_positions() const {
    std::vector<int32_t> out;
    for (const Slot& s : snaps_)
        if (s.pos >= 0) out.push_back(s.pos);
    std::sort(out.begin(), out.end());
    return out;
}

int32_t RecurrentState::restart_point(int32_t pos) const {
    if (pos <= 0) return 0;
    if (pos == pos_) return pos;
    int32_t best = 0;
    for (const Slot& s : snaps_)
        if (s.pos <= pos && s.pos > best) best = s.pos;
    return best;
}

void RecurrentState::storing(int32_t pos0, int32_t n) {
    (void)n;
    if (bytes_ == 0) return;
    if (pos0 != pos_) {
        if (pos0 == 0) {
            std::memset(copy(0), 0, bytes_);
        } else {
            Slot* from = nullptr;
            for (Slot& s : snaps_)
                if (s.pos == pos0) from = &s;
            if (!from)
                fail(EMBER_ERR_INVALID_ARGUMENT, "position " + std::to_string(pos0) +
                                                     " has no recurrent-state snapshot; decode from a restart point");
            std::memcpy(copy(0), copy((int32_t)(from - snaps_.data()) + 1), bytes_);
            from->when = ++clock_;
        }
    }
    pos_ = -1;  // until the batch is done: a cancelled one leaves the state in between
}

void RecurrentState::stored(int32_t pos0, int32_t n, bool keep) {
    if (bytes_ == 0) return;
    pos_ = pos0 + n;
    if (!keep || snaps_.empty()) return;
    // a slot already at this position, else an empty one, else the least recently used
    Slot* to = nullptr;
    for (Slot& s : snaps_)
        if (s.pos == pos_) to = &s;
    if (!to)
        for (Slot& s : snaps_)
            if (!to || s.when < to->when) to = &s;
    std::memcpy(copy((int32_t)(to - snaps_.data()) + 1), copy(0), bytes_);
    to->pos = pos_;
    to->when = ++clock_;
}

}  // namespace ember
