// The tensor: a small plain struct (type, ne[4], byte strides nb[4], op, sources,
// data, name), as in ggml. Views and transposes share data and only change ne/nb.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/dtype.h"

namespace ember {

enum class Op : int32_t {
    NONE = 0,       // leaf: weight, input or cache (data set by its owner)
    VIEW,           // shares src[0]'s data at an offset with its own ne/nb
    GET_ROWS,       // rows of src[0] (any type) picked by src[1] (I32 ids) -> F32
    RMS_NORM_MUL,   // rms_norm(src[0]) * src[1] (broadcast over rows); param f[0] = eps
    MUL_MAT,        // src[0] weight [K, M] (any type), src[1] F32 [K, N] -> F32 [M, N]
    ADD,            // src[0] + src[1], src[1] broadcast over rows when it has one row
    GLU,            // act(src[0]) * src[1]; iparams[0] = Activation
    SCALE,          // src[0] * fparams[0]; iparams[0] = 1: fparams[0] * tanh(src[0] / fparams[0])
    ROPE,           // rotate src[0] [head_dim, n_head, N] at positions src[1] (I32 [N]); src[2]
                    // optional F32 [n_rot/2] frequency divisors; parameters: see Graph::rope
    KV_STORE,       // write src[0] (K) and src[1] (V) into caches src[2], src[3] at src[4] positions
    ATTENTION,      // causal attention of src[0] (Q) over caches src[1], src[2]; src[3] positions;
                    // iparams[0] sliding window (0: none), fparams[0] scale, [1] soft-cap (0: none);
                    // src[5] optional F32 [n_head] attention sinks (a logit per head that joins
                    // the softmax's denominator only: gpt-oss)
    // Mixture of experts (Graph::moe_route and the three after it; DESIGN.md, "expert routing")
    MOE_ROUTE,      // src[0] router logits F32 [n_expert, N], src[1] optional selection bias
                    // F32 [n_expert] -> I32 [k, N]: each token's k experts, best first;
                    // iparams[0] k, [1] ExpertGating
    MOE_WEIGHTS,    // src[0] logits as above, src[1] MOE_ROUTE's ids -> F32 [k, N]: the chosen
                    // experts' weights; iparams[1] ExpertGating, [2] 1: normalised to sum 1,
                    // fparams[0] scale (0: none); src[2] optional F32 [n_expert]: each
                    // chosen weight times its expert's factor
    MUL_MAT_ID,     // src[0] expert weights [K, M, n_expert], src[1] F32 [K, 1 or k, N] (one row
                    // for all of a token's experts, or one per expert), src[2] I32 ids [k, N],
                    // src[3] optional F32 biases [M, n_expert] -> F32 [M, k, N]
    MOE_SUM,        // src[0] F32 [M, k, N], src[1] F32 weights [k, N] -> F32 [M, N], the weighted sum
    // Recurrent layers (Graph::ssm_conv and the two after it; DESIGN.md, "recurrent state").
    // Both stateful ops read their layer's state leaf and overwrite it with the state after
    // the batch's last token: the leaf is written, as KV_STORE writes its caches.
    SSM_CONV,       // causal depthwise convolution: src[0] x F32 [C, N] (rows may be strided),
                    // src[1] kernel [K, C] (F32 or F16), src[2] state F32 [K - 1, C] (the
                    // previous K - 1 inputs per channel) -> F32 [C, N]; iparams[0] 1: SiLU after
    GDN_GATES,      // the gated delta rule's per-head gates: src[0] alpha F32 [H, N], src[1] beta
                    // F32 [H, N], src[2] dt bias F32 [H], src[3] A F32 [H] -> F32 [2, H, N]:
                    // (softplus(alpha + dt) * A, sigmoid(beta)) per head and token
    DELTA_NET,      // the gated delta rule: src[0] q, src[1] k F32 [S, Hk, N], src[2] v F32
                    // [S, H, N] (strided views), src[3] GDN_GATES [2, H, N], src[4] state F32
                    // [S, S, H] (head h's matrix transposed: row j holds column j) -> F32
                    // [S, H, N]; value head h reads key head h % Hk; iparams[0] 1: q and k
                    // L2-normed first (fparams[0] eps); the output is scaled by 1/sqrt(S)
    // Encoders (BERT; Graph::layer_norm and the two after it)
    LAYER_NORM,     // (src[0] - mean) / sqrt(var + eps) * src[1] + src[2] per row; src[1], src[2]
                    // optional F32 [ne0] (broadcast over rows); fparams[0] eps
    GELU,           // exact GELU of src[0], 0.5 x (1 + erf(x / sqrt 2)), elementwise
    ATTENTION_BIDIR, // bidirectional attention of src[0] Q [head_dim, n_head, N] over src[1] K and
                    // src[2] V [head_dim, n_head_kv, N] (F32, the batch's own tokens, no cache)
                    // within each sequence: src[3] positions I32 [N], a sequence starting at
                    // each position 0 and running until the next; fparams[0] scale ->
                    // F32 [head_dim * n_head, N]
    COUNT
};

enum class RopeMode : int32_t { NORMAL = 0, NEOX = 2 };

// The gate's activation in a gated feed-forward (GLU) op.
// SIGMOID: sigmoid(gate) * up (Qwen3.5's gated attention output).
// SWIGLU_OAI: gpt-oss's clamped SwiGLU, min(g, limit) * sigmoid(alpha min(g, limit)) *
// (clamp(u, -limit, limit) + 1), fparams[0] alpha, [1] limit.
// LINEAR: the product gate * up itself (LFM2's input and output gates)
enum class Activation : int32_t { SILU = 0, GELU_TANH = 1, SWIGLU_OAI = 2, SIGMOID = 3, LINEAR = 4 };

// How a mixture-of-experts router turns its logits into the chosen experts' weights
// (llama.cpp's llama_expert_gating_func_type values, as GGUF's expert_gating_func key holds
// them): a softmax over all experts, a sigmoid per expert, or the top k chosen on the raw
// logits and a softmax over those k only (gpt-oss).
enum class ExpertGating : int32_t { SOFTMAX = 1, SIGMOID = 2, SOFTMAX_WEIGHT = 3 };

// Six sources: ATTENTION takes five today, and attention sinks (gpt-oss) a sixth. Part of
// the backend ABI (backend/backend.h), so it changes rarely and deliberately.
constexpr int kMaxSrc = 6;
constexpr int kMaxName = 64;

// Which layer a weight or cache leaf belongs to, given by whoever made the leaf (the
// model's binder, the context's caches), so that placement never parses names: a block
// 0..n_layer-1, the token embedding, the output head, or none (inputs, shared factors).
constexpr int32_t kLayerNone = -1000;
constexpr int32_t kLayerEmbedding = -1;
constexpr int32_t kLayerOutput = -2;

struct Tensor {
    DType type = DType::F32;
    int64_t ne[4] = {1, 1, 1, 1};  // elements per dimension, ne[0] contiguous
    size_t nb[4] = {0, 0, 0, 0};   // bytes between consecutive elements/rows per dimension
    Op op = Op::NONE;
    Tensor* src[kMaxSrc] = {};
    int32_t iparams[8] = {};
    float fparams[8] = {};
    void* data = nullptr;
    // The data of the backend that holds this tensor, for it alone (the CPU's weights: the
    // four-row copy, cpu/kernels.h's RowGroups); copies made for another backend drop it.
    const void* extra = nullptr;
    size_t view_offset = 0;        // VIEW: byte offset into src[0]
    int32_t layer = kLayerNone;    // leaves: see kLayerNone
    char name[kMaxName] = {};

