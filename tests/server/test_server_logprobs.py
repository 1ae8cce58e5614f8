"""logprobs / top_logprobs on /v1/chat/completions, through the official openai client, in
OpenAI's shape, against a log-softmax of the engine's own logits computed here (teacher-forced
over the prompt and the tokens the server chose), streamed and whole; and the bad values."""
from __future__ import annotations

import numpy as np
import pytest
from ember.chat import ChatTemplate
from ember.engine import Model
from openai import BadRequestError, OpenAI

from tests.support.server_process import ServerProcess

N_CTX = 512
MESSAGES = [{"role": "user", "content": "Name a colour."}]
N_TOKENS, TOP = 12, 5


@pytest.fixture(scope="module")
def server(starter_model_path):
    s = ServerProcess(starter_model_path, "--parallel", "1", "-c", str(N_CTX))
    yield s
    s.stop()


@pytest.fixture(scope="module")
def client(server):
    return OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=300)


@pytest.fixture(scope="module")
def reference(starter_model_path):
    """(model, prompt ids): the prompt the server renders for MESSAGES."""
    m = Model(starter_model_path, n_ctx=N_CTX, n_threads=1)
    template = ChatTemplate.from_metadata(m.metadata, token_text=m.token_text)
    yield m, m.prompt_ids(template.prompt(MESSAGES).text)
    m.close()


def log_softmax(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    return x - (x.max() + np.log(np.exp(x - x.max()).sum()))


def check_against_the_engine(entries, reference, sampled: bool):
    m, prompt = reference
    by_piece = {}
    chosen = []
    for e in entries:  # the token ids back from their bytes (unique for these short runs)
        ids = [t for t in range(m.n_vocab) if m.token_to_piece(t) == bytes(e.bytes)] \
            if bytes(e.bytes) not in by_piece else by_piece[bytes(e.bytes)]
        by_piece[bytes(e.bytes)] = ids
        assert len(ids) == 1, e.token
        chosen.append(ids[0])
    rows = m.eval_logits(prompt + chosen, first=len(prompt) - 1)[:len(chosen)]
    for e, tok, row in zip(entries, chosen, rows):
        lp = log_softmax(row)
        assert e.logprob == pytest.approx(lp[tok], abs=1e-4)
        assert e.token == m.token_to_piece(tok).decode("utf-8", errors="replace")
        want = np.argsort(-lp, kind="stable")[:TOP]
        assert [t.bytes for t in e.top_logprobs] == [list(m.token_to_piece(int(t)))
                                                     for t in want]
        assert [t.logprob for t in e.top_logprobs] == pytest.approx(lp[want], abs=1e-4)
        if not sampled:  # greedy: the chosen token is the likeliest one
            assert e.top_logprobs[0].bytes == e.bytes
    return chosen


def test_whole_answer_logprobs_are_the_engines(client, reference):
    r = client.chat.completions.create(model="SmolLM2-135M-Instruct.Q4_1", messages=MESSAGES,
                                       max_tokens=N_TOKENS, temperature=0, logprobs=True,
                                       top_logprobs=TOP)
    entries = r.choices[0].logprobs.content
    assert len(entries) == r.usage.completion_tokens >= 1
    chosen = check_against_the_engine(entries, reference, sampled=False)
    m, _ = reference
    assert m.detokenize(chosen) == r.choices[0].message.content


def test_streamed_chunks_carry_their_own_tokens(client, reference):
    stream = client.chat.completions.create(
        model="SmolLM2-135M-Instruct.Q4_1", messages=MESSAGES, max_tokens=N_TOKENS,
        temperature=0.9, seed=7, logprobs=True, top_logprobs=TOP, stream=True,
        stream_options={"include_usage": True})
    entries, text, usage = [], "", None
    for chunk in stream:
        if chunk.usage:
            usage = chunk.usage
        if not chunk.choices or chunk.choices[0].delta.content is None:
            continue
        c = chunk.choices[0]
        if c.delta.content:
            assert c.logprobs.content  # every text chunk names the tokens it completes
            assert "".join(e.token for e in c.logprobs.content) == c.delta.content
        entries += c.logprobs.content if c.logprobs else []
        text += c.delta.content
    assert len(entries) == usage.completion_tokens
    check_against_the_engine(entries, reference, sampled=True)


def test_without_logprobs_there_are_none(client):
    r = client.chat.completions.create(model="SmolLM2-135M-Instruct.Q4_1", messages=MESSAGES,
                                       max_tokens=4, temperature=0)
    assert r.choices[0].logprobs is None
    r = client.chat.completions.create(model="SmolLM2-135M-Instruct.Q4_1", messages=MESSAGES,
                                       max_tokens=4, temperature=0, logprobs=True)
    assert all(e.top_logprobs == [] for e in r.choices[0].logprobs.content)


@pytest.mark.parametrize("fields, param", [
    ({"top_logprobs": 2}, "top_logprobs"),  # without logprobs: true
    ({"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
    ({"logprobs": "yes"}, "logprobs"),
])
def test_bad_logprobs_fields_are_a_400(client, fields, param):
    with pytest.raises(BadRequestError) as e:
        client.chat.completions.create(model="SmolLM2-135M-Instruct.Q4_1", messages=MESSAGES,
                                       max_tokens=2, extra_body=fields)
    assert e.value.body["param"] == param
