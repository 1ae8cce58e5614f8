"""What clients written for OpenAI or llama-server expect of a one-model server, through
the official openai client: any model name answered by the one model (which the answer
names), strict names behind --strict-model-names, the paths without /v1, the context
overflow error with both servers' fields, and the API key as X-Api-Key too."""
from __future__ import annotations

import json

import openai
import pytest
from openai import OpenAI

from tests.support.server_process import ServerProcess

N_CTX = 256
MODEL = "SmolLM2-135M-Instruct.Q4_1"
KEY = "k3y-for-tests"
USER = [{"role": "user", "content": "Say hi."}]


@pytest.fixture(scope="module")
def server(starter_model_path):
    s = ServerProcess(starter_model_path, "-c", str(N_CTX), "--api-key", KEY)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def client(server):
    return OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0, timeout=300)


@pytest.mark.parametrize("name", ["gpt-3.5-turbo-instruct", "davinci-002", MODEL])
def test_any_model_name_is_answered_by_the_one_model(client, name):
    r = client.completions.create(model=name, prompt="The sky is", max_tokens=3, temperature=0)
    assert r.model == MODEL and r.choices[0].text
    c = client.chat.completions.create(model=name, messages=USER, max_tokens=3, temperature=0)
    assert c.model == MODEL and c.choices[0].message.content


def test_the_same_answer_whatever_the_name(client):
    texts = {client.chat.completions.create(model=name, messages=USER, max_tokens=8,
                                            temperature=0).choices[0].message.content
             for name in ("gpt-4o", MODEL)}
    assert len(texts) == 1


def test_streamed_chunks_name_the_model_that_answered(client):
    chunks = list(client.chat.completions.create(model="gpt-4o", messages=USER, max_tokens=3,
                                                 temperature=0, stream=True))
    assert chunks and {c.model for c in chunks} == {MODEL}


def test_a_request_without_model_is_answered(server):
    status, _, body = server.request("POST", "/v1/chat/completions",
                                     {"messages": USER, "max_tokens": 2},
                                     {"X-Api-Key": KEY})
    assert status == 200 and json.loads(body)["model"] == MODEL


def test_paths_without_v1_as_llama_server(server):
    bare = OpenAI(base_url=server.url, api_key=KEY, max_retries=0, timeout=300)
    assert [m.id for m in bare.models.list().data] == [MODEL]
    r = bare.chat.completions.create(model="x", messages=USER, max_tokens=3, temperature=0)
    assert r.choices[0].message.content and r.model == MODEL
    r = bare.completions.create(model="x", prompt="One, two,", max_tokens=3, temperature=0)
    assert r.choices[0].text


def test_context_overflow_is_shaped_for_both_kinds_of_client(client):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=MODEL, max_tokens=4, messages=[
            {"role": "user", "content": "word " * (2 * N_CTX)}])
    err = e.value.body  # the client's parse of the error object
    assert e.value.code == "context_length_exceeded" and e.value.param == "messages"
    assert err["n_ctx"] == N_CTX and err["n_prompt_tokens"] > N_CTX
    assert f"{N_CTX} tokens" in err["message"] and str(err["n_prompt_tokens"]) in err["message"]
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model=MODEL, prompt=list(range(10, 10 + N_CTX)))
    assert e.value.code == "context_length_exceeded"
    assert (e.value.body["n_prompt_tokens"], e.value.body["n_ctx"]) == (N_CTX, N_CTX)


def test_x_api_key_beside_authorization(server):
    chat = {"model": MODEL, "messages": USER, "max_tokens": 2}
    status, _, body = server.request("POST", "/v1/chat/completions", chat, {"X-Api-Key": KEY})
    assert status == 200, body
    status, _, body = server.request("GET", "/v1/models", headers={"x-api-key": KEY})
    assert status == 200 and json.loads(body)["data"][0]["id"] == MODEL
    for headers in ({"X-Api-Key": "wrong"}, {"X-Api-Key": ""},
                    {"Authorization": "Bearer wrong", "X-Api-Key": KEY}):
        status, _, body = server.request("POST", "/v1/chat/completions", chat, headers)
        assert status == 401 and json.loads(body)["error"]["code"] == "invalid_api_key"
    wrong_key = OpenAI(base_url=server.url + "/v1", api_key="nope", max_retries=0,
                       default_headers={"X-Api-Key": KEY})
    with pytest.raises(openai.AuthenticationError):  # a wrong bearer token is not overruled
        wrong_key.models.list()


@pytest.fixture(scope="module")
def strict_server(starter_model_path):
    s = ServerProcess(starter_model_path, "-c", "128", "--strict-model-names")
    yield s
    s.stop()


def test_strict_model_names_refuse_other_names(strict_server):
    client = OpenAI(base_url=strict_server.url + "/v1", api_key="unused", max_retries=0)
    with pytest.raises(openai.NotFoundError) as e:
        client.chat.completions.create(model="gpt-4o", messages=USER, max_tokens=2)
    assert e.value.code == "model_not_found" and MODEL in e.value.body["message"]
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=None, messages=USER, max_tokens=2)
    assert e.value.code == "missing_required_parameter" and e.value.param == "model"
    for name in (MODEL, MODEL + ".gguf"):
        r = client.chat.completions.create(model=name, messages=USER, max_tokens=2)
        assert r.model == MODEL
