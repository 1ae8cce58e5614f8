#!/usr/bin/env python3
"""Soak runs: many generated tokens through repeated context-full events, many model
load/unload cycles, many context create/free cycles. Each prints the process's resident
memory (RSS, and RssAnon: the heap, which a leak grows; mapped weights are file pages),
open file descriptors and threads after a warm-up and at the end.

    python benchmarks/soak.py [--model PATH] [--tokens 20000] [--loads 1000] [--contexts 10000]

tests/engine/test_soak.py runs a short version of each and asserts no growth."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "app"))
sys.path.insert(0, str(ROOT))

from ember.engine import Model, Sampler, SamplingParams


@dataclass
class Usage:
    rss: int  # bytes
    rss_anon: int  # bytes
    fds: int
    threads: int


PROGRESS_EVERY = int(os.environ.get("SOAK_PROGRESS_EVERY", "0"))  # 0: no progress lines


def progress(what: str, i: int) -> None:
    if PROGRESS_EVERY and i % PROGRESS_EVERY == 0:
        u = usage()
        print(
            f"progress {what} {i} rss {u.rss} rss_anon {u.rss_anon} fds {u.fds} "
            f"threads {u.threads} t {time.time():.0f}",
            flush=True,
        )


def usage() -> Usage:
    fields = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            fields[key] = value.split()
    return Usage(
        int(fields["VmRSS"][0]) * 1024,
        int(fields["RssAnon"][0]) * 1024,
        len(os.listdir("/proc/self/fd")),
        int(fields["Threads"][0]),
    )


@dataclass
class SoakResult:
    what: str
    cycles: int
    seconds: float
    warm: Usage  # after the warm-up
    end: Usage
    peak_rss_anon: int  # the largest RssAnon sampled after the warm-up
    events: int = 0  # context-full events (tokens run only)

    def growth(self) -> dict:
        return {
            "rss_pct": 100.0 * (self.end.rss - self.warm.rss) / self.warm.rss,
            "rss_anon_pct": 100.0 * (self.end.rss_anon - self.warm.rss_anon) / self.warm.rss_anon,
            "peak_rss_anon_pct": 100.0
            * (self.peak_rss_anon - self.warm.rss_anon)
            / self.warm.rss_anon,
            "fds": self.end.fds - self.warm.fds,
            "threads": self.end.threads - self.warm.threads,
        }


def soak_tokens(
    model: Model, n_tokens: int, n_ctx: int = 256, n_keep: int = 32, warmup: int | None = None
) -> SoakResult:
    """Samples n_tokens at temperature 0.8; when the cache is full, keeps the last n_keep
    tokens, re-evaluates them from position 0 and goes on (a context-full event)."""
    ctx = model.new_context(n_ctx=n_ctx, n_threads=1)
    sampler = Sampler(SamplingParams(temperature=0.8, seed=7))
    lib, n_vocab = ctx._lib, model.n_vocab
    history = model.tokenize("Once upon a time, in a land far away,", add_special=True)
    ctx.decode(history, 0)
    model.layout_progress(wait=True)  # the background weight copy the first decode started
    pos, events = len(history), 0
    warmup = warmup if warmup is not None else max(n_ctx * 3, n_tokens // 10)
    warm, peak, t0 = None, 0, time.perf_counter()
    for i in range(n_tokens):
        if i == warmup:
            warm = usage()
        if pos >= n_ctx:
            history = history[-n_keep:]
            ctx.decode(history, 0)
            pos, events = len(history), events + 1
        tok = sampler.sample(lib.ember_get_logits(ctx._ctx, -1), n_vocab)
        sampler.accept(tok)
        history.append(tok)
        ctx.decode([tok], pos)
        pos += 1
        if warm is not None and i % 256 == 0:
            peak = max(peak, usage().rss_anon)
        progress("tokens", i)
    end = usage()
    sampler.close()
    ctx.close()
    return SoakResult(
        "tokens", n_tokens, time.perf_counter() - t0, warm, end, max(peak, end.rss_anon), events
    )


def soak_loads(path: Path, cycles: int, warmup: int = 10) -> SoakResult:
    """Loads the model, creates a context and decodes one token, closes both: cycles times."""
    warm, peak, t0 = None, 0, time.perf_counter()
    for i in range(cycles):
        if i == warmup:
            warm = usage()
        m = Model(path, n_ctx=64, n_threads=1)
        ctx = m.new_context(n_ctx=64, n_threads=1)
        ctx.decode([1], 0)
        ctx.close()
        m.close()
        if warm is not None:
            peak = max(peak, usage().rss_anon)
        progress("loads", i)
    end = usage()
    return SoakResult(
        "model load/unload", cycles, time.perf_counter() - t0, warm, end, max(peak, end.rss_anon)
    )


def soak_contexts(model: Model, cycles: int, warmup: int = 50) -> SoakResult:
    """Creates a context, decodes one token, frees it: cycles times."""
    warm, peak, t0 = None, 0, time.perf_counter()
    for i in range(cycles):
        if i == warmup:
            warm = usage()
        ctx = model.new_context(n_ctx=128, n_threads=1)
        ctx.decode([1], 0)
        ctx.close()
        if warm is not None and i % 16 == 0:
            peak = max(peak, usage().rss_anon)
        progress("contexts", i)
    end = usage()
    return SoakResult(
        "context create/free", cycles, time.perf_counter() - t0, warm, end, max(peak, end.rss_anon)
    )


def report(r: SoakResult) -> dict:
    row = {**asdict(r), "growth": r.growth()}
    g = r.growth()
    print(
        f"{r.what:20} {r.cycles:>6} cycles {r.seconds:8.1f} s  RSS {r.warm.rss / 2**20:7.1f} -> "
        f"{r.end.rss / 2**20:7.1f} MiB ({g['rss_pct']:+.2f}%)  RssAnon {r.warm.rss_anon / 2**20:6.1f} -> "
        f"{r.end.rss_anon / 2**20:6.1f} MiB ({g['rss_anon_pct']:+.2f}%, peak {g['peak_rss_anon_pct']:+.2f}%)  "
        f"fds {r.warm.fds}->{r.end.fds}  threads {r.warm.threads}->{r.end.threads}"
        + (f"  context-full events {r.events}" if r.events else ""),
        flush=True,
    )
    return row


def main() -> None:
    from tools import fetch_assets

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, default=None)
    ap.add_argument("--tokens", type=int, default=20_000)
    ap.add_argument("--loads", type=int, default=1000)
    ap.add_argument("--contexts", type=int, default=10_000)
    ap.add_argument("--json", type=Path, help="also write the figures here")
    a = ap.parse_args()
    path = a.model or fetch_assets.starter_model()
    rows = []
    model = Model(path, n_threads=1)
    if a.tokens:
        rows.append(report(soak_tokens(model, a.tokens)))
    if a.contexts:
        rows.append(report(soak_contexts(model, a.contexts)))
    model.close()
    if a.loads:
        rows.append(report(soak_loads(path, a.loads)))
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
