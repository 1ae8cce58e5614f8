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


def test_a_slot_reused_with_a_shared_prefix_on_a_recurrent_model(golden_meta):
    """Qwen3.5's delta-net state cannot be cut back: a slot's next request that extends the
    last one (a chat's next turn) restarts from the snapshot before that prompt's last token;
    one that diverges earlier, where no snapshot lies, starts again from 0. Each reply must
    be the one a fresh model gives the same prompt."""
    from tools import make_arch_models
    from tools.make_variants import file_sha256_cached
    path = make_arch_models.build("qwen35")
    assert file_sha256_cached(path) == golden_meta["arch"]["families"]["qwen35"]["sha256"]

    def fresh(prompt):
        m = Model(path, n_ctx=256, n_threads=2)
        try:
            return "".join(m.generate(prompt, 10, SamplingParams(temperature=0)))
        finally:
            m.close()

    served = LoadedModel(path, n_slots=1, n_ctx=256, n_threads=2)

    async def ask(prompt) -> tuple[str, int]:
        req = parse_completion({"model": served.id, "prompt": prompt, "max_tokens": 10,
                                "temperature": 0}, served.ids, served.model.n_vocab)
        job = served.prepare(req, asyncio.get_running_loop())
        served.pool.submit(job)
        text = []
        while True:
            kind, value = await job.events.get()
            if kind == "text":
                text.append(value)
            else:
                return "".join(text), value.cached_tokens

    try:
        first = "Rivers run to the sea, and the sea gives back the rain. " * 3 + "First,"
        a1, c1 = asyncio.run(ask(first))
        assert (a1, c1) == (fresh(first), 0)
        second = first + a1 + " And then"          # the next turn: the last prompt and its reply
        a2, c2 = asyncio.run(ask(second))
        n_first = len(served.model.tokenize(first))
        assert a2 == fresh(second) and c2 == n_first - 1, (c2, n_first)
        third = "Rivers run to the sea. Lakes"      # diverges inside the first prompt
        a3, c3 = asyncio.run(ask(third))
        assert a3 == fresh(third) and c3 == 0
    finally:
        served.close()
