"""`ember serve` with speculative decoding: every slot drafts (prompt lookup and a draft
model), a greedy reply is the model's own plain greedy text, /metrics counts the drafts,
and a draft model with another vocabulary stops the server with the reason."""
from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

from ember.engine import Model, SamplingParams, SpeculativeParams
from ember.server.engine_state import LoadedModel
from ember.server.extras import metrics_text
from ember.server.protocol import parse_completion

from tools import make_arch_models

PROMPT = ("def area(width, height):\n    return width * height\n\n"
          "# the same function, with w and h for width and height:\n"
          "def area(w, h):\n")
APP = str(Path(__file__).resolve().parents[2] / "app")


def ask(served: LoadedModel, n: int) -> tuple[str, object]:
    async def run():
        req = parse_completion({"model": served.id, "prompt": PROMPT, "max_tokens": n,
                                "temperature": 0}, served.ids, served.model.n_vocab)
        job = served.prepare(req, asyncio.get_running_loop())
        served.pool.submit(job)
        text = []
        while True:
            kind, value = await job.events.get()
            if kind == "text":
                text.append(value)
            elif kind == "error":
                raise AssertionError(value)
            else:
                return "".join(text), value
    return asyncio.run(run())


def test_slots_draft_and_reply_as_plain_greedy(model_variants):
    model = Model(model_variants["Q4_1"], n_ctx=512, n_threads=2)
    alone = "".join(model.generate(PROMPT, 40, SamplingParams(temperature=0)))
    draft = Model(model_variants["Q4_0"], n_ctx=512, n_threads=2)
    spec = SpeculativeParams(lookup=True, draft_model=draft, draft_max=6, adaptive=False)
    served = LoadedModel(model.path, n_slots=2, n_ctx=512, n_threads=2, model=model,
                         speculative=spec)
    try:
        for _ in range(2):  # the second reuses the slot's cache and its draft context
            text, finish = ask(served, 40)
            assert text == alone and finish.completion_tokens == 40
        m = served.pool.metrics()
        assert m["draft_tokens"] > 0 and 0 < m["draft_tokens_accepted"] <= m["draft_tokens"]
        assert f"ember_draft_tokens_total {m['draft_tokens']}" in metrics_text(served)
    finally:
        served.close()
    model.close()


def test_serve_refuses_a_draft_model_with_another_vocabulary(starter_model_path):
    other = make_arch_models.build("qwen3")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([APP, os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-m", "ember", "serve", "-m", str(starter_model_path),
                        "--port", "0", "-md", str(other), "-t", "1"],
                       check=False, capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 1
    assert "cannot draft" in r.stderr and "vocabulary sizes differ" in r.stderr
