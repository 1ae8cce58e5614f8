#!/usr/bin/env python3
"""Speculative decoding's speed: generation tokens/s and the drafts' acceptance rate, plain
decoding beside prompt-lookup drafts and (with --draft) a draft model, on a code-editing
prompt and a chat prompt, each through the model's chat template. Every configuration of a
prompt runs in the same process, alternated round by round, so they share the machine's state;
greedy runs also check that the drafts left the reply unchanged.

    python benchmarks/speculative.py -m target.gguf [--draft small.gguf] [-n 128] [-t 2]
                                     [--temp 0] [--rounds 3] [--draft-max 16] [-o md|json]

Without -m: the starter model (SmolLM2-135M-Instruct Q4_1) from the test-asset cache.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
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


def run_once(model: Model, ids: list[int], n: int, params: SamplingParams,
             spec: SpeculativeParams | None, session: Session) -> GenerationStats:
    stats = GenerationStats()
    session.context.cached.clear()  # a fresh prefill each time, as a new request
    for _ in session.generate(ids, n, params, stats=stats, speculative=spec):
        pass
    return stats


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
    ap.add_argument("-o", "--output", choices=("md", "json"), default="md")
    a = ap.parse_args(argv)
    if a.model is None:
        from tools import fetch_assets
        a.model = str(fetch_assets.starter_model())

    target = Model(a.model, n_ctx=a.ctx_size, n_threads=a.threads)
    target.layout_progress(wait=True)  # time the kernels' layout, not the load's
    configs: list[tuple[str, SpeculativeParams | None]] = [
        ("plain", None), ("lookup", SpeculativeParams(lookup=True, draft_max=a.draft_max))]
    if a.draft:
        draft = Model(a.draft, n_ctx=a.ctx_size, n_threads=a.threads)
        draft.layout_progress(wait=True)
        configs.append(("draft model", SpeculativeParams(draft_model=draft, draft_max=a.draft_max)))
        configs.append(("lookup + draft model", SpeculativeParams(lookup=True, draft_model=draft,
                                                                  draft_max=a.draft_max)))
    params = SamplingParams(temperature=a.temp, seed=a.seed)
    session = Session(target.new_context(n_ctx=a.ctx_size))
    rows = []
    for name, text in PROMPTS.items():
        ids = prompt_ids(target, text, a.ctx_size)
        tps: dict[str, list[float]] = {c: [] for c, _ in configs}
        last: dict[str, GenerationStats] = {}
        run_once(target, ids, 8, params, None, session)  # warm-up
        for _ in range(a.rounds):
            for cname, spec in configs:
                st = run_once(target, ids, a.n, params, spec, session)
                tps[cname].append(st.generated_tokens / st.generation_seconds)
                last[cname] = st
        base = statistics.median(tps["plain"])
        for cname, _ in configs:
            st = last[cname]
            same = None
            if a.temp <= 0:
                same = st.token_ids == last["plain"].token_ids
            med = statistics.median(tps[cname])
            rows.append({"prompt": name, "prompt_tokens": len(ids), "mode": cname,
                         "generated": st.generated_tokens, "tps": round(med, 1),
                         "speedup": round(med / base, 2),
                         "acceptance": round(st.acceptance_rate, 3) if cname != "plain" else None,
                         "drafted": st.draft_tokens, "accepted": st.draft_accepted,
                         "same_tokens_as_plain": same})
    info = {"model": Path(a.model).name, "draft": Path(a.draft).name if a.draft else None,
            "threads": a.threads, "temperature": a.temp, "n": a.n, "rounds": a.rounds,
            "backend": target.context.backend}
    if a.output == "json":
        print(json.dumps({"info": info, "rows": rows}, indent=1))
        return 0
    print(f"{info['model']}" + (f", draft {info['draft']}" if a.draft else "")
          + f"; {a.threads} threads; temperature {a.temp}; {a.n} tokens; median of {a.rounds}; "
          f"{info['backend']}")
    print()
    print("| prompt | mode | t/s | speedup | drafted | accepted | acceptance | same tokens |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        acc = "" if r["acceptance"] is None else f"{100 * r['acceptance']:.0f}%"
        same = "" if r["same_tokens_as_plain"] is None else ("yes" if r["same_tokens_as_plain"] else "NO")
        print(f"| {r['prompt']} ({r['prompt_tokens']} tok) | {r['mode']} | {r['tps']} | "
              f"{r['speedup']:.2f}x | {r['drafted']} | {r['accepted']} | {acc} | {same} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
