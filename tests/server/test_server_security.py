"""Who may use `ember serve`: the Host header must name the server (DNS rebinding), pages
from other origins are refused unless --cors names them, --api-key needs the bearer token
(/health stays open), and /health says 503 while the model loads."""
from __future__ import annotations

import asyncio
import json

import pytest
from ember.server.app import ServerState, build_app
from ember.server.guard import HostPolicy, split_host

from tests.support.server_process import ServerProcess

MODEL = "SmolLM2-135M-Instruct.Q4_1"
CHAT = {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}
KEY = "s3cret-key"
SITE = "http://localhost:3000"


@pytest.fixture(scope="module")
def server(starter_model_path):
    s = ServerProcess(starter_model_path, "-c", "256", "--api-key", KEY, "--cors", SITE)
    yield s
    s.stop()


def auth(key=KEY):
    return {"Authorization": f"Bearer {key}"}


def test_host_header_of_another_name_is_refused(server):
    for host in ("evil.example", f"evil.example:{server.port}", "127.0.0.1.evil.example",
                 "localhost.evil.example"):
        status, _, body = server.request("POST", "/v1/chat/completions", CHAT,
                                         {**auth(), "Host": host})
        assert status == 403, host
        assert json.loads(body)["error"]["code"] == "host_not_allowed"
    status, _, _ = server.request("GET", "/health", headers={"Host": "evil.example"})
    assert status == 403  # even the open endpoint: a rebinding page learns nothing


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "localhost:{port}", "LOCALHOST",
                                  "127.0.0.1"])
def test_host_header_naming_the_server_is_served(server, host):
    status, _, body = server.request("POST", "/v1/chat/completions", CHAT,
                                     {**auth(), "Host": host.format(port=server.port)})
    assert status == 200, body


def test_api_key_missing_or_wrong_is_401(server):
    status, headers, body = server.request("POST", "/v1/chat/completions", CHAT)
    assert status == 401 and headers.get("www-authenticate") == "Bearer"
    err = json.loads(body)["error"]
    assert err["code"] == "invalid_api_key" and "No API key" in err["message"]
    for h in (auth("wrong"), {"Authorization": KEY}, {"Authorization": "Basic " + KEY}):
        status, _, body = server.request("POST", "/v1/chat/completions", CHAT, h)
        assert status == 401 and json.loads(body)["error"]["code"] == "invalid_api_key"
    status, _, _ = server.request("GET", "/v1/models")
    assert status == 401
    status, _, body = server.request("GET", "/v1/models", headers=auth())
    assert status == 200 and json.loads(body)["data"][0]["id"] == MODEL


def test_health_needs_no_key(server):
    status, body = server.health()
    assert status == 200 and body["status"] == "ok"


def test_a_page_of_another_origin_is_refused(server):
    status, headers, body = server.request("POST", "/v1/chat/completions", CHAT,
                                           {**auth(), "Origin": "http://evil.example"})
    assert status == 403 and json.loads(body)["error"]["code"] == "origin_not_allowed"
    assert "access-control-allow-origin" not in headers


def test_the_cors_origin_may_call_and_preflight(server):
    status, headers, _ = server.request("OPTIONS", "/v1/chat/completions", headers={
        "Origin": SITE, "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type"})
    assert status == 200 and headers["access-control-allow-origin"] == SITE
    assert "authorization" in headers["access-control-allow-headers"].lower()
    status, headers, _ = server.request("POST", "/v1/chat/completions", CHAT,
                                        {**auth(), "Origin": SITE})
    assert status == 200 and headers["access-control-allow-origin"] == SITE


def test_no_cors_headers_without_cors(starter_model_path):
    s = ServerProcess(starter_model_path, "-c", "128")
    try:
        origin = "http://localhost:3000"
        status, headers, _ = s.request("POST", "/v1/chat/completions", CHAT, {"Origin": origin})
        assert status == 403 and "access-control-allow-origin" not in headers
        status, headers, _ = s.request("POST", "/v1/chat/completions", CHAT)
        assert status == 200 and "access-control-allow-origin" not in headers
    finally:
        s.stop()


def test_host_policy_by_bound_address():
    loop = HostPolicy("127.0.0.1")
    assert loop.allows("localhost:8080") and loop.allows("[::1]:8080")
    assert not loop.allows("192.168.1.20:8080") and not loop.allows("attacker.example")
    every = HostPolicy("0.0.0.0")
    assert every.allows("192.168.1.20:8080") and not every.allows("attacker.example")
    proxied = HostPolicy("127.0.0.1", ("llm.internal",))
    assert proxied.allows("LLM.internal:443")
    assert split_host("[::1]:80") == ("::1", 80) and split_host("Example.COM.") == ("example.com", None)


def _asgi_get(app, path: str) -> tuple[int, dict]:
    sent = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": "GET", "path": path, "raw_path": path.encode(),
             "query_string": b"", "headers": [(b"host", b"127.0.0.1:8080")],
             "scheme": "http", "server": ("127.0.0.1", 8080), "client": ("127.0.0.1", 5000),
             "http_version": "1.1", "root_path": "", "asgi": {"version": "3.0"}}
    asyncio.run(app(scope, receive, send))
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return sent[0]["status"], json.loads(body)


def test_health_is_503_while_the_model_loads():
    app = build_app(ServerState("model.gguf"), host="127.0.0.1")  # nothing loaded yet
    for path in ("/health", "/v1/models"):
        status, body = _asgi_get(app, path)
        assert status == 503 and body["error"]["type"] == "unavailable_error"
