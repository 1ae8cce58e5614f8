"""`ember serve` through the official openai client: chat/completions and completions,
streamed and whole, with the chunk rules clients rely on, usage, stop strings, seeds,
penalties against a reference computation, and greedy text equal to `ember run`'s."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from ember.chat import ChatTemplate
from ember.engine import Model
from openai import OpenAI

from tests.support.server_process import APP, ServerProcess

N_CTX = 1024
MESSAGES = [{"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "Name three colours of the rainbow."}]
PROMPT = "The capital of France is"


@pytest.fixture(scope="module")
def server(starter_model_path):
    s = ServerProcess(starter_model_path, "--parallel", "2", "-c", str(N_CTX))
    yield s
    s.stop()


@pytest.fixture(scope="module")
def client(server):
    return OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=300)


@pytest.fixture(scope="module")
def model_id(client):
    return client.models.list().data[0].id


@pytest.fixture(scope="module")
def vocab(starter_model_path):
    return Model(starter_model_path, vocab_only=True)


def ember_run(model_path, prompt: str, n: int) -> str:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([APP, os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-m", "ember", "run", "-m", str(model_path), "-p", prompt,
                        "-n", str(n), "--temp", "0", "-c", str(N_CTX)],
                       capture_output=True, text=True, check=True, env=env, timeout=600)
    assert r.stdout.endswith("\n")
    return r.stdout[:-1]


def test_models_lists_the_file(client, starter_model_path):
    models = client.models.list().data
    assert [m.id for m in models] == ["SmolLM2-135M-Instruct.Q4_1"]
    assert models[0].owned_by == "ember"


def test_greedy_completion_equals_ember_run(client, model_id, starter_model_path):
    r = client.completions.create(model=model_id, prompt=PROMPT, max_tokens=32, temperature=0)
    expected = ember_run(starter_model_path, PROMPT, 32)
    assert r.choices[0].text == expected
    assert len(expected) > 20
    assert r.choices[0].finish_reason == "length"
    assert r.usage.completion_tokens == 32
    assert r.usage.prompt_tokens == 5 and r.usage.total_tokens == 37


def test_greedy_chat_equals_ember_run_on_the_rendered_template(client, model_id, vocab,
                                                               starter_model_path):
    template = ChatTemplate.from_metadata(vocab.metadata, token_text=vocab.token_text)
    rendered = template.prompt(MESSAGES).text
    assert "<|im_start|>assistant" in rendered  # the model's own (ChatML) template
    r = client.chat.completions.create(model=model_id, messages=MESSAGES, max_tokens=24,
                                       temperature=0)
    msg = r.choices[0].message
    assert msg.role == "assistant"
    assert msg.content == ember_run(starter_model_path, rendered, 24)
    assert r.usage.prompt_tokens == len(vocab.prompt_ids(rendered))
    assert r.object == "chat.completion" and r.id.startswith("chatcmpl-")


def test_streamed_chat_follows_the_chunk_rules(client, model_id):
    whole = client.chat.completions.create(model=model_id, messages=MESSAGES, max_tokens=16,
                                           temperature=0).choices[0].message.content
    chunks = list(client.chat.completions.create(
        model=model_id, messages=MESSAGES, max_tokens=16, temperature=0, stream=True,
        stream_options={"include_usage": True}))
    assert len({c.id for c in chunks}) == 1
    assert chunks[0].choices[0].delta.role == "assistant"
    content = [c for c in chunks if c.choices]
    finishes = [c.choices[0].finish_reason for c in content]
    assert finishes[:-1] == [None] * (len(content) - 1) and finishes[-1] == "length"
    assert not content[-1].choices[0].delta.content  # the finishing chunk carries no text
    assert "".join(c.choices[0].delta.content or "" for c in content) == whole
    usage_chunk = chunks[-1]
    assert usage_chunk.choices == [] and usage_chunk.usage.completion_tokens == 16
    assert all(c.usage is None for c in chunks[:-1])


def test_stream_without_include_usage_ends_with_the_finish_chunk(server, model_id):
    status, headers, body = server.request("POST", "/v1/completions", {
        "model": model_id, "prompt": PROMPT, "max_tokens": 4, "temperature": 0, "stream": True})
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    events = [e for e in body.decode().split("\n\n") if e]
    assert events[-1] == "data: [DONE]"
    import json
    last = json.loads(events[-2][len("data: "):])
    assert last["choices"][0]["finish_reason"] == "length" and "usage" not in last


def test_streamed_completion_equals_the_whole_one(client, model_id):
    whole = client.completions.create(model=model_id, prompt=PROMPT, max_tokens=20,
                                      temperature=0)
    chunks = list(client.completions.create(model=model_id, prompt=PROMPT, max_tokens=20,
                                            temperature=0, stream=True))
    assert "".join(c.choices[0].text for c in chunks) == whole.choices[0].text
    assert chunks[-1].choices[0].finish_reason == "length"
    assert chunks[-1].choices[0].text == ""


def test_stop_string_ends_the_text_before_it(client, model_id, starter_model_path):
    full = client.completions.create(model=model_id, prompt=PROMPT, max_tokens=32,
                                     temperature=0).choices[0].text
    # a stop string from inside the greedy text: the answer ends right before it
    stop = full[12:17]
    assert stop.strip() and full.index(stop) == 12
    r = client.completions.create(model=model_id, prompt=PROMPT, max_tokens=32, temperature=0,
                                  stop=[stop, "never-occurs"])
    assert r.choices[0].text == full[:12]
    assert r.choices[0].finish_reason == "stop"
    streamed = list(client.completions.create(model=model_id, prompt=PROMPT, max_tokens=32,
                                              temperature=0, stop=stop, stream=True))
    assert "".join(c.choices[0].text for c in streamed) == full[:12]
    assert streamed[-1].choices[0].finish_reason == "stop"


def test_chat_ends_at_the_models_end_of_turn_with_stop(client, model_id):
    r = client.chat.completions.create(model=model_id, max_tokens=200, temperature=0,
                                       messages=[{"role": "user", "content": "Say yes."}])
    assert r.choices[0].finish_reason == "stop"
    assert r.usage.completion_tokens < 200
    assert "<|im_end|>" not in r.choices[0].message.content


def test_same_seed_same_text(client, model_id):
    def sample(seed):
        return client.completions.create(model=model_id, prompt="Once upon a time",
                                         max_tokens=24, temperature=1.0, seed=seed
                                         ).choices[0].text
    a, b, c = sample(1234), sample(1234), sample(99)
    assert a == b
    assert a != c  # and the seed matters


def test_frequency_and_presence_penalty_match_a_reference(client, model_id, starter_model_path):
    """Greedy with penalties, recomputed here from the engine's logits: each step's token is
    argmax(logit - count * frequency - (count > 0) * presence), counts over the tokens
    generated so far (OpenAI's definition; the prompt does not count)."""
    freq, pres, n = 1.5, 1.0, 32
    r = client.completions.create(model=model_id, prompt=PROMPT, max_tokens=n, temperature=0,
                                  frequency_penalty=freq, presence_penalty=pres)
    plain = client.completions.create(model=model_id, prompt=PROMPT, max_tokens=n,
                                      temperature=0).choices[0].text
    m = Model(starter_model_path, n_ctx=128, n_threads=1)
    ids = m.prompt_ids(PROMPT)
    generated: list[int] = []
    counts = np.zeros(m.n_vocab)
    for _ in range(n):
        logits = m.eval_logits(ids + generated)[-1].astype(np.float64)
        logits -= counts * freq + (counts > 0) * pres
        tok = int(np.argmax(logits))
        generated.append(tok)
        counts[tok] += 1
    expected = m.detokenize(generated)
    m.close()
    assert r.choices[0].text == expected
    assert expected != plain  # the penalties changed something


def test_parallel_requests_each_get_their_own_greedy_text(client, model_id):
    from concurrent.futures import ThreadPoolExecutor
    prompts = ["The capital of France is", "Once upon a time", "def fibonacci(n):",
               "The capital of France is"]
    alone = [client.completions.create(model=model_id, prompt=p, max_tokens=16,
                                       temperature=0).choices[0].text for p in prompts]
    with ThreadPoolExecutor(4) as ex:
        together = list(ex.map(lambda p: client.completions.create(
            model=model_id, prompt=p, max_tokens=16, temperature=0).choices[0].text, prompts))
    assert together == alone


def test_token_id_prompt_equals_the_text_prompt(client, model_id, vocab):
    ids = vocab.prompt_ids(PROMPT)
    a = client.completions.create(model=model_id, prompt=ids, max_tokens=8, temperature=0)
    b = client.completions.create(model=model_id, prompt=PROMPT, max_tokens=8, temperature=0)
    assert a.choices[0].text == b.choices[0].text


def test_a_reply_longer_than_the_context_ends_with_length(client, model_id):
    r = client.completions.create(model=model_id, prompt="word " * (N_CTX - 8), max_tokens=500,
                                  temperature=0)
    assert r.choices[0].finish_reason == "length"
    assert r.usage.prompt_tokens + r.usage.completion_tokens == N_CTX


def test_a_chats_next_turn_goes_to_the_slot_that_holds_its_history(client, model_id, vocab):
    """Two slots: after turn one of chat A and a different chat B, A's second turn lands on
    the slot whose cache holds A, so only its new tokens are evaluated."""
    first = [{"role": "user", "content": "Tell me about the history of bread in Egypt."}]
    a1 = client.chat.completions.create(model=model_id, messages=first, max_tokens=8,
                                        temperature=0)
    assert a1.usage.prompt_tokens_details.cached_tokens == 0
    client.completions.create(model=model_id, prompt="Unrelated text about rivers.",
                              max_tokens=4, temperature=0)
    second = first + [{"role": "assistant", "content": a1.choices[0].message.content},
                      {"role": "user", "content": "And in Rome?"}]
    a2 = client.chat.completions.create(model=model_id, messages=second, max_tokens=4,
                                        temperature=0)
    cached = a2.usage.prompt_tokens_details.cached_tokens
    assert cached >= a1.usage.prompt_tokens  # turn one's prompt at least was kept
    assert cached < a2.usage.prompt_tokens


JAPANESE = [{"role": "user", "content": "おやすみなさい、と日本語で言ってください。"}]


def _complete_characters(data: bytes) -> str:
    """data decoded up to its last whole character (what a reply cut there can show)."""
    import codecs
    return codecs.getincrementaldecoder("utf-8")().decode(data)


def test_a_reply_cut_inside_a_character_holds_the_incomplete_bytes_back(client, model_id):
    cut_inside = 0
    for n in range(1, 7):
        r = client.chat.completions.create(model=model_id, messages=JAPANESE, max_tokens=n,
                                           temperature=0, logprobs=True)
        data = b"".join(bytes(e.bytes) for e in r.choices[0].logprobs.content)
        assert len(r.choices[0].logprobs.content) == n
        content = r.choices[0].message.content
        assert "\ufffd" not in content
        assert content == _complete_characters(data)
        cut_inside += content.encode() != data
        streamed = list(client.chat.completions.create(model=model_id, messages=JAPANESE,
                                                       max_tokens=n, temperature=0,
                                                       stream=True, logprobs=True))
        assert "".join(c.choices[0].delta.content or "" for c in streamed
                       if c.choices) == content
        # every token's logprob arrives, those of a character cut off too
        assert sum(len(c.choices[0].logprobs.content) for c in streamed
                   if c.choices and c.choices[0].logprobs) == n
    assert cut_inside  # some limits fell inside a multi-byte character
