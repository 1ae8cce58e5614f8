// The barrier plan (ops.h: barrier_plan): where the CPU's threads must meet between the
// nodes of a graph, from the byte ranges each node reads and writes.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "cpu/ops.h"

namespace ember {

namespace {

struct ByteRange {
    const uint8_t* lo;
    const uint8_t* hi;  // one past the last byte
    bool overlaps(const ByteRange& o) const { return lo < o.hi && o.lo < hi; }
};

// The bytes a tensor's elements span, whatever its strides.
ByteRange extent(const Tensor* t) {
    const DTypeInfo* tt = dtype_info(t->type);
    const uint8_t* lo = static_cast<const uint8_t*>(t->data);
    size_t span = tt->block_size == 1 ? (size_t)(t->ne[0] - 1) * t->nb[0] + (size_t)tt->block_bytes
                                      : (size_t)dtype_row_bytes(*tt, t->ne[0]);
    for (int d = 1; d < 4; ++d) span += (size_t)(t->ne[d] - 1) * t->nb[d];
    return {lo, lo + span};
}

}  // namespace

std::vector<uint8_t> barrier_plan(const Graph& graph, Isa isa) {
    const auto& nodes = graph.nodes();
    std::vector<uint8_t> plan(nodes.size(), 0);
    // What the nodes since the last barrier produced, wrote and read.
    std::vector<const Tensor*> produced;
    std::vector<ByteRange> written, read;
    bool work_in_use = false;  // a product since the last barrier reads the work buffer
    const Tensor* converted = nullptr;
    DType converted_type = DType::F32;
    auto clear = [&] {
        produced.clear();
        written.clear();
        read.clear();
        work_in_use = false;
    };
    bool first = true;
    for (size_t i = 0; i < nodes.size(); ++i) {
        const Tensor* t = nodes[i];
        if (t->op == Op::VIEW || t->op == Op::NONE) continue;
        std::vector<ByteRange> reads, writes;
        bool need = false;
        for (const Tensor* s : t->src) {
            if (!s) continue;
            const Tensor* st = storage_of(s);
            for (const Tensor* p : produced) need |= p == st;  // read after write
            if (st->op != Op::KV_STORE && s->data) reads.push_back(extent(s));
        }
        if (t->op == Op::KV_STORE) {
            writes.push_back(extent(t->src[2]));
            writes.push_back(extent(t->src[3]));
        } else if (t->data) {
            writes.push_back(extent(t));
        }
        // the recurrent ops overwrite their state leaf as well
        if (t->op == Op::SSM_CONV) writes.push_back(extent(t->src[2]));
        if (t->op == Op::DELTA_NET) writes.push_back(extent(t->src[4]));
        for (const ByteRange& r : reads)
            for (const ByteRange& w : written) need |= r.overlaps(w);  // aliasing views
        for (const ByteRange& w : writes) {
            for (const ByteRange& o : written) need |= w.overlaps(o);  // write after write
            for (const ByteRange& o : read) need |= w.overlaps(o);     // write after read (reused buffers)
        }
        bool uses_work = false, conv = false;
        if (t->op == Op::MUL_MAT) {
            conv = mul_mat_converts(t, isa, converted, converted_type);
            uses_work = conv || dot_kernels(t->src[0]->type, isa).act_type != DType::F32;
            need |= conv && work_in_use;  // converting would overwrite what others still read
        } else if (t->op == Op::MUL_MAT_ID) {
            // always converts (into its own layout), so what the next product finds there is unknown
            conv = uses_work = true;
            need |= work_in_use;
            converted = nullptr;
        }
        if (need && !first) {
            plan[i] = 1;
            clear();
        }
        first = false;
        // A conversion ends with a barrier of its own, except a one-row one (decoding),
        // which each thread makes for itself into its own slot.
        if (conv && (t->op == Op::MUL_MAT_ID ? t->src[2] : t->src[1])->ne[1] != 1) clear();
        produced.push_back(t);
        written.insert(written.end(), writes.begin(), writes.end());
        read.insert(read.end(), reads.begin(), reads.end());
        work_in_use |= uses_work;
    }
    return plan;
}

}  // namespace ember
