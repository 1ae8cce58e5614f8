"""Tool calls through `ember serve` and the official openai client, on chain models whose
templates are llama.cpp's real Qwen2.5 and Llama 3.1 ones and whose greedy replies are known
calls: tool_calls whole and as streamed deltas, parallel calls, finish_reason "tool_calls",
tool_choice none / required / a named function, and tool results fed back through the
template."""
from __future__ import annotations

import json

import pytest
from ember.chat import ChatTemplate
from ember.engine import Model
from openai import OpenAI

from tests.support.chain_models import hermes_tools_model, llama_tools_model, mistral_tools_model
from tests.support.server_process import ServerProcess

TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city over some days.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "get_time", "description": "The time in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]
USER = [{"role": "user", "content": "Weather in Paris, and the time in Rome?"}]
PARIS = ("get_weather", {"city": "Paris", "days": 2})
ROME = ("get_time", {"city": "Rome"})


def calls_of(message) -> list[tuple[str, dict]]:
    return [(c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls]


def streamed(client, **kw):
    """The openai client's parsed chunks, accumulated as an OpenAI client does."""
    text, calls, reasons = "", {}, []
    for chunk in client.chat.completions.create(stream=True, **kw):
        for choice in chunk.choices:
            text += choice.delta.content or ""
            for d in choice.delta.tool_calls or ():
                c = calls.setdefault(d.index, {"id": None, "name": "", "arguments": ""})
                c["id"] = d.id or c["id"]
                if d.function is not None:
                    c["name"] += d.function.name or ""
                    c["arguments"] += d.function.arguments or ""
            if choice.finish_reason:
                reasons.append(choice.finish_reason)
    return text, [calls[i] for i in sorted(calls)], reasons


@pytest.fixture(scope="module")
def hermes(tmp_path_factory, templates_dir):
    source = (templates_dir / "Qwen-Qwen2.5-7B-Instruct.jinja").read_text(encoding="utf-8")
    path = hermes_tools_model(source).write(tmp_path_factory.mktemp("tools") / "hermes.gguf")
    s = ServerProcess(path, "-c", "4096")
    yield s, path
    s.stop()


@pytest.fixture(scope="module")
def hermes_client(hermes):
    return OpenAI(base_url=hermes[0].url + "/v1", api_key="unused", max_retries=0, timeout=300)


def test_parallel_calls_whole(hermes_client):
    r = hermes_client.chat.completions.create(model="m", messages=USER, tools=TOOLS,
                                              temperature=0)
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    assert calls_of(choice.message) == [PARIS, ROME]
    ids = [c.id for c in choice.message.tool_calls]
    assert len(set(ids)) == 2 and all(i.startswith("call_") for i in ids)
    assert all(c.type == "function" for c in choice.message.tool_calls)


def test_parallel_calls_streamed_as_deltas(hermes_client):
    text, calls, reasons = streamed(hermes_client, model="m", messages=USER, tools=TOOLS,
                                    temperature=0)
    assert text == ""  # nothing of the calls leaks into content
    assert [(c["name"], json.loads(c["arguments"])) for c in calls] == [PARIS, ROME]
    assert all(c["id"] for c in calls) and reasons == ["tool_calls"]


def test_parallel_tool_calls_false_keeps_the_first(hermes_client):
    r = hermes_client.chat.completions.create(model="m", messages=USER, tools=TOOLS,
                                              temperature=0, parallel_tool_calls=False)
    assert calls_of(r.choices[0].message) == [PARIS]


def test_tool_choice_none_leaves_the_reply_text(hermes_client):
    r = hermes_client.chat.completions.create(model="m", messages=USER, tools=TOOLS,
                                              temperature=0, tool_choice="none")
    assert r.choices[0].message.tool_calls is None
    assert r.choices[0].finish_reason == "stop"
    assert '"get_weather"' in r.choices[0].message.content


def test_tool_results_are_fed_back_through_the_template(hermes, hermes_client):
    first = hermes_client.chat.completions.create(model="m", messages=USER, tools=TOOLS,
                                                  temperature=0).choices[0].message
    results = ["18 C, light rain", "14:05"]
    messages = [*USER, first.model_dump(exclude_none=True)] + [
        {"role": "tool", "tool_call_id": c.id, "content": text}
        for c, text in zip(first.tool_calls, results)]
    r = hermes_client.chat.completions.create(model="m", messages=messages, tools=TOOLS,
                                              temperature=0, max_tokens=2)
    # the server's prompt is the template's rendering of the chat, results included
    vocab = Model(hermes[1], vocab_only=True)
    template = ChatTemplate.from_metadata(vocab.metadata, token_text=vocab.token_text)
    local = [*USER, {"role": "assistant", "content": "", "tool_calls": [
        {"id": c.id, "type": "function", "function": {
            "name": c.function.name, "arguments": json.loads(c.function.arguments)}}
        for c in first.tool_calls]}] + [
        {"role": "tool", "tool_call_id": c.id, "content": text, "name": c.function.name}
        for c, text in zip(first.tool_calls, results)]
    text = template.prompt(local, tools=TOOLS).text
    assert "<tool_response>\n18 C, light rain\n</tool_response>" in text
    assert r.usage.prompt_tokens == len(vocab.prompt_ids(text))


def test_a_template_without_tools_is_a_400_that_says_so(starter_model_path):
    s = ServerProcess(starter_model_path, "-c", "256")
    try:
        import openai
        client = OpenAI(base_url=s.url + "/v1", api_key="unused", max_retries=0)
        with pytest.raises(openai.BadRequestError) as e:
            client.chat.completions.create(model="m", messages=USER, tools=TOOLS)
        assert (e.value.param, e.value.code) == ("tools", "unsupported_parameter")
        assert "no tool support" in e.value.body["message"]
        # tool_choice none asks for no calls: served
        r = client.chat.completions.create(model="m", messages=USER, tools=TOOLS,
                                           tool_choice="none", max_tokens=2)
        assert r.choices[0].message.content
    finally:
        s.stop()


@pytest.fixture(scope="module")
def llama_client(tmp_path_factory, templates_dir):
    source = (templates_dir / "meta-llama-Llama-3.1-8B-Instruct.jinja").read_text(
        encoding="utf-8")
    path = llama_tools_model(source).write(tmp_path_factory.mktemp("tools") / "llama.gguf")
    s = ServerProcess(path, "-c", "4096")
    yield OpenAI(base_url=s.url + "/v1", api_key="unused", max_retries=0, timeout=300)
    s.stop()


def test_llama_json_call(llama_client):
    r = llama_client.chat.completions.create(model="m", messages=USER, tools=TOOLS,
                                             temperature=0)
    assert r.choices[0].finish_reason == "tool_calls"
    assert calls_of(r.choices[0].message) == [PARIS]
    text, calls, reasons = streamed(llama_client, model="m", messages=USER, tools=TOOLS,
                                    temperature=0)
    assert text == "" and reasons == ["tool_calls"]
    assert [(c["name"], json.loads(c["arguments"])) for c in calls] == [PARIS]


def test_tool_choice_required_makes_the_reply_open_a_call(llama_client):
    r = llama_client.chat.completions.create(model="m", messages=USER, tools=TOOLS,
                                             temperature=0, tool_choice="required")
    assert calls_of(r.choices[0].message) == [("get_time", {"city": "Lima"})]
    text, calls, _ = streamed(llama_client, model="m", messages=USER, tools=TOOLS,
                              temperature=0, tool_choice="required")
    assert text == "" and [c["name"] for c in calls] == ["get_time"]


def test_tool_choice_naming_a_function_calls_it(llama_client):
    choice = {"type": "function", "function": {"name": "get_weather"}}
    r = llama_client.chat.completions.create(model="m", messages=USER, tools=TOOLS,
                                             temperature=0, tool_choice=choice)
    assert calls_of(r.choices[0].message) == [("get_weather", {"city": "Oslo", "days": 1})]


def test_a_call_opened_by_a_control_token_is_parsed(tmp_path, templates_dir):
    # Mistral's [TOOL_CALLS] is a control token, whose text a reply leaves out unless a
    # tool-call parser asks for it
    source = (templates_dir / "mistralai-Mistral-Nemo-Instruct-2407.jinja").read_text(
        encoding="utf-8")
    s = ServerProcess(mistral_tools_model(source).write(tmp_path / "mistral.gguf"), "-c", "4096")
    try:
        client = OpenAI(base_url=s.url + "/v1", api_key="unused", max_retries=0)
        r = client.chat.completions.create(model="m", messages=USER, tools=TOOLS,
                                           temperature=0)
        assert calls_of(r.choices[0].message) == [PARIS]
        assert r.choices[0].message.tool_calls[0].id == "a1B2c3D4e"  # Mistral's own id
        # without tools the control token is not spelled out, as before
        r = client.chat.completions.create(model="m", messages=USER, temperature=0)
        assert r.choices[0].message.content.startswith('[{"name"')
    finally:
        s.stop()


@pytest.fixture(scope="module")
def harmony_client(tmp_path_factory, templates_dir):
    from tests.support.chain_models import harmony_model
    source = (templates_dir / "openai-gpt-oss-120b.jinja").read_text(encoding="utf-8")
    path = harmony_model(source).write(tmp_path_factory.mktemp("h") / "harmony.gguf")
    s = ServerProcess(path, "-c", "4096")
    yield OpenAI(base_url=s.url + "/v1", api_key="unused", max_retries=0, timeout=300)
    s.stop()


def test_harmony_reasoning_and_answer(harmony_client):
    for tools in ({}, {"tools": TOOLS}):
        r = harmony_client.chat.completions.create(model="m", messages=USER, temperature=0,
                                                   max_tokens=20, **tools)
        msg = r.choices[0].message
        assert (msg.reasoning_content, msg.content) == ("The user greets.", "Hello there")
        assert msg.tool_calls is None and r.choices[0].finish_reason == "stop"
    # reasoning_format none: the analysis channel is not for users, the final answer alone
    r = harmony_client.chat.completions.create(model="m", messages=USER, temperature=0,
                                               max_tokens=20,
                                               extra_body={"reasoning_format": "none"})
    assert r.choices[0].message.content == "Hello there"
    assert getattr(r.choices[0].message, "reasoning_content", None) is None


def test_harmony_calls_whole_and_streamed(harmony_client):
    kw = {"model": "m", "messages": USER, "temperature": 0, "max_tokens": 20, "tools": TOOLS}
    r = harmony_client.chat.completions.create(tool_choice="required", **kw)
    assert r.choices[0].finish_reason == "tool_calls"
    assert calls_of(r.choices[0].message) == [PARIS]
    text, calls, reasons = streamed(harmony_client, tool_choice="required", **kw)
    assert text == "" and reasons == ["tool_calls"]
    assert [(c["name"], json.loads(c["arguments"])) for c in calls] == [PARIS]
    named = {"type": "function", "function": {"name": "get_weather"}}
    r = harmony_client.chat.completions.create(tool_choice=named, **kw)
    assert calls_of(r.choices[0].message) == [("get_weather", {"city": "Oslo", "days": 1})]


def test_a_tool_without_description_or_properties_renders(harmony_client):
    # gpt-oss' template reads tool.description and parameters.properties unasked
    bare = [{"type": "function", "function": {"name": "get_weather",
                                              "parameters": {"type": "object"}}}]
    r = harmony_client.chat.completions.create(model="m", messages=USER, temperature=0,
                                               max_tokens=20, tools=bare,
                                               tool_choice="required")
    # required with one tool is that tool named (its header in the prompt): the chain
    # model's call after a named header
    assert calls_of(r.choices[0].message) == [("get_weather", {"city": "Oslo", "days": 1})]
