"""Greedy continuations are llama.cpp's (tests/golden/greedy_*.json, made by
tools/make_golden.py): identical token for token, except that at a near-tie (llama.cpp's
top-1/top-2 gap < 1.0) the two may part ways, after which nothing is compared. The
`ember run` command prints the same text."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ember.engine import GenerationStats, Model, SamplingParams

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
NEAR_TIE = 1.0
GREEDY = SamplingParams(temperature=0.0)


def golden_cases(variant):
    return json.loads((GOLDEN / f"greedy_{variant}.json").read_text())["cases"]


def compare(ours: list[int], ref: list[int], gaps: list[float]) -> int:
    """Number of tokens compared; fails on a difference at a confident position."""
    for i, want in enumerate(ref):
        if i >= len(ours):
            pytest.fail(f"generation stopped after {i} tokens, llama.cpp went on with {want}")
        if ours[i] != want:
            assert gaps[i] < NEAR_TIE, (f"token {i}: ours {ours[i]}, llama.cpp {want} "
                                        f"with a clear gap of {gaps[i]:.3f}")
            return i
    return len(ref)


@pytest.mark.parametrize("variant", ["Q4_1", "F16"])
def test_greedy_continuations_match_llama_cpp(model_variants, variant):
    m = Model(model_variants[variant], n_ctx=512, n_threads=2)
    compared = 0
    for case in golden_cases(variant):
        ids = m.tokenize(case["prompt"], add_special=True, parse_special=True)
        assert ids == case["prompt_ids"], "prompt tokenization differs from llama.cpp"
        stats = GenerationStats()
        list(m.generate(ids, len(case["tokens"]), GREEDY, stats=stats, reuse_prefix=False))
        ours = stats.token_ids + ([stats.stop_token] if stats.stop_reason == "eog" else [])
        compared += compare(ours, case["tokens"], case["gaps"])
    # the cases are long enough that most tokens really are compared
    assert compared >= 60


def test_ember_run_prints_llama_cpps_greedy_text(starter_model_path):
    case = golden_cases("Q4_1")[0]
    app = str(Path(__file__).resolve().parents[2] / "app")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([app, os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-m", "ember", "run", "-m", str(starter_model_path),
                        "-p", case["prompt"], "-n", "32", "--temp", "0", "-t", "2"],
                       capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr
    out = r.stdout[:-1] if r.stdout.endswith("\n") else r.stdout
    # llama.cpp's text up to its first near-tie must be there verbatim
    m = Model(starter_model_path, vocab_only=True)
    k = case["first_near_tie"] if case["first_near_tie"] is not None else len(case["tokens"])
    k = min(k, 32)
    assert out.startswith(m.detokenize(case["tokens"][:k]))
    # and the whole output is the API's greedy text for 32 tokens (stdout holds nothing else)
    full = Model(starter_model_path, n_ctx=256, n_threads=2)
    assert out == "".join(full.generate(case["prompt"], 32, GREEDY))