    int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
    int64_t n_rows() const { return ne[1] * ne[2] * ne[3]; }
    size_t n_bytes() const;        // of a contiguous tensor of this shape and type
    bool is_contiguous() const;
    void set_name(const char* s) {
        // (a bounded copy by hand: GCC's -Wstringop-truncation misreads strncpy here when
        // inlined into a caller whose names it cannot see)
        size_t n = 0;
        while (n < kMaxName - 1 && s[n]) ++n;
        std::memcpy(name, s, n);
        name[n] = 0;
    }
    template <typename T = void>
    T* row(int64_t i1, int64_t i2 = 0, int64_t i3 = 0) const {
        return reinterpret_cast<T*>(static_cast<uint8_t*>(data) + i1 * nb[1] + i2 * nb[2] + i3 * nb[3]);
    }
};

// The tensor whose memory a view (of a view ...) looks at.
inline const Tensor* storage_of(const Tensor* t) {
    while (t->op == Op::VIEW) t = t->src[0];
    return t;
}
inline Tensor* storage_of(Tensor* t) {
    while (t->op == Op::VIEW) t = t->src[0];
    return t;
}

// "mul_mat", "rms_norm", ...: for profiles and messages.
const char* op_name(Op op);

// Sets nb[] for a contiguous layout of t->type and t->ne.
void tensor_set_contiguous_strides(Tensor* t);
// A contiguous [ne0, ne1] tensor over data the caller owns (no graph, no op).
Tensor tensor_2d(DType type, int64_t ne0, int64_t ne1, void* data);

}  // namespace ember
