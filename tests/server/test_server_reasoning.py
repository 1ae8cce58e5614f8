"""A thinking model's reasoning through `ember serve` and the openai client: the <think>
block in `reasoning_content` beside `content` (whole, and as reasoning_content deltas before
the content ones), left in content with reasoning_format "none", a constrained reply all
content, and untouched replies of models that do not think."""
from __future__ import annotations

import openai
import pytest
from openai import OpenAI

from tests.support.chain_models import reasoning_model
from tests.support.server_process import ServerProcess

USER = [{"role": "user", "content": "Hello!"}]


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    path = reasoning_model().write(tmp_path_factory.mktemp("think") / "reasoning.gguf")
    s = ServerProcess(path, "-c", "256")
    yield OpenAI(base_url=s.url + "/v1", api_key="unused", max_retries=0, timeout=300)
    s.stop()


def test_reasoning_content_beside_content(client):
    r = client.chat.completions.create(model="m", messages=USER, temperature=0, max_tokens=7)
    msg = r.choices[0].message
    assert msg.reasoning_content == "Hmm, a greeting."
    assert msg.content == "Hi there"


def test_streamed_reasoning_comes_first_as_its_own_deltas(client):
    kinds, reasoning, content = [], "", ""
    for chunk in client.chat.completions.create(model="m", messages=USER, temperature=0,
                                                max_tokens=7, stream=True):
        for choice in chunk.choices:
            delta = choice.delta
            r = getattr(delta, "reasoning_content", None)
            if r:
                reasoning += r
                kinds.append("reasoning")
            if delta.content:
                content += delta.content
                kinds.append("content")
    assert (reasoning, content) == ("Hmm, a greeting.", "Hi there")
    assert kinds.index("content") > max(i for i, k in enumerate(kinds) if k == "reasoning")


def test_reasoning_format_none_leaves_it_in_content(client):
    r = client.chat.completions.create(model="m", messages=USER, temperature=0, max_tokens=7,
                                       extra_body={"reasoning_format": "none"})
    msg = r.choices[0].message
    assert getattr(msg, "reasoning_content", None) is None
    assert msg.content == "Hmm, a greeting.</think>Hi there"
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="m", messages=USER, max_tokens=2,
                                       extra_body={"reasoning_format": "html"})
    assert e.value.param == "reasoning_format"


def test_a_model_that_does_not_think_has_no_reasoning_content(starter_model_path):
    s = ServerProcess(starter_model_path, "-c", "256")
    try:
        c = OpenAI(base_url=s.url + "/v1", api_key="unused", max_retries=0)
        whole = c.chat.completions.create(model="m", messages=USER, temperature=0,
                                          max_tokens=12).choices[0].message
        assert getattr(whole, "reasoning_content", None) is None and whole.content
        streamed = "".join(ch.choices[0].delta.content or "" for ch in c.chat.completions.create(
            model="m", messages=USER, temperature=0, max_tokens=12, stream=True) if ch.choices)
        assert streamed == whole.content
    finally:
        s.stop()


def test_a_constrained_reply_is_all_content(client):
    # the prompt opens a thinking block, but the grammar holds the whole reply: nothing of it
    # is reasoning (llama-server's grammar field; response_format takes the same path)
    r = client.chat.completions.create(model="m", messages=USER, temperature=0, max_tokens=12,
                                       extra_body={"grammar": 'root ::= "Hmm, a greeting."'})
    msg = r.choices[0].message
    assert getattr(msg, "reasoning_content", None) is None
    assert (msg.content, r.choices[0].finish_reason) == ("Hmm, a greeting.", "stop")
