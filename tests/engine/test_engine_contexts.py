"""Several contexts on one model (what `ember serve --parallel N` runs): each has its own
KV cache, cached tokens and cancel flag; decoding on several threads at once gives each the
text it gets alone; a gated prefill cut into turns gives the same bits as one batch."""
from __future__ import annotations

import threading

import numpy as np
import pytest
from ember.engine import CancelledError, Context, DecodeGate, EmberError, Model, SamplingParams

PROMPT = "Once upon a time, in a small village by the sea,"
GREEDY = SamplingParams(temperature=0.0)


@pytest.fixture(scope="module")
def model(starter_model_path):
    m = Model(starter_model_path, n_ctx=512, n_threads=1)
    yield m
    m.close()


def test_contexts_keep_their_own_cache(model):
    a, b = model.new_context(), Context(model, n_ctx=128)
    assert (a.n_ctx, b.n_ctx) == (512, 128)
    ids = model.prompt_ids(PROMPT)
    a.decode(ids, 0)
    b.decode(ids[:3], 0)
    assert (a.n_past, b.n_past) == (len(ids), 3)
    expected = a.logits()
    b.decode(ids[3:], 3)  # b catches up; a's cache is untouched by b's decodes
    assert np.array_equal(b.logits(), expected)
    assert model.n_past == 0  # the default context is yet another one


def test_generations_on_several_threads_match_one_alone(model):
    alone = "".join(model.generate(PROMPT, 24, GREEDY))
    gate = DecodeGate(1)
    out: dict[int, str] = {}

    def run(k: int) -> None:
        out[k] = "".join(model.new_context(gate=gate).generate(PROMPT, 24, GREEDY))

    threads = [threading.Thread(target=run, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(alone) > 40 and out == {0: alone, 1: alone, 2: alone}


def test_a_gated_prefill_in_chunks_gives_the_same_bits(model):
    ids = model.prompt_ids("The history of the city " * 30)
    assert len(ids) > 3 * 16
    whole = model.new_context()
    whole.decode(ids, 0)
    chunked = model.new_context(gate=DecodeGate(1))
    chunked.gate_chunk = 16
    chunked.decode(ids, 0)
    assert np.array_equal(whole.logits(), chunked.logits())


def test_cancel_stops_only_its_own_context(model):
    a, b = model.new_context(), model.new_context()
    a.cancel()
    b.decode([1, 2, 3], 0)  # b is not cancelled
    assert b.n_past == 3
    with pytest.raises(CancelledError):
        a.decode([1, 2, 3], 0)
    a.reset_cancel()
    a.decode([1, 2, 3], 0)
    assert a.n_past == 3


def test_a_cancel_set_before_generation_starts_is_not_lost(model):
    ctx = model.new_context()
    early = threading.Event()
    early.set()
    from ember.engine import GenerationStats, Session
    stats = GenerationStats()
    pieces = list(Session(ctx).generate(PROMPT, 50, GREEDY, stats=stats, cancel=early))
    assert pieces == [] and stats.stop_reason == "cancelled"


def test_the_gate_hands_turns_out_in_arrival_order():
    gate = DecodeGate(1)
    order: list[int] = []
    started = []
    gate.__enter__()  # held, so the others queue up
    threads = []
    for k in range(4):
        ev = threading.Event()
        started.append(ev)

        def worker(k=k, ev=ev):
            ev.set()
            with gate:
                order.append(k)

        t = threading.Thread(target=worker)
        t.start()
        ev.wait()
        # the worker is queued once it waits: wait until the queue holds it
        while len(gate._waiting) < k + 1:
            threading.Event().wait(0.001)
        threads.append(t)
    gate.__exit__(None, None, None)
    for t in threads:
        t.join()
    assert order == [0, 1, 2, 3]


def test_closing_the_model_closes_its_contexts(starter_model_path):
    m = Model(starter_model_path, n_ctx=64, n_threads=1)
    ctx = m.new_context()
    ctx.decode([1, 2], 0)
    m.close()
    with pytest.raises(EmberError):
        ctx.decode([3], 2)
