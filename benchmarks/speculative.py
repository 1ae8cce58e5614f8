#!/usr/bin/env python3
"""Speculative decoding's speed: generation tokens/s and the drafts' acceptance rate, plain
decoding beside prompt-lookup drafts and (with --draft) a draft model, on a code-editing
prompt and a chat prompt, each through the model's chat template. Every configuration of a
prompt runs in the same process, alternated round by round, so they share the machine's state;
greedy runs also check that the drafts left the reply unchanged.

    python benchmarks/speculative.py -m target.gguf [--draft small.gguf] [-n 128] [-t 2]
                                     [--temp 0] [--rounds 3] [--draft-max 16] [--fixed]
                                     [--scripted N] [-o md|json]

Without -m: the starter model (SmolLM2-135M-Instruct Q4_1) from the test-asset cache.
Two speeds per row: tokens per second of wall time, and per second of the process's CPU
time (after the first token), which a shared machine's load moves far less (use -t 1 there).
--fixed drafts --draft-max tokens every pass (no adaptive length). --scripted N adds a
configuration whose drafts are the plain greedy reply with one token in N wrong: the
verification's cost and gain at a known acceptance, on any file (random-weight shapes too,
where no real draft agrees with the model).
"""
from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "app"))
sys.path.insert(0, str(ROOT))

from ember.chat import ChatTemplate, GenRequest, build_prompt  # noqa: E402
from ember.engine import GenerationStats, Model, SamplingParams, Session, SpeculativeParams  # noqa: E402

CODE = '''import csv
from dataclasses import dataclass


@dataclass
class Order:
    customer: str
    item: str
    quantity: int
    unit_price: float


def load_orders(path):
    orders = []
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            orders.append(Order(row["customer"], row["item"], int(row["quantity"]),
                                float(row["unit_price"])))
    return orders


def total_by_customer(orders):
    totals = {}
    for order in orders:
        totals[order.customer] = totals.get(order.customer, 0.0) + order.quantity * order.unit_price
    return totals


def print_report(orders):
    totals = total_by_customer(orders)
    for customer in sorted(totals):
        print(f"{customer}: {totals[customer]:.2f}")
'''

PROMPTS = {
    "code-edit": ("Rename the class Order to Purchase everywhere in this code and give back the "
                  "whole file:\n\n```python\n" + CODE + "```"),
    "chat": "Write a short story about a lighthouse keeper who finds a message in a bottle.",
}


def prompt_ids(model: Model, text: str, n_ctx: int) -> list[int]:
    template = ChatTemplate.from_metadata(model.metadata, token_text=model.token_text)
    built = build_prompt(model, n_ctx, template,
                         GenRequest(0, 0, [{"role": "user", "content": text}], max_new_tokens=16,
                                    params=SamplingParams()))
    return built.ids


class ScriptedDrafts:
    """The known reply as drafts, each token wrong with probability 1/n (drawn once per
    position, so every configuration and round meets the same wrong ones; not every n-th,
    whose period a draft length can lock onto)."""

    def __init__(self, prompt_len: int, reply: list[int], n_vocab: int, every: int):
        rng = random.Random(every)
        self.prompt_len, self.n_vocab = prompt_len, n_vocab
        self.reply = [(t + 1) % n_vocab if rng.random() < 1.0 / every else t for t in reply]

    def propose(self, history: list[int], n_max: int) -> list[int]:
        at = len(history) - self.prompt_len
        return self.reply[at:at + n_max]


def run_once(model: Model, ids: list[int], n: int, params: SamplingParams,
             spec: SpeculativeParams | None, session: Session) -> GenerationStats:
    """One request on a fresh prefill; stats.cpu_tps: tokens after the first one per second
    of the process's CPU time (what other programs' load on a shared machine moves least,
    with one engine thread: no thread waits at a barrier for another to be scheduled)."""
    stats = GenerationStats()
    session.context.cached.clear()  # a fresh prefill each time, as a new request
    c0 = n0 = None
    for _ in session.generate(ids, n, params, stats=stats, speculative=spec):
        if c0 is None:
            c0, n0 = time.process_time(), len(stats.token_ids)
    c1 = time.process_time()
    stats.cpu_tps = (len(stats.token_ids) - n0) / (c1 - c0) if c0 is not None and c1 > c0 else 0.0
    return stats


