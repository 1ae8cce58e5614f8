"""Short soak runs (benchmarks/soak.py has the long ones and docs/RELIABILITY.md their
figures): generating through repeated context-full events, creating and freeing contexts,
loading and unloading the model, with no growth in memory, file descriptors or threads.

Tolerances. File descriptors and threads must come back exactly. Resident memory is noisier:
glibc keeps freed blocks in its arenas and trims them when it likes, so between load cycles
the heap (RssAnon) swings by up to about 6 MiB with no leak at all (measured over 80 cycles
of the starter model). The bounds below sit above that noise and far below what one leaked
object per cycle would add: a leaked context is its KV cache (2.8 MiB at n_ctx 128) times
150 cycles, a leaked model its vocabulary and tables (several MiB) times 30 cycles."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from ember.engine import Model
from soak import soak_contexts, soak_loads, soak_tokens

pytestmark = pytest.mark.native
MiB = 1 << 20
HEAP_NOISE = 8 * MiB


@pytest.fixture(scope="module")
def model(starter_model_path):
    m = Model(starter_model_path, n_threads=1)
    yield m
    m.close()


def test_generating_through_context_full_events_does_not_grow(model):
    r = soak_tokens(model, 480, n_ctx=64, n_keep=16, warmup=120)
    assert r.events >= 6  # the cache filled and was refilled many times
    assert r.end.fds == r.warm.fds and r.end.threads == r.warm.threads
    # the bound for the long run, here over a short one
    assert abs(r.end.rss - r.warm.rss) <= 0.02 * r.warm.rss
    assert r.peak_rss_anon - r.warm.rss_anon <= 2 * MiB  # no allocation in the token loop


def test_creating_and_freeing_contexts_does_not_grow(model):
    r = soak_contexts(model, 200, warmup=50)
    assert r.end.fds == r.warm.fds and r.end.threads == r.warm.threads
    assert r.peak_rss_anon - r.warm.rss_anon <= HEAP_NOISE


def test_loading_and_unloading_the_model_does_not_grow(starter_model_path):
    r = soak_loads(starter_model_path, 40, warmup=10)
    assert r.end.fds == r.warm.fds and r.end.threads == r.warm.threads
    assert r.peak_rss_anon - r.warm.rss_anon <= HEAP_NOISE
    assert r.end.rss - r.warm.rss <= HEAP_NOISE  # the mapping is gone with the model
