"""A client that goes away cancels its generation: streaming or not, running or still
queued, the slot is free again (as /health counts it) and the next request is served. The
timeouts here are functional (a hung server fails instead of hanging the suite), not speed
requirements: that the slot was freed by a cancel, and not by finishing, is what /health's
counters show."""
from __future__ import annotations

import http.client
import json

import pytest

from tests.support.server_process import ServerProcess

MODEL = "SmolLM2-135M-Instruct.Q4_1"
# greedy runs long on this prompt without an end-of-generation token (tests/golden)
LONG = {"model": MODEL, "prompt": "Once upon a time, in a small village by the sea,",
        "max_tokens": 1500, "temperature": 0}


@pytest.fixture(scope="module")
def server(starter_model_path):
    s = ServerProcess(starter_model_path, "--parallel", "1", "-c", "2048")
    yield s
    s.stop()


def open_request(server, body: dict) -> http.client.HTTPConnection:
    conn = http.client.HTTPConnection(server.host, server.port, timeout=120)
    conn.request("POST", "/v1/completions", body=json.dumps(body),
                 headers={"Content-Type": "application/json"})
    return conn


def settled(server) -> dict:
    """/health once no slot works: a reply reaches its client a moment before its slot
    counts it finished."""
    return server.wait_for(lambda b: b["slots_idle"] == 1 and b["requests_waiting"] == 0)


def served_promptly(server) -> None:
    status, _, body = server.request("POST", "/v1/completions", {
        "model": MODEL, "prompt": "Hello", "max_tokens": 4, "temperature": 0})
    assert status == 200
    assert json.loads(body)["usage"]["completion_tokens"] == 4


def test_closing_a_stream_cancels_its_generation(server):
    before = settled(server)
    conn = open_request(server, {**LONG, "stream": True})
    r = conn.getresponse()
    assert r.status == 200
    seen = 0
    while seen < 5:  # a few tokens arrive: the generation runs
        line = r.fp.readline()
        if line.startswith(b"data: "):
            seen += 1
    assert server.health()[1]["slots_processing"] == 1
    conn.sock.close()
    conn.close()
    after = server.wait_for(lambda b: b["slots_idle"] == 1 and
                            b["requests_cancelled"] == before["requests_cancelled"] + 1)
    assert after["requests_finished"] == before["requests_finished"]
    served_promptly(server)


def test_leaving_a_whole_answer_cancels_it(server):
    before = settled(server)
    conn = open_request(server, LONG)
    server.wait_for(lambda b: b["slots_processing"] == 1)
    conn.sock.close()
    conn.close()
    server.wait_for(lambda b: b["slots_idle"] == 1 and
                    b["requests_cancelled"] == before["requests_cancelled"] + 1)
    served_promptly(server)


def test_a_queued_request_whose_client_left_is_skipped(server):
    before = settled(server)
    running = open_request(server, {**LONG, "stream": True})
    r = running.getresponse()
    assert r.status == 200
    queued = open_request(server, LONG)
    server.wait_for(lambda b: b["requests_waiting"] == 1)
    queued.sock.close()
    queued.close()
    running.sock.close()
    running.close()
    after = server.wait_for(lambda b: b["slots_idle"] == 1 and b["requests_waiting"] == 0 and
                            b["requests_cancelled"] == before["requests_cancelled"] + 2)
    assert after["requests_finished"] == before["requests_finished"]
    served_promptly(server)