def pass_costs(model: Model, n_ctx: int, sizes=(1, 2, 4, 8, 16), reps: int = 7) -> dict[int, float]:
    """CPU milliseconds of one decode of n tokens (every row's logits kept, as a pass keeps
    them) after 256 tokens of context: what a pass with n - 1 drafts costs against a plain
    step. Median of reps."""
    ctx = model.new_context(n_ctx=n_ctx)
    ids = [(7 * i + 11) % model.n_vocab for i in range(256 + max(sizes))]
    ctx.decode(ids[:256], 0)
    out = {}
    for n in sizes:
        times = []
        for _ in range(reps):
            c = time.process_time()
            ctx.decode(ids[256:256 + n], 256, all_logits=True)
            times.append(time.process_time() - c)
        out[n] = 1000 * statistics.median(times)
    ctx.close()
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-m", "--model", default=None)
    ap.add_argument("--draft", default=None, help="a draft model with the same vocabulary")
    ap.add_argument("-n", type=int, default=128, help="tokens to generate")
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("-c", "--ctx-size", type=int, default=2048)
    ap.add_argument("--temp", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--draft-max", type=int, default=16)
    ap.add_argument("--fixed", action="store_true", help="no adaptive draft length")
    ap.add_argument("--scripted", type=int, default=0, metavar="N",
                    help="also draft the plain reply with one token in N wrong")
    ap.add_argument("-o", "--output", choices=("md", "json"), default="md")
    a = ap.parse_args(argv)
    if a.model is None:
        from tools import fetch_assets
        a.model = str(fetch_assets.starter_model())

    target = Model(a.model, n_ctx=a.ctx_size, n_threads=a.threads)
    target.layout_progress(wait=True)  # time the kernels' layout, not the load's
    adaptive = not a.fixed
    configs: list[tuple[str, SpeculativeParams | None]] = [
        ("plain", None),
        ("lookup", SpeculativeParams(lookup=True, draft_max=a.draft_max, adaptive=adaptive))]
    if a.draft:
        draft = Model(a.draft, n_ctx=a.ctx_size, n_threads=a.threads)
        draft.layout_progress(wait=True)
        configs.append(("draft model", SpeculativeParams(draft_model=draft, draft_max=a.draft_max,
                                                         adaptive=adaptive)))
        configs.append(("lookup + draft model", SpeculativeParams(
            lookup=True, draft_model=draft, draft_max=a.draft_max, adaptive=adaptive)))
    costs = pass_costs(target, a.ctx_size)
    params = SamplingParams(temperature=a.temp, seed=a.seed)
    session = Session(target.new_context(n_ctx=a.ctx_size))
    rows = []
    for name, text in PROMPTS.items():
        ids = prompt_ids(target, text, a.ctx_size)
        run_once(target, ids, 8, params, None, session)  # warm-up
        these = list(configs)
        if a.scripted:
            reply = run_once(target, ids, a.n, SamplingParams(temperature=0.0), None, session).token_ids
            these.append((f"scripted (1 in {a.scripted} wrong)", SpeculativeParams(
                drafter=ScriptedDrafts(len(ids), reply, target.n_vocab, a.scripted),
                draft_max=a.draft_max, adaptive=adaptive)))
        tps: dict[str, list[float]] = {c: [] for c, _ in these}
        cpu: dict[str, list[float]] = {c: [] for c, _ in these}
        last: dict[str, GenerationStats] = {}
        for _ in range(a.rounds):
            for cname, spec in these:
                st = run_once(target, ids, a.n, params, spec, session)
                tps[cname].append(st.generated_tokens / st.generation_seconds)
                cpu[cname].append(st.cpu_tps)
                last[cname] = st
        base = statistics.median(tps["plain"])
        cpu_base = statistics.median(cpu["plain"])
        for cname, _ in these:
            st = last[cname]
            same = None
            if a.temp <= 0:
                same = st.token_ids == last["plain"].token_ids
            med = statistics.median(tps[cname])
            cmed = statistics.median(cpu[cname])
            rows.append({"prompt": name, "prompt_tokens": len(ids), "mode": cname,
                         "generated": st.generated_tokens, "tps": round(med, 1),
                         "speedup": round(med / base, 2), "cpu_tps": round(cmed, 1),
                         "cpu_speedup": round(cmed / cpu_base, 2) if cpu_base else None,
                         "acceptance": round(st.acceptance_rate, 3) if cname != "plain" else None,
                         "drafted": st.draft_tokens, "accepted": st.draft_accepted,
                         "same_tokens_as_plain": same})
    info = {"model": Path(a.model).name, "draft": Path(a.draft).name if a.draft else None,
            "threads": a.threads, "temperature": a.temp, "n": a.n, "rounds": a.rounds,
            "adaptive": adaptive, "draft_max": a.draft_max,
            "backend": target.context.backend, "pass_cpu_ms": costs}
    if a.output == "json":
        print(json.dumps({"info": info, "rows": rows}, indent=1))
        return 0
    print(f"{info['model']}" + (f", draft {info['draft']}" if a.draft else "")
          + f"; {a.threads} threads; temperature {a.temp}; {a.n} tokens; median of {a.rounds}; "
          f"draft length {'adaptive' if adaptive else 'fixed'}, at most {a.draft_max}; {info['backend']}")
    print()
    print("CPU ms of one pass of n tokens: " + ", ".join(
        f"n={n} {ms:.1f} ({ms / costs[1]:.2f}x)" for n, ms in costs.items()))
    print()
    print("| prompt | mode | t/s (wall) | speedup | t/CPU-s | speedup | drafted | accepted | "
          "acceptance | same tokens |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        acc = "" if r["acceptance"] is None else f"{100 * r['acceptance']:.0f}%"
        same = "" if r["same_tokens_as_plain"] is None else ("yes" if r["same_tokens_as_plain"] else "NO")
        print(f"| {r['prompt']} ({r['prompt_tokens']} tok) | {r['mode']} | {r['tps']} | "
              f"{r['speedup']:.2f}x | {r['cpu_tps']} | {r['cpu_speedup']:.2f}x | {r['drafted']} | "
              f"{r['accepted']} | {acc} | {same} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
