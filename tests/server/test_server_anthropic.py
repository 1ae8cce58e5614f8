"""Anthropic's Messages API on `ember serve` through the official anthropic client (pinned
in requirements-test.txt): the same greedy text as the OpenAI endpoint, system prompts,
stop sequences and stop reasons, streaming events as the client assembles them, x-api-key,
count_tokens, errors in Anthropic's shape, and tool use (blocks, streamed input, results
fed back, tool_choice) on the chain models of test_server_tools."""
from __future__ import annotations

import json

import anthropic
import jsonschema
import pytest
from ember.chat import ChatTemplate
from ember.engine import Model
from openai import OpenAI

from tests.support.chain_models import hermes_tools_model, llama_tools_model
from tests.support.server_process import ServerProcess

MODEL = "SmolLM2-135M-Instruct.Q4_1"
KEY = "anthropic-test-key"
USER = [{"role": "user", "content": "Name three colours of the rainbow."}]
SYSTEM = "You are a terse assistant."
T0 = {"temperature": 0}  # greedy (the 2.x client has no sampling arguments of its own)
TOOLS = [{"name": "get_weather", "description": "The weather in a city over some days.",
          "input_schema": {"type": "object", "properties": {
              "city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}},
         {"name": "get_time", "description": "The time in a city.",
          "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]


@pytest.fixture(scope="module")
def server(starter_model_path):
    s = ServerProcess(starter_model_path, "-c", "1024", "--api-key", KEY)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def client(server):
    return anthropic.Anthropic(base_url=server.url, api_key=KEY, max_retries=0, timeout=300)


@pytest.fixture(scope="module")
def openai_client(server):
    return OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0, timeout=300)


def test_the_same_greedy_text_as_the_openai_endpoint(client, openai_client):
    r = client.messages.create(model="claude-any-name", max_tokens=16, extra_body=T0,
                               system=SYSTEM, messages=USER)
    o = openai_client.chat.completions.create(
        model="m", max_tokens=16, temperature=0,
        messages=[{"role": "system", "content": SYSTEM}, *USER])
    assert r.type == "message" and r.role == "assistant" and r.model == MODEL
    assert r.id.startswith("msg_")
    assert [b.type for b in r.content] == ["text"]
    assert r.content[0].text == o.choices[0].message.content
    assert r.stop_reason == "max_tokens" and r.stop_sequence is None
    assert r.usage.input_tokens == o.usage.prompt_tokens
    assert r.usage.output_tokens == o.usage.completion_tokens == 16


def test_system_as_text_blocks_is_the_same_prompt(client):
    a = client.messages.create(model="m", max_tokens=8, extra_body=T0, system=SYSTEM,
                               messages=USER)
    b = client.messages.create(model="m", max_tokens=8, extra_body=T0,
                               system=[{"type": "text", "text": SYSTEM}],
                               messages=[{"role": "user", "content": [
                                   {"type": "text", "text": USER[0]["content"]}]}])
    assert a.content[0].text == b.content[0].text
    assert a.usage.input_tokens == b.usage.input_tokens


def test_end_turn_and_stop_sequence(client):
    r = client.messages.create(model="m", max_tokens=300, extra_body=T0, messages=[
        {"role": "user", "content": "Say hello."}])
    assert r.stop_reason == "end_turn"
    words = r.content[0].text.split()
    assert len(words) >= 2
    stop = " " + words[1]
    cut = client.messages.create(model="m", max_tokens=300, extra_body=T0, messages=[
        {"role": "user", "content": "Say hello."}], stop_sequences=[stop])
    assert cut.stop_reason == "stop_sequence" and cut.stop_sequence == stop
    assert cut.content[0].text == r.content[0].text[:r.content[0].text.index(stop)]


def test_streamed_events_assemble_into_the_whole_message(client):
    whole = client.messages.create(model="m", max_tokens=20, extra_body=T0, messages=USER)
    with client.messages.stream(model="m", max_tokens=20, extra_body=T0,
                                messages=USER) as stream:
        pieces = list(stream.text_stream)
        final = stream.get_final_message()
    assert len(pieces) > 1 and "".join(pieces) == whole.content[0].text
    assert final.content[0].text == whole.content[0].text
    assert final.stop_reason == "max_tokens" and final.usage.output_tokens == 20
    assert final.usage.input_tokens == whole.usage.input_tokens


def test_count_tokens_is_the_prompts_length(client):
    n = client.messages.count_tokens(model="m", system=SYSTEM, messages=USER).input_tokens
    r = client.messages.create(model="m", max_tokens=1, system=SYSTEM, messages=USER)
    assert n == r.usage.input_tokens > 10


def test_an_assistant_turn_at_the_end_is_continued(client, openai_client):
    messages = [*USER, {"role": "assistant", "content": "The three colours are"}]
    r = client.messages.create(model="m", max_tokens=8, extra_body=T0, messages=messages)
    o = openai_client.chat.completions.create(model="m", max_tokens=8, temperature=0,
                                              messages=messages)
    assert r.content[0].text == o.choices[0].message.content


def test_the_key_as_x_api_key(server):
    wrong = anthropic.Anthropic(base_url=server.url, api_key="nope", max_retries=0)
    with pytest.raises(anthropic.AuthenticationError):
        wrong.messages.create(model="m", max_tokens=2, messages=USER)


@pytest.mark.parametrize("kw, param", [
    ({"max_tokens": 4, "messages": []}, "messages"),
    ({"max_tokens": 4, "messages": [{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                     "data": "AAAA"}}]}]}, "messages[0].content[0]"),
    ({"max_tokens": 4, "messages": USER, "extra_body": {"temperature": 5}}, "temperature"),
    ({"max_tokens": 4, "messages": USER, "output_config": {"format": {
        "type": "json_schema", "schema": {"type": "object", "not": {}}}}}, "output_config"),
    ({"max_tokens": 4, "messages": USER, "thinking": {"type": "sometimes"}}, "thinking"),
    ({"max_tokens": 4, "messages": USER, "tools": TOOLS}, "tools"),  # ChatML: no tools
    ({"max_tokens": 4, "messages": USER, "stop_sequences": "x"}, "stop_sequences"),
])
def test_bad_requests_are_400_in_anthropics_shape(client, kw, param):
    with pytest.raises(anthropic.BadRequestError) as e:
        client.messages.create(model="m", **kw)
    assert e.value.body["type"] == "error"
    assert e.value.body["error"]["type"] == "invalid_request_error"
    assert param.split("[")[0] in e.value.body["error"]["message"]


def test_max_tokens_is_required_as_anthropics(server):
    # the client checks it itself: a raw request, as other clients send it
    import json
    status, _, body = server.request("POST", "/v1/messages", {"model": "m", "messages": USER},
                                     {"x-api-key": KEY, "anthropic-version": "2023-06-01"})
    err = json.loads(body)
    assert status == 400 and err["type"] == "error"
    assert err["error"]["type"] == "invalid_request_error" and "max_tokens" in err["error"][
        "message"]


@pytest.fixture(scope="module")
def hermes(tmp_path_factory, templates_dir):
    source = (templates_dir / "Qwen-Qwen2.5-7B-Instruct.jinja").read_text(encoding="utf-8")
    path = hermes_tools_model(source).write(tmp_path_factory.mktemp("a") / "hermes.gguf")
    s = ServerProcess(path, "-c", "4096")
    yield anthropic.Anthropic(base_url=s.url, api_key="x", max_retries=0, timeout=300), path
    s.stop()


def test_tool_use_blocks(hermes):
    client, _ = hermes
    r = client.messages.create(model="m", max_tokens=200, extra_body=T0, tools=TOOLS,
                               messages=[{"role": "user", "content": "Paris and Rome?"}])
    assert r.stop_reason == "tool_use"
    assert [(b.type, b.name, b.input) for b in r.content] == [
        ("tool_use", "get_weather", {"city": "Paris", "days": 2}),
        ("tool_use", "get_time", {"city": "Rome"})]
    assert len({b.id for b in r.content}) == 2


def test_tool_use_streamed(hermes):
    client, _ = hermes
    with client.messages.stream(model="m", max_tokens=200, extra_body=T0, tools=TOOLS,
                                messages=[{"role": "user", "content": "Paris?"}]) as stream:
        final = stream.get_final_message()
    assert final.stop_reason == "tool_use"
    assert [(b.name, b.input) for b in final.content] == [
        ("get_weather", {"city": "Paris", "days": 2}), ("get_time", {"city": "Rome"})]


def test_tool_results_fed_back(hermes):
    client, path = hermes
    first = client.messages.create(model="m", max_tokens=200, extra_body=T0, tools=TOOLS,
                                   messages=[{"role": "user", "content": "Paris and Rome?"}])
    results = ["18 C", "14:05"]
    messages = [{"role": "user", "content": "Paris and Rome?"},
                {"role": "assistant", "content": [b.model_dump() for b in first.content]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": b.id, "content": text}
                    for b, text in zip(first.content, results)]}]
    r = client.messages.create(model="m", max_tokens=2, extra_body=T0, tools=TOOLS,
                               messages=messages)
    vocab = Model(path, vocab_only=True)
    template = ChatTemplate.from_metadata(vocab.metadata, token_text=vocab.token_text)
    openai_tools = [{"type": "function", "function": {
        "name": t["name"], "description": t["description"], "parameters": t["input_schema"]}}
        for t in TOOLS]
    local = [{"role": "user", "content": "Paris and Rome?"},
             {"role": "assistant", "content": "", "tool_calls": [
                 {"id": b.id, "type": "function",
                  "function": {"name": b.name, "arguments": b.input}} for b in first.content]}]
    local += [{"role": "tool", "tool_call_id": b.id, "content": text, "name": b.name}
              for b, text in zip(first.content, results)]
    text = template.prompt(local, tools=openai_tools).text
    assert "<tool_response>\n18 C\n</tool_response>" in text
    assert r.usage.input_tokens == len(vocab.prompt_ids(text))


