"""Tokenizer calls on one model from several threads at once (the server's slots), with no
lock in engine.py: every result equals the one-thread result, and an error raised on one
thread carries that thread's message, never another's."""
from __future__ import annotations

import threading

import pytest
from ember.engine import EmberError, Model

TEXTS = [("The history of the city " * (1 + k % 7)) + f"line {k}: naïve café, 東京 {k * 37}"
         for k in range(40)]


@pytest.fixture(scope="module")
def model(starter_model_path):
    m = Model(starter_model_path, vocab_only=True)
    yield m
    m.close()


def test_concurrent_tokenize_detokenize_and_errors(model):
    want = [model.tokenize(t) for t in TEXTS]
    bad = model.n_vocab + 5
    with pytest.raises(EmberError) as e:
        model.token_to_piece(bad)
    bad_message = str(e.value)
    wrong: list[str] = []
    start = threading.Barrier(6)

    def worker(k: int) -> None:
        start.wait()
        for r in range(150):
            i = (r * 7 + k * 11) % len(TEXTS)
            if (r + k) % 4 == 0:
                try:
                    model.token_to_piece(bad)
                    wrong.append("no error")
                except EmberError as err:
                    if str(err) != bad_message:
                        wrong.append(f"thread {k}: {err}")
                continue
            ids = model.tokenize(TEXTS[i])
            if ids != want[i] or model.detokenize(ids, remove_special=True) != TEXTS[i]:
                wrong.append(f"thread {k}: text {i}")

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == []
