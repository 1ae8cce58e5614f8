// The forward graph names its intermediates as llama.cpp's cb(cur, name, il) does, so a
// trace or a diff against llama.cpp's tensors points at a node: every block's nodes carry
// "<name>-<il>" on the op that computes them, and the names are unique in a graph. The
// model is $EMBER_TEST_MODEL (the starter, a llama-family file); without it the test
// exits 77, which ctest reports as skipped.
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>

#include "core/error.h"
#include "model/context.h"
#include "model/model.h"

using namespace ember;

namespace {

int failures = 0;

void expect(bool ok, const std::string& what) {
    if (!ok) {
        std::printf("FAIL: %s\n", what.c_str());
        ++failures;
    }
}

void check_graph(const Graph& g, int32_t n_layer, int32_t n_tokens) {
    std::map<std::string, const Tensor*> named;
    for (const Tensor* t : g.nodes()) {
        if (!t->name[0] || t->op == Op::NONE) continue;
        expect(named.emplace(t->name, t).second, std::string("one node named ") + t->name);
    }
    auto op_of = [&](const std::string& name, Op op) {
        auto it = named.find(name);
        expect(it != named.end(), "a node named " + name + " (" + std::to_string(n_tokens) + " tokens)");
        if (it != named.end())
            expect(it->second->op == op, name + " is " + op_name(op) + ", not " + op_name(it->second->op));
    };
    op_of("inp_embd", Op::GET_ROWS);
    for (int32_t il = 0; il < n_layer; ++il) {
        const std::string s = "-" + std::to_string(il);
        op_of("attn_norm" + s, Op::RMS_NORM_MUL);
        op_of("Qcur" + s, Op::ROPE);
        op_of("Kcur" + s, Op::ROPE);
        op_of("kqv_out" + s, Op::ATTENTION);
        op_of("attn_out" + s, Op::MUL_MAT);
        op_of("ffn_inp" + s, Op::ADD);
        op_of("ffn_norm" + s, Op::RMS_NORM_MUL);
        op_of("ffn_gate_par" + s, Op::GLU);
        op_of("ffn_out" + s, Op::MUL_MAT);
        op_of("l_out" + s, Op::ADD);
    }
    op_of("result_norm", Op::RMS_NORM_MUL);
    op_of("result_output", Op::MUL_MAT);
}

}  // namespace

int main() {
    const char* path = std::getenv("EMBER_TEST_MODEL");
    if (!path || !*path) {
        std::printf("EMBER_TEST_MODEL not set: not run\n");
        return 77;
    }
    try {
        std::unique_ptr<Model> model = Model::load(path, LoadOptions{});
        ContextOptions opts;
        opts.n_ctx = 64;
        opts.n_batch = 8;
        opts.n_threads = 1;
        opts.backend = "cpu";
        Context ctx(*model, opts);
        for (int32_t n : {1, 8}) check_graph(ctx.graph_for(n, Outputs::LAST).graph, model->hparams().n_layer, n);
    } catch (const Error& e) {
        std::printf("FAIL: %s\n", e.what());
        return 1;
    }
    if (failures) return 1;
    std::printf("graph names: ok\n");
    return 0;
}
