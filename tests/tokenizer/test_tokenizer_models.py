"""The starter model's and Gemma-3-270M's own vocabularies tokenize exactly as llama.cpp
does (ids in tests/golden/tokens_*.json, made by tools/make_golden.py), with and without
special-token parsing and BOS/EOS, and detokenize back to the text."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from ember.engine import Model

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


def _cases(name):
    return json.loads((GOLDEN / f"tokens_{name}.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("name,fixture", [("smollm2", "starter_model_path"),
                                          ("gemma3", "gemma_model_path")])
def test_model_vocab_matches_llama_cpp(name, fixture, request):
    golden = _cases(name)
    m = Model(request.getfixturevalue(fixture), vocab_only=True)
    assert len(golden["cases"]) >= 40
    bad = []
    for c in golden["cases"]:
        got = m.tokenize(c["text"], add_special=c["add_special"], parse_special=c["parse_special"])
        if got != c["ids"]:
            bad.append((c["text"][:40], c["add_special"], c["parse_special"], got[:12], c["ids"][:12]))
    assert not bad, f"{len(bad)} cases differ, e.g. {bad[:3]}"


@pytest.mark.parametrize("name,fixture", [("smollm2", "starter_model_path"),
                                          ("gemma3", "gemma_model_path")])
def test_model_vocab_round_trips(name, fixture, request):
    m = Model(request.getfixturevalue(fixture), vocab_only=True)
    for c in _cases(name)["cases"]:
        if c["add_special"] or c["parse_special"]:
            continue
        assert m.detokenize(c["ids"]) == c["text"], c["text"][:40]
