"""Validate the float64 numpy oracle (tools/oracle.py) against llama.cpp goldens.

This checks the *oracle*, not the engine: if the oracle's exact math agrees
with llama.cpp's mixed-precision results within the expected bounds, both can
serve as references for Ember's engine fidelity tests.

Expected (measured when the goldens were made, see tests/golden/README.md):
mean NLL within ~0.3 % of llama.cpp, top-1 identical wherever llama.cpp's
top1-top2 logit gap is >= 1.0, and greedy continuations identical up to
llama.cpp's first near-tie (gap < 1.0).
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from tools import oracle as oracle_mod

SMOL_VARIANTS = ["Q4_1", "F16", "Q8_0", "Q4_0"]
# prose runs by default (one ~440-token forward per variant); the rest are marked slow
TEXTS = ["prose", pytest.param("code", marks=pytest.mark.slow),
         pytest.param("chat", marks=pytest.mark.slow), pytest.param("essay", marks=pytest.mark.slow)]
NLL_REL_TOL = 0.005     # 0.5 %
GAP_SURE = 1.0

_ORACLES: dict[str, oracle_mod.Oracle] = {}


def get_oracle(variant: str, model_variants) -> oracle_mod.Oracle:
    # one oracle at a time keeps memory ~1.2 GB
    if variant not in _ORACLES:
        _ORACLES.clear()
        _ORACLES[variant] = oracle_mod.Oracle(model_variants[variant])
    return _ORACLES[variant]


def load_golden(golden_dir, variant, text):
    with np.load(golden_dir / f"logits_{variant}_{text}.npz") as z:
        return {k: z[k] for k in z.files}


def compare(orc_logits: np.ndarray, g: dict) -> dict:
    toks = g["tokens"]
    n = len(toks)
    lp = oracle_mod.log_softmax(orc_logits)
    nll_o = -lp[np.arange(n - 1), toks[1:]]
    nll_l = -g["next_logprob"][:-1].astype(np.float64)
    top1_o = orc_logits.argmax(axis=1)
    top1_l = g["top_ids"][:, 0]
    sure = g["gap"] >= GAP_SURE
    return {
        "n": n,
        "nll_oracle": float(nll_o.mean()),
        "nll_llama": float(nll_l.mean()),
        "nll_rel": float(abs(nll_o.mean() - nll_l.mean()) / nll_l.mean()),
        "top1_agree_all": float((top1_o == top1_l).mean()),
        "top1_agree_sure": float((top1_o[sure] == top1_l[sure]).mean()),
        "n_sure": int(sure.sum()),
        "sure_mismatch_pos": np.nonzero(sure & (top1_o != top1_l))[0].tolist(),
        "max_abs_top1_logit_diff": float(np.abs(orc_logits[np.arange(n), top1_l] - g["top_logits"][:, 0]).max()),
    }


def test_variant_files_match_golden(model_variants, golden_meta):
    """gguf-py-built variants are byte-identical to the files the goldens came from."""
    for name, path in model_variants.items():
        assert path.is_file()
        assert name in golden_meta["variants"]


@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.parametrize("variant", SMOL_VARIANTS)
def test_oracle_matches_llama_cpp_logits(variant, text, model_variants, golden_dir):
    g = load_golden(golden_dir, variant, text)
    orc = get_oracle(variant, model_variants)
    r = compare(orc.logits(g["tokens"]), g)
    print(json.dumps({"variant": variant, "text": text, **{k: v for k, v in r.items() if k != "sure_mismatch_pos"}}))
    assert r["nll_rel"] < NLL_REL_TOL, r
    assert r["top1_agree_sure"] == 1.0, r


@pytest.mark.parametrize("variant", SMOL_VARIANTS)
def test_oracle_greedy_matches_llama_cpp(variant, model_variants, golden_dir):
    """Teacher-forced: on llama.cpp's greedy path, the oracle's argmax equals llama.cpp's
    token at every step whose gap >= 1.0; free-running: identical up to the first near-tie."""
    doc = json.loads((golden_dir / f"greedy_{variant}.json").read_text())
    orc = get_oracle(variant, model_variants)
    eog = set(doc["eog_ids"])
    for case in doc["cases"] + doc["run"]:
        prompt, ref = case["prompt_ids"], case["tokens"]
        gaps = case.get("gaps")
        lg = orc.logits(prompt + ref[:-1])[len(prompt) - 1:]
        top1 = lg.argmax(axis=1)
        if gaps is not None:
            sure = np.asarray(gaps) >= GAP_SURE
            assert (top1[sure] == np.asarray(ref)[sure]).all(), (case["prompt"], top1.tolist(), ref)
        tie = case["first_near_tie"]
        k = len(ref) if tie is None else tie
        if k:
            got, _ = orc.greedy(prompt, k, stop=eog)
            assert got[:k] == ref[:k], (case["prompt"], got, ref, tie)