def test_tool_choice_any_and_a_named_tool(tmp_path, templates_dir):
    source = (templates_dir / "meta-llama-Llama-3.1-8B-Instruct.jinja").read_text(
        encoding="utf-8")
    s = ServerProcess(llama_tools_model(source).write(tmp_path / "llama.gguf"), "-c", "4096")
    try:
        client = anthropic.Anthropic(base_url=s.url, api_key="x", max_retries=0, timeout=300)
        kw = {"model": "m", "max_tokens": 100, "extra_body": T0, "tools": TOOLS,
              "messages": [{"role": "user", "content": "Lima?"}]}
        r = client.messages.create(**kw, tool_choice={"type": "any"})
        assert [(b.name, b.input) for b in r.content] == [("get_time", {"city": "Lima"})]
        r = client.messages.create(**kw, tool_choice={"type": "tool", "name": "get_weather"})
        assert [(b.name, b.input) for b in r.content] == [
            ("get_weather", {"city": "Oslo", "days": 1})]
        r = client.messages.create(**kw)  # auto
        assert [(b.name, b.input) for b in r.content] == [
            ("get_weather", {"city": "Paris", "days": 2})]
    finally:
        s.stop()


@pytest.fixture(scope="module")
def thinker(tmp_path_factory):
    from tests.support.chain_models import reasoning_model
    path = reasoning_model().write(tmp_path_factory.mktemp("t") / "reasoning.gguf")
    s = ServerProcess(path, "-c", "256")
    yield anthropic.Anthropic(base_url=s.url, api_key="x", max_retries=0, timeout=300)
    s.stop()


