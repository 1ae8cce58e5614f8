"""`ember serve` on an embedding model through the official openai client: /v1/embeddings
with a string, strings and token arrays, float and base64 (decoded as the client decodes
it), usage counts, the vectors the engine gives in-process; the refusals (bad input, too
long, a chat route on an encoder, embeddings from a chat model) as 400s with a reason."""
from __future__ import annotations

import json

import numpy as np
import pytest
from ember.engine import Embedder, Model
from openai import BadRequestError, OpenAI

from tests.support.server_process import ServerProcess
from tools import fetch_assets

TEXTS = ["A man is eating food.", "A man is eating a piece of bread.", "The girl is carrying a baby."]


@pytest.fixture(scope="module")
def minilm_path(tmp_path_factory):
    from tools.convert_minilm import convert
    return convert(fetch_assets.minilm_dir(), tmp_path_factory.mktemp("srv") / "all-MiniLM-L6-v2.F16.gguf",
                   "f16")


@pytest.fixture(scope="module")
def server(minilm_path, native_lib):
    s = ServerProcess(minilm_path)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def client(server):
    return OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def engine(minilm_path):
    model = Model(minilm_path)
    e = Embedder(model)
    yield e
    e.close()
    model.close()


def test_the_model_is_listed_and_loading_said_what_it_is(client, server):
    assert [m.id for m in client.models.list().data] == ["all-MiniLM-L6-v2.F16"]
    assert any("an embedding model: POST /v1/embeddings, 384 dimensions" in line
               for line in server.lines)


def test_strings_give_the_engines_vectors_and_usage(client, engine):
    r = client.embeddings.create(model="all-MiniLM-L6-v2.F16", input=TEXTS, encoding_format="float")
    assert r.object == "list" and r.model == "all-MiniLM-L6-v2.F16"
    assert [d.index for d in r.data] == [0, 1, 2]
    got = np.array([d.embedding for d in r.data], dtype=np.float32)
    want = engine.embed(TEXTS)
    assert got.shape == (3, 384)
    assert np.abs(got - want).max() < 1e-7  # JSON floats round-trip float32 exactly
    n = sum(len(engine.tokenize(t)) for t in TEXTS)
    assert r.usage.prompt_tokens == n and r.usage.total_tokens == n
    assert got[0] @ got[1] > got[0] @ got[2] + 0.4


def test_base64_is_what_the_client_decodes(client, engine):
    # the client asks for base64 by default and decodes it to floats itself
    r = client.embeddings.create(model="x", input="A man is eating food.")
    got = np.array(r.data[0].embedding, dtype=np.float32)
    assert np.abs(got - engine.embed(["A man is eating food."])[0]).max() == 0.0
    raw = client.embeddings.with_raw_response.create(model="x", input="A man is eating food.",
                                                     encoding_format="base64")
    body = json.loads(raw.text)
    assert isinstance(body["data"][0]["embedding"], str)


def test_token_arrays_get_the_special_tokens_a_string_gets(client, engine):
    ids = engine.tokenize("A man is eating food.")
    pieces = ids[1:-1]  # as a client's tokenizer would give them, without [CLS]/[SEP]
    r = client.embeddings.create(model="x", input=[pieces, ids], encoding_format="float")
    a, b = (np.array(d.embedding, dtype=np.float32) for d in r.data)
    want = engine.embed(["A man is eating food."])[0]
    assert np.abs(a - want).max() == 0.0 and np.abs(b - want).max() == 0.0
    assert r.usage.prompt_tokens == 2 * len(ids)
    one = client.embeddings.create(model="x", input=pieces, encoding_format="float")
    assert len(one.data) == 1 and np.abs(np.array(one.data[0].embedding) - want).max() < 1e-7


@pytest.mark.parametrize("body, says", [
    ({}, "'input' is required"),
    ({"input": []}, "must not be empty"),
    ({"input": ""}, "must not be an empty string"),
    ({"input": 5}, "must be a string, an array"),
    ({"input": ["ok", 3]}, "'input[1]' must be a string or a token array"),
    ({"input": [[101, "x"]]}, "must hold token ids"),
    ({"input": [[101, 10**9]]}, "outside the vocabulary"),
    ({"input": "hi", "encoding_format": "int8"}, "'encoding_format' must be 'float' or 'base64'"),
    ({"input": "hi", "dimensions": 128}, "384 dimensions"),
    ({"input": ["word " * 600]}, "maximum context length is 512 tokens, however input 0 has"),
])
def test_bad_requests_are_400_with_the_reason(server, body, says):
    status, _, raw = server.request("POST", "/v1/embeddings", body)
    assert status == 400, raw
    err = json.loads(raw)["error"]
    assert says in err["message"], err
    assert err["type"] == "invalid_request_error"


def test_too_long_is_context_length_exceeded_for_the_client(client):
    with pytest.raises(BadRequestError) as e:
        client.embeddings.create(model="x", input="word " * 600)
    assert e.value.code == "context_length_exceeded"
    # and the server still answers
    assert len(client.embeddings.create(model="x", input="still here").data) == 1


def test_generation_routes_say_it_is_an_embedding_model(client, server):
    with pytest.raises(BadRequestError, match="is an embedding model \\(bert\\): it makes vectors"):
        client.chat.completions.create(model="x", messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(BadRequestError, match="embedding model"):
        client.completions.create(model="x", prompt="hi")
    status, _, _ = server.request("GET", "/health")
    assert status == 200


def test_a_chat_model_refuses_embeddings_with_the_reason(starter_model_path, native_lib):
    s = ServerProcess(starter_model_path, "-c", "256")
    try:
        status, _, raw = s.request("POST", "/v1/embeddings", {"input": "hi"})
        assert status == 400
        err = json.loads(raw)["error"]
        assert "is a text-generation model (llama) and makes no embeddings" in err["message"]
        assert err["code"] == "model_not_embedding"
    finally:
        s.stop()
