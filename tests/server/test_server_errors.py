"""Bad requests to `ember serve` over raw HTTP: each gets a 4xx with an OpenAI-style error
body naming what is wrong, never a 500 or a traceback; the server keeps serving."""
from __future__ import annotations

import http.client
import json

import pytest

from tests.support.server_process import ServerProcess

N_CTX = 256
MODEL = "SmolLM2-135M-Instruct.Q4_1"
USER = [{"role": "user", "content": "Hi"}]
TOOL = {"type": "function", "function": {"name": "f", "parameters": {
    "type": "object", "properties": {"x": {"type": "string"}}}}}


@pytest.fixture(scope="module")
def server(starter_model_path):
    s = ServerProcess(starter_model_path, "-c", str(N_CTX))
    yield s
    s.stop()


def error_of(status: int, body: bytes, expected_status: int) -> dict:
    assert status == expected_status, body
    text = body.decode()
    assert "Traceback" not in text and 'File "' not in text
    err = json.loads(text)["error"]
    assert set(err) >= {"message", "type", "param", "code"} and err["message"]
    return err


def post(server, path, body, headers=None):
    return server.request("POST", path, body, headers)


@pytest.mark.parametrize("raw", [b"{not json", b'{"model": "x", ', b"\xff\xfe", b""])
def test_malformed_json_is_400(server, raw):
    status, _, body = post(server, "/v1/chat/completions", raw,
                           {"Content-Type": "application/json"})
    err = error_of(status, body, 400)
    assert "not valid JSON" in err["message"]


@pytest.mark.parametrize("doc", [[1, 2], "text", 3, None])
def test_a_body_that_is_not_an_object_is_400(server, doc):
    status, _, body = post(server, "/v1/completions", json.dumps(doc).encode(),
                           {"Content-Type": "application/json"})
    assert "JSON object" in error_of(status, body, 400)["message"]


