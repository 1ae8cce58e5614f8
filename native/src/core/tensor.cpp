#include "core/tensor.h"

namespace ember {

void tensor_set_contiguous_strides(Tensor* t) {
    const DTypeInfo* tt = dtype_info(t->type);
    t->nb[0] = (size_t)tt->block_bytes;
    t->nb[1] = (size_t)dtype_row_bytes(*tt, t->ne[0]);
    for (int i = 2; i < 4; ++i) t->nb[i] = t->nb[i - 1] * (size_t)t->ne[i - 1];
}

Tensor tensor_2d(DType type, int64_t ne0, int64_t ne1, void* data) {
    Tensor t;
    t.type = type;
    t.ne[0] = ne0;
    t.ne[1] = ne1;
    tensor_set_contiguous_strides(&t);
    t.data = data;
    return t;
}

size_t Tensor::n_bytes() const {
    const DTypeInfo* tt = dtype_info(type);
    return (size_t)dtype_row_bytes(*tt, ne[0]) * (size_t)n_rows();
}

bool Tensor::is_contiguous() const {
    const DTypeInfo* tt = dtype_info(type);
    if (nb[0] != (size_t)tt->block_bytes) return false;
    size_t expect = (size_t)dtype_row_bytes(*tt, ne[0]);
    for (int i = 1; i < 4; ++i) {
        if (ne[i] > 1 && nb[i] != expect) return false;
        expect *= (size_t)ne[i];
    }
    return true;
}

const char* op_name(Op op) {
    switch (op) {
        case Op::NONE: return "leaf";
        case Op::VIEW: return "view";
        case Op::GET_ROWS: return "get_rows";
        case Op::RMS_NORM_MUL: return "rms_norm";
        case Op::MUL_MAT: return "mul_mat";
        case Op::ADD: return "add";
        case Op::GLU: return "glu";
        case Op::SCALE: return "scale";
        case Op::ROPE: return "rope";
        case Op::KV_STORE: return "kv_store";
        case Op::ATTENTION: return "attention";
        case Op::MOE_ROUTE: return "moe_route";
        case Op::MOE_WEIGHTS: return "moe_weights";
        case Op::MUL_MAT_ID: return "mul_mat_id";
        case Op::MOE_SUM: return "moe_sum";
        case Op::SSM_CONV: return "ssm_conv";
        case Op::GDN_GATES: return "gdn_gates";
        case Op::DELTA_NET: return "delta_net";
        case Op::LAYER_NORM: return "layer_norm";
        case Op::GELU: return "gelu";
        case Op::ATTENTION_BIDIR: return "attention_bidir";
        case Op::COUNT: break;
    }
    return "other";
}

}  // namespace ember