THINK = {"type": "enabled", "budget_tokens": 1024}


def test_thinking_enabled_gives_a_thinking_block(thinker):
    r = thinker.messages.create(model="m", max_tokens=7, extra_body=T0, thinking=THINK,
                                messages=[{"role": "user", "content": "Hello!"}])
    assert [(b.type, getattr(b, "thinking", None) or getattr(b, "text", None))
            for b in r.content] == [("thinking", "Hmm, a greeting."), ("text", "Hi there")]
    with thinker.messages.stream(model="m", max_tokens=7, extra_body=T0, thinking=THINK,
                                 messages=[{"role": "user", "content": "Hello!"}]) as stream:
        kinds = [e.type for e in stream]
        final = stream.get_final_message()
    assert [b.type for b in final.content] == ["thinking", "text"]
    assert final.content[0].thinking == "Hmm, a greeting." and final.content[1].text == "Hi there"
    assert "thinking" in kinds and "text" in kinds


def test_thinking_off_leaves_the_reply_as_text(thinker):
    r = thinker.messages.create(model="m", max_tokens=7, extra_body=T0,
                                messages=[{"role": "user", "content": "Hello!"}])
    assert [b.type for b in r.content] == ["text"]
    assert r.content[0].text == "Hmm, a greeting.</think>Hi there"


def test_output_config_json_schema_is_enforced(client):
    schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20},
                                               "people": {"type": "integer"}},
              "required": ["city", "people"], "additionalProperties": False}
    m = client.messages.create(model="m", max_tokens=120, messages=USER, extra_body={
        **T0, "output_config": {"format": {"type": "json_schema", "schema": schema}}})
    assert m.stop_reason == "end_turn"
    jsonschema.validate(json.loads(m.content[0].text), schema)
