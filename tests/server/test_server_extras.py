"""llama-server's extra endpoints on `ember serve`: /tokenize and /detokenize against the
engine's own tokenizer, /apply-template against the chat template rendered here, /props,
and /metrics read by the Prometheus client's own parser, its counters against the usage of
the requests that were answered."""
from __future__ import annotations

import json
import time

import pytest
from ember.chat import ChatTemplate
from ember.engine import Model
from openai import OpenAI
from prometheus_client.parser import text_string_to_metric_families

from tests.support.server_process import ServerProcess

N_CTX = 512
TEXT = "Héllo wörld, 日本語 <|im_start|>user"
MESSAGES = [{"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Name a colour."}]


@pytest.fixture(scope="module")
def server(starter_model_path):
    s = ServerProcess(starter_model_path, "-c", str(N_CTX), "--parallel", "2")
    yield s
    s.stop()


@pytest.fixture(scope="module")
def vocab(starter_model_path):
    return Model(starter_model_path, vocab_only=True)


def post(server, path, body):
    status, _, raw = server.request("POST", path, body)
    return status, json.loads(raw)


def test_tokenize_is_the_engines_tokenizer(server, vocab):
    status, body = post(server, "/tokenize", {"content": TEXT})
    assert status == 200
    assert body["tokens"] == vocab.tokenize(TEXT, add_special=False, parse_special=True)
    assert vocab.token_text(body["tokens"][-2]) == "<|im_start|>"  # parsed as the special token
    _, plain = post(server, "/tokenize", {"content": TEXT, "parse_special": False,
                                          "add_special": True})
    assert plain["tokens"] == vocab.tokenize(TEXT, add_special=True, parse_special=False)
    assert len(plain["tokens"]) > len(body["tokens"])


def test_tokenize_with_pieces_spells_the_text(server):
    _, body = post(server, "/tokenize", {"content": TEXT, "with_pieces": True})
    pieces = body["tokens"]
    assert all(set(p) == {"id", "piece"} for p in pieces)
    raw = b"".join(p["piece"].encode() if isinstance(p["piece"], str) else bytes(p["piece"])
                   for p in pieces)
    assert raw.decode() == TEXT
    assert any(isinstance(p["piece"], list) for p in pieces)  # a character split over tokens


def test_detokenize_round_trips(server):
    _, ids = post(server, "/tokenize", {"content": TEXT})
    status, body = post(server, "/detokenize", {"tokens": ids["tokens"]})
    assert status == 200 and body["content"] == TEXT
    assert post(server, "/detokenize", {"tokens": []})[1] == {"content": ""}


@pytest.mark.parametrize("path, body, param", [
    ("/tokenize", {}, "content"), ("/tokenize", {"content": 5}, "content"),
    ("/tokenize", {"content": "a", "with_pieces": "yes"}, "with_pieces"),
    ("/detokenize", {"tokens": [10 ** 9]}, "tokens"), ("/detokenize", {"tokens": "1 2"}, "tokens"),
    ("/apply-template", {"messages": []}, "messages"),
])
def test_bad_bodies_are_400(server, path, body, param):
    status, err = post(server, path, body)
    assert status == 400 and err["error"]["param"] == param


def test_apply_template_is_the_prompt_the_chat_gets(server, vocab):
    template = ChatTemplate.from_metadata(vocab.metadata, token_text=vocab.token_text)
    status, body = post(server, "/apply-template", {"messages": MESSAGES})
    assert status == 200 and body["prompt"] == template.prompt(MESSAGES).text
    prefill = [*MESSAGES, {"role": "assistant", "content": "Blue is"}]
    _, body = post(server, "/apply-template", {"messages": prefill})
    assert body["prompt"].endswith("<|im_start|>assistant\nBlue is")


def test_props(server, vocab, starter_model_path):
    status, _, raw = server.request("GET", "/props")
    props = json.loads(raw)
    assert status == 200
    assert props["default_generation_settings"]["n_ctx"] == N_CTX
    assert props["total_slots"] == 2
    assert props["chat_template"] == vocab.metadata["tokenizer.chat_template"]
    assert props["model_path"] == str(starter_model_path)
    assert props["model_alias"] == "SmolLM2-135M-Instruct.Q4_1"
    assert props["ember"]["tool_calls"] is None  # ChatML without tools


def scrape(server) -> dict[str, float]:
    status, headers, raw = server.request("GET", "/metrics")
    assert status == 200 and headers["content-type"].startswith("text/plain; version=0.0.4")
    out = {}
    for family in text_string_to_metric_families(raw.decode()):
        for sample in family.samples:
            out[sample.name] = sample.value
    return out


def test_metrics_count_what_was_answered(server):
    client = OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=300)
    before = scrape(server)
    assert before["ember_requests_processing"] == 0 and before["ember_slots_idle"] == 2
    usages = [client.chat.completions.create(model="m", messages=MESSAGES, max_tokens=n,
                                             temperature=0).usage for n in (3, 5)]
    want_predicted = before["ember_tokens_predicted_total"] + sum(
        u.completion_tokens for u in usages)
    deadline = time.monotonic() + 10
    while True:  # the slot adds its counts just after the answer went out
        after = scrape(server)
        if after["ember_requests_finished_total"] >= before["ember_requests_finished_total"] + 2 \
                or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert after["ember_requests_finished_total"] == before["ember_requests_finished_total"] + 2
    assert after["ember_tokens_predicted_total"] == want_predicted
    assert after["ember_prompt_tokens_total"] == before["ember_prompt_tokens_total"] + sum(
        u.prompt_tokens for u in usages)
    assert after["ember_tokens_predicted_seconds_total"] > before[
        "ember_tokens_predicted_seconds_total"]


def test_slots_list_each_context(server, vocab):
    client = OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=300)
    r = client.chat.completions.create(model="m", messages=MESSAGES, max_tokens=3,
                                       temperature=0)
    status, _, raw = server.request("GET", "/slots")
    slots = json.loads(raw)
    assert status == 200 and [s["id"] for s in slots] == [0, 1]
    assert all(s["n_ctx"] == N_CTX and s["is_processing"] is False for s in slots)
    # the slot that answered holds the prompt and the reply but its last token
    assert r.usage.total_tokens - 1 in {s["n_cached_tokens"] for s in slots}