@pytest.mark.parametrize("doc, param, code", [
    ({"model": MODEL}, "messages", "missing_required_parameter"),
    ({"model": MODEL, "messages": []}, "messages", "invalid_value"),
    ({"model": MODEL, "messages": "Hi"}, "messages", "invalid_type"),
    ({"model": MODEL, "messages": ["Hi"]}, "messages[0]", "invalid_type"),
    ({"model": MODEL, "messages": [{"content": "Hi"}]}, "messages[0].role", "invalid_type"),
    ({"model": MODEL, "messages": [{"role": "wizard", "content": "Hi"}]}, "messages[0].role",
     "invalid_value"),
    ({"model": MODEL, "messages": [{"role": "user"}]}, "messages[0].content",
     "missing_required_parameter"),
    ({"model": MODEL, "messages": [{"role": "user", "content": 5}]}, "messages[0].content",
     "invalid_type"),
    ({"model": MODEL, "messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "data:,"}}]}]}, "messages[0].content",
     "unsupported_content"),
    ({"model": 7, "messages": USER}, "model", "invalid_type"),
    ({"model": MODEL, "messages": USER, "temperature": "hot"}, "temperature", "invalid_type"),
    ({"model": MODEL, "messages": USER, "temperature": 9}, "temperature", "invalid_value"),
    ({"model": MODEL, "messages": USER, "max_tokens": 2.5}, "max_tokens", "invalid_type"),
    ({"model": MODEL, "messages": USER, "max_tokens": True}, "max_tokens", "invalid_type"),
    ({"model": MODEL, "messages": USER, "max_tokens": 0}, "max_tokens", "invalid_value"),
    ({"model": MODEL, "messages": USER, "top_p": [1]}, "top_p", "invalid_type"),
    ({"model": MODEL, "messages": USER, "seed": "1"}, "seed", "invalid_type"),
    ({"model": MODEL, "messages": USER, "stop": 5}, "stop", "invalid_type"),
    ({"model": MODEL, "messages": USER, "stop": ["a"] * 5}, "stop", "invalid_value"),
    ({"model": MODEL, "messages": USER, "stream": "yes"}, "stream", "invalid_type"),
    ({"model": MODEL, "messages": USER, "stream_options": 1}, "stream_options",
     "invalid_type"),
    ({"model": MODEL, "messages": USER, "presence_penalty": 3}, "presence_penalty",
     "invalid_value"),
    ({"model": MODEL, "messages": USER, "n": 17}, "n", "invalid_value"),
    ({"model": MODEL, "messages": USER, "n": "2"}, "n", "invalid_type"),
    ({"model": MODEL, "messages": USER, "tools": [{"type": "function"}]}, "tools[0].function",
     "invalid_type"),
    ({"model": MODEL, "messages": USER, "tools": {"type": "function"}}, "tools", "invalid_type"),
    ({"model": MODEL, "messages": USER, "tools": [{"type": "retrieval"}]}, "tools[0].type",
     "invalid_value"),
    ({"model": MODEL, "messages": USER, "tools": [{"type": "function", "function": {
        "name": "has space"}}]}, "tools[0].function.name", "invalid_value"),
    ({"model": MODEL, "messages": USER, "tools": [{"type": "function", "function": {
        "name": "f", "parameters": "{}"}}]}, "tools[0].function.parameters", "invalid_type"),
    ({"model": MODEL, "messages": USER, "tools": [{"type": "function", "function": {
        "name": "f", "parameters": {"type": "array"}}}]}, "tools[0].function.parameters",
     "invalid_value"),
    ({"model": MODEL, "messages": USER, "tools": [TOOL, TOOL]}, "tools", "invalid_value"),
    ({"model": MODEL, "messages": USER, "tools": [TOOL], "tool_choice": "always"},
     "tool_choice", "invalid_value"),
    ({"model": MODEL, "messages": USER, "tools": [TOOL], "tool_choice": {
        "type": "function", "function": {"name": "g"}}}, "tool_choice", "invalid_value"),
    ({"model": MODEL, "messages": USER, "tool_choice": "required"}, "tool_choice",
     "invalid_value"),
    ({"model": MODEL, "messages": USER, "tools": [TOOL], "parallel_tool_calls": "no"},
     "parallel_tool_calls", "invalid_type"),
    ({"model": MODEL, "messages": [*USER, {"role": "assistant", "tool_calls": [
        {"id": "1", "type": "function", "function": {"name": "f", "arguments": "{oops"}}]}]},
     "messages[1].tool_calls[0].function.arguments", "invalid_value"),
    ({"model": MODEL, "messages": [*USER, {"role": "assistant", "tool_calls": "f()"}]},
     "messages[1].tool_calls", "invalid_type"),
    ({"model": MODEL, "messages": [*USER, {"role": "tool", "content": "1",
                                          "tool_call_id": 5}]},
     "messages[1].tool_call_id", "invalid_type"),
    # a well-formed tool, but the starter's template (ChatML without tools) cannot take it
    ({"model": MODEL, "messages": USER, "tools": [TOOL]}, "tools", "unsupported_parameter"),
])
def test_chat_request_errors_name_the_field(server, doc, param, code):
    status, _, body = post(server, "/v1/chat/completions", doc)
    err = error_of(status, body, 400)
    assert (err["param"], err["code"], err["type"]) == (param, code, "invalid_request_error")


@pytest.mark.parametrize("doc, param", [
    ({"model": MODEL}, "prompt"),
    ({"model": MODEL, "prompt": 12}, "prompt"),
    ({"model": MODEL, "prompt": [1, "a"]}, "prompt"),
    ({"model": MODEL, "prompt": [10**9]}, "prompt"),
    ({"model": MODEL, "prompt": ["one", "two"]}, "prompt"),
    ({"model": MODEL, "prompt": "x", "echo": True}, "echo"),
    ({"model": MODEL, "prompt": "x", "frequency_penalty": "lots"}, "frequency_penalty"),
])
def test_completion_request_errors_name_the_field(server, doc, param):
    status, _, body = post(server, "/v1/completions", doc)
    assert error_of(status, body, 400)["param"] == param


def test_a_prompt_longer_than_the_context_is_400(server):
    status, _, body = post(server, "/v1/chat/completions", {
        "model": MODEL, "messages": [{"role": "user", "content": "word " * (2 * N_CTX)}]})
    err = error_of(status, body, 400)
    assert err["code"] == "context_length_exceeded" and f"{N_CTX} tokens" in err["message"]
    status, _, body = post(server, "/v1/completions",
                           {"model": MODEL, "prompt": list(range(10, 10 + N_CTX))})
    assert error_of(status, body, 400)["code"] == "context_length_exceeded"


def test_an_oversized_body_is_413(server):
    big = json.dumps({"model": MODEL, "prompt": "x" * (5 * 1024 * 1024)}).encode()
    status, _, body = post(server, "/v1/completions", big, {"Content-Type": "application/json"})
    assert error_of(status, body, 413)["code"] == "request_too_large"


def test_an_oversized_chunked_body_is_413(server):
    # no Content-Length: the limit holds while the body streams in
    conn = http.client.HTTPConnection(server.host, server.port, timeout=120)
    try:
        chunks = (b"x" * 65536 for _ in range(80))  # 5 MiB
        conn.request("POST", "/v1/completions", body=chunks, encode_chunked=True,
                     headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        assert error_of(r.status, r.read(), 413)["code"] == "request_too_large"
    finally:
        conn.close()


def test_unknown_paths_and_methods_get_json_errors(server):
    status, _, body = server.request("GET", "/v1/engines")
    error_of(status, body, 404)
    status, _, body = server.request("GET", "/v1/chat/completions")
    error_of(status, body, 405)


def test_the_server_still_answers_after_all_that(server):
    status, _, body = post(server, "/v1/chat/completions",
                           {"model": MODEL, "messages": USER, "max_tokens": 4})
    assert status == 200
    assert json.loads(body)["choices"][0]["message"]["role"] == "assistant"
