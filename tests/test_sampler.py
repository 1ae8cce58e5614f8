"""The native sampler chain: greedy is argmax, penalties follow llama.cpp's formulas,
top-k / top-p / min-p keep exactly the tokens they should, draws follow the kept
distribution, and the same seed gives the same sequence."""
from __future__ import annotations

import ctypes
from collections import Counter

import numpy as np
import pytest

from ember.engine import Sampler, SamplingParams


def draw(params: SamplingParams, logits, n=1, history=()):
    s = Sampler(params)
    for t in history:
        s.accept(t)
    arr = np.ascontiguousarray(logits, dtype=np.float32)
    ptr = arr.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
    return [s.sample(ptr, arr.size) for _ in range(n)]


GREEDY = dict(temperature=0.0, top_k=0, top_p=1.0, min_p=0.0)


def test_greedy_is_argmax_first_on_ties():
    rng = np.random.default_rng(0)
    for _ in range(20):
        logits = rng.standard_normal(1000).astype(np.float32)
        assert draw(SamplingParams(**GREEDY), logits) == [int(np.argmax(logits))]
    assert draw(SamplingParams(**GREEDY), [1.0, 3.0, 3.0]) == [1]


@pytest.mark.parametrize("kw,history,want", [
    (dict(repeat_penalty=2.0), [0], 1),              # 3.0 / 2 = 1.5 < 2.0
    (dict(repeat_penalty=1.2), [0], 0),              # 2.5 > 2.0
    (dict(presence_penalty=1.5), [0, 0, 0], 1),      # 3 - 1.5 = 1.5: once, whatever the count
    (dict(presence_penalty=1.0), [0, 0, 0], 0),      # 3 - 1 = 2.0 ties with id 1: first wins
    (dict(frequency_penalty=0.6), [0, 0], 1),        # 3 - 1.2 = 1.8 < 2.0
    (dict(frequency_penalty=0.4), [0, 0], 0),        # 3 - 0.8 = 2.2 > 2.0
])
def test_penalties(kw, history, want):
    logits = [3.0, 2.0, -1.0]
    assert draw(SamplingParams(**GREEDY, **kw), logits, history=history)[0] == want


def test_repeat_penalty_multiplies_negative_logits():
    # -1.0 * 3 = -3.0 falls below -2.0
    assert draw(SamplingParams(**GREEDY, repeat_penalty=3.0), [-1.0, -2.0], history=[0]) == [1]


def test_penalty_window_forgets_old_tokens():
    p = SamplingParams(**GREEDY, repeat_penalty=2.0, penalty_last_n=2)
    assert draw(p, [3.0, 2.0, 0.0], history=[0, 2, 2]) == [0]  # token 0 left the window
    assert draw(p, [3.0, 2.0, 0.0], history=[2, 0]) == [1]


PROBS = np.array([0.5, 0.3, 0.15, 0.05])
LOGITS = np.log(PROBS)


@pytest.mark.parametrize("kw,kept", [
    (dict(top_k=2, top_p=1.0, min_p=0.0), {0, 1}),
    (dict(top_k=0, top_p=0.7, min_p=0.0), {0, 1}),
    (dict(top_k=0, top_p=0.9, min_p=0.0), {0, 1, 2}),
    (dict(top_k=0, top_p=1.0, min_p=0.25), {0, 1, 2}),
    (dict(top_k=0, top_p=1.0, min_p=0.7), {0}),
    (dict(top_k=0, top_p=1.0, min_p=0.0), {0, 1, 2, 3}),
])
def test_truncation_keeps_the_right_tokens_with_the_right_frequencies(kw, kept):
    n = 6000
    got = Counter(draw(SamplingParams(temperature=1.0, seed=11, **kw), LOGITS, n=n))
    assert set(got) == kept
    p = PROBS[sorted(kept)] / PROBS[sorted(kept)].sum()
    for tok, want in zip(sorted(kept), p):
        assert abs(got[tok] / n - want) < 0.03, (tok, got[tok] / n, want)


def test_temperature_sharpens_and_flattens():
    n = 6000
    cold = Counter(draw(SamplingParams(temperature=0.5, top_k=0, top_p=1.0, min_p=0.0, seed=2),
                        LOGITS, n=n))
    p = PROBS ** 2 / (PROBS ** 2).sum()
    for tok in range(4):
        assert abs(cold[tok] / n - p[tok]) < 0.03


def test_same_seed_same_sequence_different_seed_different():
    logits = np.random.default_rng(5).standard_normal(500)
    p = dict(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0)
    a = draw(SamplingParams(seed=42, **p), logits, n=50)
    b = draw(SamplingParams(seed=42, **p), logits, n=50)
    c = draw(SamplingParams(seed=43, **p), logits, n=50)
    assert a == b and a != c


def test_seeded_generation_is_reproducible(starter_model_path):
    from ember.engine import Model
    m = Model(starter_model_path, n_ctx=128, n_threads=2)
    p = SamplingParams(temperature=0.9, seed=1234)
    a = "".join(m.generate("Once upon a time", 24, p))
    b = "".join(m.generate("Once upon a time", 24, p))
    c = "".join(m.generate("Once upon a time", 24, SamplingParams(temperature=0.9, seed=99)))
    assert a == b and len(a) > 20 and a != c
