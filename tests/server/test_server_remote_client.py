"""ember.remote (the client the app can use for OpenAI-compatible endpoints) against a
real `ember serve`: models, streamed chat and completion equal to the server's whole
answers, usage and finish_reason, cancel, and readable errors (401, refused, timeout)."""
from __future__ import annotations

import socket

import pytest
from ember.remote import RemoteEndpoint, RemoteError

from tests.support.server_process import ServerProcess

KEY = "k-123"
MODEL = "SmolLM2-135M-Instruct.Q4_1"
MESSAGES = [{"role": "user", "content": "Name a fruit."}]


@pytest.fixture(scope="module")
def server(starter_model_path):
    s = ServerProcess(starter_model_path, "--parallel", "1", "-c", "2048", "--api-key", KEY)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def remote(server):
    return RemoteEndpoint(server.url, api_key=KEY, timeout=120)


def test_models_and_the_v1_prefix(server, remote):
    assert remote.models() == [MODEL]
    assert RemoteEndpoint(server.url + "/v1/", api_key=KEY).models() == [MODEL]


def test_streamed_chat_equals_the_whole_answer(server, remote):
    _, _, body = server.request("POST", "/v1/chat/completions", {
        "model": MODEL, "messages": MESSAGES, "max_tokens": 12, "temperature": 0},
        {"Authorization": f"Bearer {KEY}"})
    import json
    whole = json.loads(body)
    stream = remote.chat(MODEL, MESSAGES, max_tokens=12, temperature=0)
    text = "".join(stream)
    assert text == whole["choices"][0]["message"]["content"] and text
    assert stream.finish_reason == whole["choices"][0]["finish_reason"]
    counts = ("prompt_tokens", "completion_tokens", "total_tokens")
    assert [stream.usage[k] for k in counts] == [whole["usage"][k] for k in counts]
    # the same prompt again, on the one slot: all of it but the last token was cached
    assert stream.usage["prompt_tokens_details"]["cached_tokens"] == \
        whole["usage"]["prompt_tokens"] - 1


def test_streamed_completion(remote):
    stream = remote.complete(MODEL, "The capital of France is", max_tokens=6, temperature=0)
    pieces = list(stream)
    assert len(pieces) >= 2 and "".join(pieces).strip().startswith("Paris")
    assert stream.finish_reason == "length" and stream.usage["completion_tokens"] == 6


def test_cancel_drops_the_stream_and_frees_the_slot(server, remote):
    before = server.wait_for(lambda b: b["slots_idle"] == 1)
    stream = remote.complete(MODEL, "Once upon a time, in a small village by the sea,",
                             max_tokens=1500, temperature=0)
    got = []
    for piece in stream:
        got.append(piece)
        if len(got) == 3:
            stream.cancel()
    assert len(got) == 3  # the iteration ends quietly after a cancel
    server.wait_for(lambda b: b["slots_idle"] == 1 and
                    b["requests_cancelled"] == before["requests_cancelled"] + 1)


def test_a_wrong_key_is_unauthorized(server):
    with pytest.raises(RemoteError) as e:
        RemoteEndpoint(server.url, api_key="nope").models()
    assert e.value.kind == "unauthorized" and e.value.status == 401
    assert "API key" in e.value.message


def test_a_refused_request_is_an_http_error_with_the_servers_message(remote):
    # (any model name is answered by a one-model server: a prompt too long is refused)
    with pytest.raises(RemoteError) as e:
        list(remote.chat("gpt-4o", [{"role": "user", "content": "word " * 3000}]))
    assert e.value.kind == "http" and e.value.status == 400
    assert "2048 tokens" in e.value.message


def test_nothing_listening_is_refused():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    with pytest.raises(RemoteError) as e:
        RemoteEndpoint(f"http://127.0.0.1:{port}").models()
    assert e.value.kind == "refused" and "refused" in e.value.message


def test_a_server_that_never_answers_times_out():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)  # accepts the connection, never answers
        port = s.getsockname()[1]
        with pytest.raises(RemoteError) as e:
            RemoteEndpoint(f"http://127.0.0.1:{port}", timeout=0.5).models()
    assert e.value.kind == "timeout"


def test_only_http_addresses():
    for bad in ("ftp://example.org", "127.0.0.1:8080", "http://"):
        with pytest.raises(ValueError):
            RemoteEndpoint(bad)
