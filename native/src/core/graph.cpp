#include "core/graph.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <iterator>
#include <string>
#include <unordered_map>

#include "core/arena.h"
#include "core/error.h"

namespace ember {

namespace {

void check(bool ok, const char* what) {
    if (!ok) fail(EMBER_ERR_INTERNAL, std::string("graph: ") + what);
}

// Free-list allocator over offsets of one buffer: best fit, merging neighbours.
class OffsetAllocator {
public:
    size_t allocate(size_t size) {
        size = align_up(size);
        size_t best = free_.size();
        for (size_t i = 0; i < free_.size(); ++i)
            if (free_[i].size >= size && (best == free_.size() || free_[i].size < free_[best].size))
                best = i;
        if (best < free_.size()) {
            size_t off = free_[best].offset;
            free_[best].offset += size;
            free_[best].size -= size;
            if (free_[best].size == 0) free_.erase(free_.begin() + (ptrdiff_t)best);
            return off;
        }
        // grow the top; absorb a free block that ends at the top
        if (!free_.empty() && free_.back().offset + free_.back().size == top_) {
            size_t off = free_.back().offset;
            free_.pop_back();
            top_ = off + size;
            return off;
        }
        size_t off = top_;
        top_ += size;
        return off;
    }
    void release(size_t offset, size_t size) {
        size = align_up(size);
        Block b{offset, size};
        auto it = std::lower_bound(free_.begin(), free_.end(), b,
                                   [](const Block& x, const Block& y) { return x.offset < y.offset; });
        it = free_.insert(it, b);
        // merge with the next, then the previous
        if (it + 1 != free_.end() && it->offset + it->size == (it + 1)->offset) {
            it->size += (it + 1)->size;
            free_.erase(it + 1);
        }
        if (it != free_.begin() && (it - 1)->offset + (it - 1)->size == it->offset) {
            (it - 1)->size += it->size;
            free_.erase(it);
        }
    }
    size_t peak() const { return top_; }

private:
    struct Block {
        size_t offset, size;
    };
    std::vector<Block> free_;
    size_t top_ = 0;
};

}  // namespace

Tensor* Graph::new_tensor(DType type, const int64_t ne[4]) {
    tensors_.emplace_back();
    Tensor* t = &tensors_.back();
    t->type = type;
    for (int i = 0; i < 4; ++i) t->ne[i] = ne[i];
    tensor_set_contiguous_strides(t);
    return t;
}

Tensor* Graph::new_op(Op op, DType type, const int64_t ne[4], std::initializer_list<Tensor*> srcs) {
    Tensor* t = new_tensor(type, ne);
    t->op = op;
    int i = 0;
    for (Tensor* s : srcs) t->src[i++] = s;
    return t;
}

Tensor* Graph::leaf(DType type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3, void* data,
                    const char* name) {
    const int64_t ne[4] = {ne0, ne1, ne2, ne3};
    Tensor* t = new_tensor(type, ne);
    t->data = data;
    if (name) t->set_name(name);
    return t;
}

Tensor* Graph::view(Tensor* a, const int64_t ne[4], const size_t nb[4], size_t offset) {
    Tensor* t = new_op(Op::VIEW, a->type, ne, {a});
    for (int i = 0; i < 4; ++i) t->nb[i] = nb[i];
    t->view_offset = offset;
    if (a->data) t->data = static_cast<uint8_t*>(a->data) + offset;
    return t;
}

Tensor* Graph::reshape(Tensor* a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3) {
    check(a->is_contiguous(), "reshape of a non-contiguous tensor");
    check(ne0 * ne1 * ne2 * ne3 == a->n_elements(), "reshape changes the element count");
    const int64_t ne[4] = {ne0, ne1, ne2, ne3};
    Tensor tmp;
    tmp.type = a->type;
    for (int i = 0; i < 4; ++i) tmp.ne[i] = ne[i];
    tensor_set_contiguous_strides(&tmp);
    return view(a, ne, tmp.nb, 0);
}

Tensor* Graph::column(Tensor* a, int64_t i) {
    check(i >= 0 && i < a->ne[1] && a->ne[2] == 1 && a->ne[3] == 1, "column out of range");
    const int64_t ne[4] = {a->ne[0], 1, 1, 1};
    const size_t nb[4] = {a->nb[0], a->nb[1], a->nb[1], a->nb[1]};
    return view(a, ne, nb, (size_t)i * a->nb[1]);
}

Tensor* Graph::transpose(Tensor* a) {
    const int64_t ne[4] = {a->ne[1], a->ne[0], a->ne[2], a->ne[3]};
    const size_t nb[4] = {a->nb[1], a->nb[0], a->nb[2], a->nb[3]};
    return view(a, ne, nb, 0);
}

Tensor* Graph::get_rows(Tensor* table, Tensor* ids) {
    check(ids->type == DType::I32 && ids->ne[1] == 1, "get_rows ids must be an I32 vector");
    const int64_t ne[4] = {table->ne[0], ids->ne[0], 1, 1};
    return new_op(Op::GET_ROWS, DType::F32, ne, {table, ids});
}

Tensor* Graph::rms_norm_mul(Tensor* x, Tensor* weight, float eps) {
    check(x->type == DType::F32 && weight->type == DType::F32, "rms_norm_mul wants F32");
    check(weight->ne[0] == x->ne[0] && weight->n_rows() == 1, "rms_norm_mul weight shape");
    Tensor* t = new_op(Op::RMS_NORM_MUL, DType::F32, x->ne, {x, weight});
    t->fparams[0] = eps;
    return t;
}

Tensor* Graph::mul_mat(Tensor* w, Tensor* x) {
    check(w->ne[0] == x->ne[0], "mul_mat inner dimensions differ");
    check(x->type == DType::F32 && w->ne[2] == 1 && w->ne[3] == 1 && x->ne[2] == 1 && x->ne[3] == 1,
          "mul_mat wants a 2-D weight and F32 activations");
    const int64_t ne[4] = {w->ne[1], x->ne[1], 1, 1};
    return new_op(Op::MUL_MAT, DType::F32, ne, {w, x});
}

Tensor* Graph::moe_route(Tensor* logits, Tensor* bias, int32_t k, ExpertGating gating) {
    check(logits->type == DType::F32 && logits->ne[2] == 1 && logits->ne[3] == 1, "moe_route wants F32 [n_expert, N]");
    check(k > 0 && k <= logits->ne[0], "moe_route: k must be in 1..n_expert");
    check(!bias || (bias->type == DType::F32 && bias->ne[0] == logits->ne[0] && bias->n_rows() == 1),
          "moe_route bias shape");
    const int64_t ne[4] = {k, logits->ne[1], 1, 1};
    Tensor* t = new_op(Op::MOE_ROUTE, DType::I32, ne, {logits, bias});
    t->iparams[0] = k;
    t->iparams[1] = (int32_t)gating;
    return t;
}

Tensor* Graph::moe_weights(Tensor* logits, Tensor* ids, ExpertGating gating, bool normalise, float scale,
                           Tensor* expert_scale) {
    check(ids->op == Op::MOE_ROUTE && ids->src[0] == logits, "moe_weights wants the ids routed from these logits");
    check(!expert_scale || (expert_scale->type == DType::F32 && expert_scale->ne[0] == logits->ne[0] &&
                            expert_scale->n_rows() == 1),
          "moe_weights expert_scale must be F32 [n_expert]");
    Tensor* t = new_op(Op::MOE_WEIGHTS, DType::F32, ids->ne, {logits, ids, expert_scale});
    t->iparams[1] = (int32_t)gating;
    t->iparams[2] = normalise ? 1 : 0;
    t->fparams[0] = scale;
    return t;
}

Tensor* Graph::mul_mat_id(Tensor* w, Tensor* x, Tensor* ids, Tensor* bias) {
    const int64_t k = ids->ne[0], N = ids->ne[1];
    check(ids->type == DType::I32 && ids->ne[2] == 1, "mul_mat_id ids must be I32 [k, N]");
    check(w->ne[0] == x->ne[0] && w->ne[3] == 1, "mul_mat_id inner dimensions differ");
    if (x->ne[2] == 1 && x->ne[1] == N) x = reshape(x, x->ne[0], 1, N);  // [K, N]: one row for every expert
    check(x->type == DType::F32 && (x->ne[1] == 1 || x->ne[1] == k) && x->ne[2] == N && x->ne[3] == 1,
          "mul_mat_id wants F32 activations [K, 1 or k, N]");
    check(x->nb[0] == sizeof(float), "mul_mat_id activations need contiguous rows");
    check(!bias || (bias->type == DType::F32 && bias->ne[0] == w->ne[1] && bias->ne[1] == w->ne[2]),
          "mul_mat_id bias shape");
    const int64_t ne[4] = {w->ne[1], k, N, 1};
    return new_op(Op::MUL_MAT_ID, DType::F32, ne, {w, x, ids, bias});
}

Tensor* Graph::moe_sum(Tensor* y, Tensor* weights) {
    check(y->type == DType::F32 && weights->type == DType::F32, "moe_sum wants F32");
    check(weights->ne[0] == y->ne[1] && weights->ne[1] == y->ne[2] && y->ne[3] == 1, "moe_sum shapes");
    const int64_t ne[4] = {y->ne[0], y->ne[2], 1, 1};
    return new_op(Op::MOE_SUM, DType::F32, ne, {y, weights});
}

Tensor* Graph::ssm_conv(Tensor* x, Tensor* w, Tensor* state, bool silu) {
    check(x->type == DType::F32 && state->type == DType::F32, "ssm_conv wants F32 inputs and state");
    check(w->type == DType::F32 || w->type == DType::F16, "ssm_conv kernel must be F32 or F16");
    check(x->ne[2] == 1 && x->ne[3] == 1 && x->nb[0] == sizeof(float), "ssm_conv input [C, N]");
    const int64_t C = x->ne[0], K = w->ne[0];
    check(K >= 2 && w->ne[1] == C && w->ne[2] == 1, "ssm_conv kernel shape");
    check(state->ne[0] == K - 1 && state->ne[1] == C && state->n_elements() == (K - 1) * C, "ssm_conv state shape");
    Tensor* t = new_op(Op::SSM_CONV, DType::F32, x->ne, {x, w, state});
    t->iparams[0] = silu ? 1 : 0;
    return t;
}

Tensor* Graph::gdn_gates(Tensor* alpha, Tensor* beta, Tensor* dt_bias, Tensor* a) {
    for (Tensor* s : {alpha, beta, dt_bias, a}) check(s->type == DType::F32, "gdn_gates wants F32");
    const int64_t H = alpha->ne[0], N = alpha->ne[1];
    check(beta->ne[0] == H && beta->ne[1] == N && alpha->ne[2] == 1 && beta->ne[2] == 1, "gdn_gates shapes");
    check(dt_bias->n_elements() == H && a->n_elements() == H, "gdn_gates: dt bias and A, one per head");
    const int64_t ne[4] = {2, H, N, 1};
    return new_op(Op::GDN_GATES, DType::F32, ne, {alpha, beta, dt_bias, a});
}

Tensor* Graph::delta_net(Tensor* q, Tensor* k, Tensor* v, Tensor* gates, Tensor* state, bool l2_norm, float eps) {
    for (Tensor* s : {q, k, v, gates, state}) check(s->type == DType::F32, "delta_net wants F32");
    const int64_t S = v->ne[0], H = v->ne[1], N = v->ne[2], Hk = q->ne[1];
    check(q->ne[0] == S && k->ne[0] == S && k->ne[1] == Hk && q->ne[2] == N && k->ne[2] == N, "delta_net q/k shapes");
    check(Hk > 0 && H % Hk == 0, "delta_net: value heads must be a multiple of key heads");
    check(q->nb[0] == sizeof(float) && k->nb[0] == sizeof(float) && v->nb[0] == sizeof(float), "delta_net rows");
    check(gates->ne[0] == 2 && gates->ne[1] == H && gates->ne[2] == N, "delta_net gates shape");
    check(state->ne[0] == S && state->ne[1] == S && state->ne[2] == H && state->n_elements() == S * S * H,
          "delta_net state shape");
    const int64_t ne[4] = {S, H, N, 1};
    Tensor* t = new_op(Op::DELTA_NET, DType::F32, ne, {q, k, v, gates, state});
    t->iparams[0] = l2_norm ? 1 : 0;
    t->fparams[0] = eps;
    return t;
}

Tensor* Graph::add(Tensor* a, Tensor* b) {
    check(a->type == DType::F32 && b->type == DType::F32, "add wants F32");
    check(a->ne[0] == b->ne[0] && (b->n_rows() == 1 || b->n_rows() == a->n_rows()), "add shapes");
    return new_op(Op::ADD, DType::F32, a->ne, {a, b});
}

Tensor* Graph::glu(Tensor* gate, Tensor* up, Activation act) {
    check(gate->type == DType::F32 && up->type == DType::F32, "glu wants F32");
    check(gate->n_elements() == up->n_elements() && gate->ne[0] == up->ne[0], "glu shapes");
    Tensor* t = new_op(Op::GLU, DType::F32, gate->ne, {gate, up});
    t->iparams[0] = (int32_t)act;
    return t;
}

Tensor* Graph::swiglu_oai(Tensor* gate, Tensor* up, float alpha, float limit) {
    Tensor* t = glu(gate, up, Activation::SWIGLU_OAI);
    t->fparams[0] = alpha;
    t->fparams[1] = limit;
    return t;
}

Tensor* Graph::scale(Tensor* x, float s) {
    check(x->type == DType::F32, "scale wants F32");
    Tensor* t = new_op(Op::SCALE, DType::F32, x->ne, {x});
    t->fparams[0] = s;
    return t;
}

Tensor* Graph::softcap(Tensor* x, float cap) {
    check(cap > 0.0f, "soft-cap must be positive");
    Tensor* t = scale(x, cap);
    t->iparams[0] = 1;  // tanh of x / cap first
    return t;
}

namespace {
// The dimension below which YaRN keeps a pair's original angle, for a rotation count
// (llama.cpp's ggml_rope_yarn_corr_dim).
float yarn_corr_dim(int n_rot, int n_ctx_orig, float n_turns, float base) {
    return (float)n_rot * std::log((float)n_ctx_orig / (n_turns * 2.0f * 3.14159265358979323846f)) /
           (2.0f * std::log(base));
}
}  // namespace

Tensor* Graph::rope(Tensor* x, Tensor* pos, const RopeParams& rp, Tensor* factors) {
    check(x->type == DType::F32 && pos->type == DType::I32 && pos->ne[0] == x->ne[2], "rope shapes");
    check(rp.n_rot > 0 && rp.n_rot <= x->ne[0] && rp.n_rot % 2 == 0, "rope dimension count");
    check(!factors || (factors->type == DType::F32 && factors->n_elements() == rp.n_rot / 2), "rope factors");
    Tensor* t = new_op(Op::ROPE, DType::F32, x->ne, {x, pos, factors});
    t->iparams[0] = rp.n_rot;
    t->iparams[1] = (int32_t)rp.mode;
    t->fparams[0] = rp.freq_base;
    t->fparams[1] = rp.freq_scale;
    t->fparams[2] = rp.ext_factor;
    t->fparams[3] = rp.attn_factor;
    float lo = 0.0f, hi = 0.0f;
    if (rp.ext_factor != 0.0f) {
        check(rp.n_ctx_orig > 0, "YaRN needs the original context length");
        lo = std::max(0.0f, std::floor(yarn_corr_dim(rp.n_rot, rp.n_ctx_orig, rp.beta_fast, rp.freq_base)));
        hi = std::min((float)(rp.n_rot - 1), std::ceil(yarn_corr_dim(rp.n_rot, rp.n_ctx_orig, rp.beta_slow, rp.freq_base)));
    }
    t->fparams[4] = lo;
    t->fparams[5] = hi;
    check(rp.temp_scale == 0.0f || rp.temp_floor > 0, "attention temperature needs its floor");
    t->fparams[6] = rp.temp_scale;
    t->iparams[2] = rp.temp_floor;
    return t;
}

Tensor* Graph::kv_store(Tensor* k, Tensor* v, Tensor* k_cache, Tensor* v_cache, Tensor* pos) {
    check(k->ne[0] * k->ne[1] == k_cache->ne[0] * k_cache->ne[1] && k->ne[2] == pos->ne[0],
          "kv_store K shape");
    check(v->n_elements() == k->n_elements(), "kv_store V shape");
    const int64_t ne[4] = {1, 1, 1, 1};
    Tensor* t = new_op(Op::KV_STORE, DType::F32, ne, {k, v, k_cache, v_cache, pos});
    return t;
}

Tensor* Graph::attention(Tensor* q, Tensor* k_cache, Tensor* v_cache, Tensor* pos, Tensor* after,
                         float scale, int32_t window, float softcap, Tensor* sinks) {
    check(q->ne[0] == k_cache->ne[0] && q->ne[1] % k_cache->ne[1] == 0, "attention head shapes");
    check(!sinks || (sinks->type == DType::F32 && sinks->ne[0] == q->ne[1] && sinks->n_rows() == 1),
          "attention sinks: one F32 per query head");
    check(pos->ne[0] == q->ne[2], "attention positions");
    check(window >= 0 && softcap >= 0.0f, "attention window and soft-cap");
    const int64_t ne[4] = {q->ne[0] * q->ne[1], q->ne[2], 1, 1};
    Tensor* t = new_op(Op::ATTENTION, DType::F32, ne, {q, k_cache, v_cache, pos, after, sinks});
    t->fparams[0] = scale;
    t->fparams[1] = softcap;
    t->iparams[0] = window;
    return t;
}

Tensor* Graph::layer_norm(Tensor* x, Tensor* weight, Tensor* bias, float eps) {
    check(x->type == DType::F32 && x->nb[0] == sizeof(float), "layer_norm wants F32 rows");
    for (Tensor* p : {weight, bias})
        check(!p || (p->type == DType::F32 && p->ne[0] == x->ne[0] && p->n_rows() == 1), "layer_norm weight shape");
    Tensor* t = new_op(Op::LAYER_NORM, DType::F32, x->ne, {x, weight, bias});
    t->fparams[0] = eps;
    return t;
}

Tensor* Graph::gelu(Tensor* x) {
    check(x->type == DType::F32 && x->nb[0] == sizeof(float), "gelu wants F32 rows");
    return new_op(Op::GELU, DType::F32, x->ne, {x});
}

Tensor* Graph::attention_bidir(Tensor* q, Tensor* k, Tensor* v, Tensor* pos, float scale) {
    for (Tensor* s : {q, k, v}) check(s->type == DType::F32 && s->nb[0] == sizeof(float), "attention_bidir wants F32 rows");
    check(k->ne[0] == q->ne[0] && v->ne[0] == q->ne[0] && v->ne[1] == k->ne[1] && q->ne[1] % k->ne[1] == 0,
          "attention_bidir head shapes");
    check(k->ne[2] == q->ne[2] && v->ne[2] == q->ne[2] && q->ne[3] == 1, "attention_bidir token counts");
    check(pos->type == DType::I32 && pos->ne[0] == q->ne[2], "attention_bidir positions");
    const int64_t ne[4] = {q->ne[0] * q->ne[1], q->ne[2], 1, 1};
    Tensor* t = new_op(Op::ATTENTION_BIDIR, DType::F32, ne, {q, k, v, pos});
    t->fparams[0] = scale;
    return t;
}

void Graph::finalize(const std::vector<Tensor*>& outputs) {
    static std::atomic<uint64_t> next_id{1};
    id_ = next_id.fetch_add(1, std::memory_order_relaxed);
    order_.clear();
    // iterative DFS post-order
    std::unordered_map<Tensor*, int> state;  // 1 visiting, 2 done
    for (Tensor* out : outputs) {
        std::vector<std::pair<Tensor*, int>> stack{{out, 0}};
        while (!stack.empty()) {
            auto& [t, next] = stack.back();
            if (next == 0) {
                if (state[t] == 2) {
                    stack.pop_back();
                    continue;
                }
                state[t] = 1;
            }
            if (next < kMaxSrc) {
                Tensor* s = t->src[next++];
                if (s && state[s] != 2) {
                    check(state[s] != 1, "cycle");
                    stack.push_back({s, 0});
                }
                continue;
            }
            state[t] = 2;
            if (t->op != Op::NONE) order_.push_back(t);
            stack.pop_back();
        }
    }

    // Regroup by depth (a stable sort, so still a topological order): nodes that do not
    // depend on each other, such as the Q, K and V products of a layer, end up next to
    // each other, and the backend can run them without a barrier in between. Views cost
    // nothing, so they sit at their source's depth.
    std::unordered_map<const Tensor*, int> depth;
    {
        for (Tensor* t : order_) {
            int d = 0;
            for (Tensor* s : t->src) {
                auto it = s ? depth.find(s) : depth.end();
                if (it != depth.end()) d = std::max(d, it->second + (t->op == Op::VIEW ? 0 : 1));
            }
            depth[t] = d;
        }
        std::stable_sort(order_.begin(), order_.end(),
                         [&](const Tensor* a, const Tensor* b) { return depth[a] < depth[b]; });
    }

    // liveness: last node index that reads each storage tensor
    std::unordered_map<Tensor*, size_t> last_use;
    for (size_t i = 0; i < order_.size(); ++i) {
        Tensor* t = order_[i];
        for (Tensor* s : t->src)
            if (s) last_use[storage_of(s)] = i;
    }
    for (Tensor* out : outputs) last_use[storage_of(out)] = order_.size();

    OffsetAllocator alloc;
    planned_.clear();
    offsets_.clear();
    std::unordered_map<Tensor*, size_t> offset_of;
    std::vector<std::vector<Tensor*>> frees(order_.size() + 1);
    size_t group_begin = 0;
    for (size_t i = 0; i < order_.size(); ++i) {
        Tensor* t = order_[i];
        if (t->op != Op::VIEW && t->op != Op::KV_STORE) {  // those have no storage of their own
            // Elementwise ops (each element read before it is written, by the thread that
            // writes it) write over their first source when they are its last reader: the
            // SwiGLU product lands on the gate, the residual sum on the residual. Readers
            // in the same depth group that run earlier are kept apart by the barrier plan,
            // which sees the overlapping byte ranges.
            Tensor* s0 = t->src[0];
            size_t off;
            if ((t->op == Op::ADD || t->op == Op::GLU || t->op == Op::SCALE) && s0 && s0->op != Op::VIEW && s0->type == t->type &&
                s0->n_bytes() == t->n_bytes() && s0->is_contiguous() && t->is_contiguous() &&
                offset_of.count(s0) && last_use[s0] == i &&
                std::none_of(std::begin(t->src) + 1, std::end(t->src),
                             [&](Tensor* o) { return o && storage_of(o) == s0; })) {  // no other view of it
                auto& fs = frees[i];
                fs.erase(std::find(fs.begin(), fs.end(), s0));  // the storage lives on as t's
                off = offset_of[s0];
            } else {
                off = alloc.allocate(t->n_bytes());
            }
            offset_of[t] = off;
            planned_.push_back(t);
            offsets_.push_back(off);
            auto it = last_use.find(t);
            frees[it == last_use.end() ? i : it->second].push_back(t);
        }
        // Release what died in this depth group once the whole group is placed (the
        // group's nodes may run at the same time, so none may overwrite what another
        // of them still reads).
        if (i + 1 == order_.size() || depth[order_[i + 1]] != depth[t]) {
            for (size_t j = group_begin; j <= i; ++j) {
                for (Tensor* d : frees[j]) alloc.release(offset_of[d], d->n_bytes());
                frees[j].clear();
            }
            group_begin = i + 1;
        }
    }
    buffer_size_ = alloc.peak();
}

void Graph::bind(uint8_t* base) {
    for (size_t i = 0; i < planned_.size(); ++i) planned_[i]->data = base + offsets_[i];
    // views follow their sources, in order (a view of a view comes after it)
    for (Tensor* t : order_)
        if (t->op == Op::VIEW) t->data = static_cast<uint8_t*>(t->src[0]->data) + t->view_offset;
}

}  // namespace ember
