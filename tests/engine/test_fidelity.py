"""Fidelity of Ember's forward pass against llama.cpp (golden logits made by
tools/make_golden.py) and against an independent float64 forward pass in numpy
(tools/oracle.py), on the starter model and its F16 / Q8_0 / Q4_0 variants.

Bars (issue #2): mean NLL within 0.5% of llama.cpp's and of the float64 oracle; no top-1
disagreement with llama.cpp where its top-1/top-2 gap is >= 1.0 (below that is a near-tie
that llama.cpp itself flips between its batched and one-token paths)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ember.engine import Model

VARIANTS = ["Q4_1", "Q8_0", "Q4_0", "F16"]
TEXTS = ["prose", "code", "essay", "chat"]
NEAR_TIE = 1.0
TEXTS_DIR = Path(__file__).resolve().parents[1] / "data" / "texts"


def nll(logits: np.ndarray, targets: np.ndarray) -> np.ndarray:
    x = logits.astype(np.float64)
    mx = x.max(axis=1, keepdims=True)
    lse = np.log(np.exp(x - mx).sum(axis=1)) + mx[:, 0]
    return lse - x[np.arange(len(targets)), targets]


@pytest.fixture(scope="module")
def models(model_variants):
    loaded = {name: Model(path, n_ctx=2048, n_threads=2) for name, path in model_variants.items()}
    yield loaded
    for m in loaded.values():
        m.close()


def load_golden(golden_dir, variant, text):
    g = np.load(golden_dir / f"logits_{variant}_{text}.npz")
    return {k: g[k] for k in g.files}


@pytest.fixture(scope="module")
def ours_cache():
    return {}


def our_logits(models, ours_cache, variant, tokens):
    key = (variant, tuple(tokens))
    if key not in ours_cache:
        ours_cache[key] = models[variant].eval_logits([int(t) for t in tokens])
    return ours_cache[key]


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("text", TEXTS)
def test_logits_match_llama_cpp(models, ours_cache, golden_dir, variant, text):
    g = load_golden(golden_dir, variant, text)
    tokens = g["tokens"]
    assert len(tokens) >= 300, "golden texts are several hundred tokens long"
    ours = our_logits(models, ours_cache, variant, tokens)
    n = len(tokens) - 1
    ours_nll = nll(ours[:n], tokens[1:])
    ref_nll = -g["next_logprob"][:n].astype(np.float64)
    rel = abs(ours_nll.mean() / ref_nll.mean() - 1.0)
    assert rel < 0.005, f"mean NLL {ours_nll.mean():.5f} vs llama.cpp {ref_nll.mean():.5f}"

    top1 = ours.argmax(axis=1)
    confident = g["gap"] >= NEAR_TIE
    wrong = np.flatnonzero(confident & (top1 != g["top_ids"][:, 0]))
    assert wrong.size == 0, (f"top-1 differs from llama.cpp at confident positions {wrong[:10]} "
                             f"(gaps {g['gap'][wrong[:10]]})")


@pytest.mark.parametrize("variant", VARIANTS)
def test_tokenization_matches_llama_cpp(models, golden_dir, variant):
    text = (TEXTS_DIR / "prose.txt").read_text(encoding="utf-8")
    g = load_golden(golden_dir, variant, "prose")
    assert models[variant].tokenize(text, add_special=True) == [int(t) for t in g["tokens"]]


@pytest.fixture(scope="module")
def oracle_for():
    from tools.oracle import Oracle
    cache = {}

    def get(path):
        if path not in cache:
            cache.clear()  # one float64 model in memory at a time
            cache[path] = Oracle(path)
        return cache[path]
    return get


@pytest.mark.parametrize("variant", VARIANTS)
def test_logits_match_float64_oracle(models, ours_cache, model_variants, golden_dir, oracle_for,
                                     variant):
    g = load_golden(golden_dir, variant, "prose")
    tokens = [int(t) for t in g["tokens"]]
    exact = oracle_for(model_variants[variant]).logits(tokens)
    ours = our_logits(models, ours_cache, variant, g["tokens"])
    targets = np.array(tokens[1:])
    ours_nll, exact_nll = nll(ours[:-1], targets), nll(exact[:-1], targets)
    rel = abs(ours_nll.mean() / exact_nll.mean() - 1.0)
    assert rel < 0.005, f"mean NLL {ours_nll.mean():.5f} vs float64 {exact_nll.mean():.5f}"
    top = np.sort(exact, axis=1)
    confident = (top[:, -1] - top[:, -2]) >= NEAR_TIE
    agree = ours.argmax(axis=1) == exact.argmax(axis=1)
    assert agree[confident].all()



def _isa_levels():
    from ember.engine import supported_isas
    return supported_isas()


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_isa_level_matches_llama_cpp(model_variants, golden_dir, variant):
    """The same bars on one text at each instruction-set level this CPU runs (scalar
    reference included), so every SIMD path is held to llama.cpp, not just the best one."""
    g = load_golden(golden_dir, variant, "chat")
    tokens = [int(t) for t in g["tokens"]]
    levels = _isa_levels()
    assert "scalar" in levels
    for isa in levels:
        m = Model(model_variants[variant], n_ctx=1024, n_threads=2, isa=isa)
        ours = m.eval_logits(tokens)
        m.close()
        ours_nll = nll(ours[:-1], np.array(tokens[1:]))
        ref_nll = -g["next_logprob"][:-1].astype(np.float64)
        assert abs(ours_nll.mean() / ref_nll.mean() - 1.0) < 0.005, isa
        confident = g["gap"] >= NEAR_TIE
        assert (ours.argmax(axis=1) == g["top_ids"][:, 0])[confident].all(), isa
    # (Logits of two levels are not compared with each other here: both quantize
    # activations to 8 bits, and a 1e-5 difference in one product can move a rounding
    # boundary that 30 layers then amplify; test_kernels pins the products themselves to
    # the scalar reference at 1e-5.)
