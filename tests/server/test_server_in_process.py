"""The server's engine side in this process, on a model someone else loaded (the app's):
its slots are new contexts on those weights, a reply through them is the model's own greedy
text, and closing the server leaves the model working."""
from __future__ import annotations

import asyncio

from ember.engine import Model, SamplingParams
from ember.server.engine_state import LoadedModel
from ember.server.protocol import parse_completion

PROMPT = "The capital of France is"


def test_serving_a_borrowed_model_leaves_it_open(starter_model_path):
    model = Model(starter_model_path, n_ctx=256, n_threads=1)
    alone = "".join(model.generate(PROMPT, 12, SamplingParams(temperature=0)))
    served = LoadedModel(starter_model_path, n_slots=2, n_ctx=256, n_threads=1, model=model)
    assert served.model is model and len(served.pool.contexts) == 2

    async def ask() -> tuple[str, object]:
        req = parse_completion({"model": served.id, "prompt": PROMPT, "max_tokens": 12,
                                "temperature": 0}, served.ids, model.n_vocab)
        job = served.prepare(req, asyncio.get_running_loop())
        served.pool.submit(job)
        text = []
        while True:
            kind, value = await job.events.get()
            if kind == "text":
                text.append(value)
            else:
                return "".join(text), value

    text, finish = asyncio.run(ask())
    assert text == alone and finish.reason == "length" and finish.completion_tokens == 12
    served.close()
    assert "".join(model.generate(PROMPT, 12, SamplingParams(temperature=0))) == alone
    model.close()
