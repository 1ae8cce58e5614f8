"""Mixture-of-experts routing (the MOE_ROUTE / MOE_WEIGHTS / MUL_MAT_ID / MOE_SUM ops) beyond
the logit checks of tests/engine/test_architectures.py, which hold every MoE family to
llama.cpp's logits and the float64 oracle's at every ISA level:

- the synthetic router really routes: different tokens choose different expert sets (a
  router that always picked the same experts would pass the logit checks with most of the
  indexed product untested);
- a batched prefill gives each token the bits of its decode, at every level, and one thread
  the bits of two (the indexed product's work items are claimed dynamically);
- the test backend (the scalar kernels behind the backend ABI) gives the CPU's bits for any
  placement of the layers.
"""
from __future__ import annotations

import numpy as np
import pytest

from tools import make_arch_models
from tools.make_arch_golden import family_text

MOE_FAMILIES = [f for f, spec in make_arch_models.FAMILIES.items() if spec.n_expert]


@pytest.fixture(scope="module", params=MOE_FAMILIES)
def moe_family(request):
    return request.param, make_arch_models.build(request.param)


def test_the_router_sends_tokens_to_different_experts(moe_family):
    from tools.oracle import Oracle
    fam, path = moe_family
    spec = make_arch_models.FAMILIES[fam]
    orc = Oracle(path, n_ctx=512)  # it records the expert sets it chose, per block
    from ember.engine import Model  # tokenization as the engine does it (checked against llama.cpp)
    m = Model(path, n_ctx=512, n_threads=2)
    try:
        ids = m.tokenize(family_text(fam), add_special=True)[:200]
    finally:
        m.close()
    orc.logits(ids)
    dense_lead = spec.lfm2.dense_lead if spec.lfm2 else 0  # lfm2moe's first blocks are dense
    assert sorted(orc.route_counts) == list(range(dense_lead, spec.n_layer))
    for il in range(dense_lead, spec.n_layer):
        sets = orc.route_counts[il]
        # a spread router gives most distinct tokens their own set (8 of 32, 4 of 16); a
        # collapsed one (a bias that dominates, a router too flat) gives a handful
        distinct = len(set(ids))
        assert len(sets) >= distinct // 2, \
            f"block {il}: only {len(sets)} distinct expert sets for {distinct} distinct tokens"
        used = {e for s in sets for e in s}
        assert len(used) >= spec.n_expert * 3 // 4, \
            f"block {il}: experts {set(range(spec.n_expert)) - used} never chosen"


@pytest.mark.native
def test_prefill_gives_each_token_the_bits_of_its_decode(moe_family):
    from ember.engine import Model, supported_isas
    fam, path = moe_family
    for isa in supported_isas():
        ref = None
        for threads in (2, 1):
            m = Model(path, n_ctx=256, n_threads=threads, n_batch=64, isa=isa)
            try:
                ids = m.tokenize(family_text(fam), add_special=True)[:75]
                batched = m.eval_logits(ids)
                alone = []
                for pos, tok in enumerate(ids):
                    m.decode([tok], pos)
                    alone.append(m.logits())
            finally:
                m.close()
            assert np.array_equal(batched.view(np.uint32), np.stack(alone).view(np.uint32)), \
                f"{fam} at {isa}, {threads} threads: a batched row differs from its decode"
            if ref is None:
                ref = batched
            else:
                assert np.array_equal(ref.view(np.uint32), batched.view(np.uint32)), \
                    f"{fam} at {isa}: one thread's logits differ from two threads'"


@pytest.mark.native
def test_the_test_backend_gives_the_cpu_bits(moe_family, tmp_path):
    from tests.engine.test_backends import probe, same_bits
    fam, path = moe_family
    spec = make_arch_models.FAMILIES[fam]
    # a model with recurrent blocks stays on the CPU whatever is asked (no device kernels
    # for their ops yet): the placement says so, and the bits are the CPU's
    recurrent = spec.qwen35 is not None or spec.lfm2 is not None
    _, ref = probe(tmp_path, path, backend="cpu")
    for layers in (-1, 1):
        info, arrays = probe(tmp_path, path, gpu_layers=layers)
        want = 0 if recurrent else spec.n_layer + 1 if layers < 0 else 1  # + the output layer
        assert info["contexts"][0]["n_gpu_layers"] == want
        if recurrent:
            assert "recurrent" in info["contexts"][0]["note"], info["contexts"][0]["note"]
        same_bits(arrays, ref)
