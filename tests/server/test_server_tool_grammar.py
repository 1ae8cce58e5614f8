"""Forced tool calls held to their grammar, through `ember serve` and the official openai
client, on the starter model (SmolLM2-135M, which never calls a tool of its own accord) given
llama.cpp's Qwen2.5 template: tool_choice "required" and a named function answer with a call
whose arguments validate against the tool's schema; parallel_tool_calls false gives one call;
a schema the grammar cannot enforce, and a constraint beside tool_choice "auto", are 400s."""
from __future__ import annotations

import json
import subprocess
import sys

import jsonschema
import openai
import pytest
from openai import OpenAI

from tests.support.server_process import ServerProcess

WEATHER = {"type": "object", "properties": {
    "city": {"type": "string", "enum": ["Paris", "Rome", "Oslo"]},
    "days": {"type": "integer", "minimum": 1, "maximum": 7}}, "required": ["city", "days"]}
NOTE = {"type": "object", "properties": {"text": {"type": "string", "maxLength": 12},
                                         "urgent": {"type": "boolean"}},
        "required": ["text", "urgent"]}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}},
         {"type": "function", "function": {"name": "write_note", "parameters": NOTE}}]
SCHEMAS = {"get_weather": WEATHER, "write_note": NOTE}
USER = [{"role": "user", "content": "What is the weather like in Paris?"}]


@pytest.fixture(scope="module")
def client(tmp_path_factory, starter_model_path, templates_dir):
    template = templates_dir / "Qwen-Qwen2.5-7B-Instruct.jinja"
    path = tmp_path_factory.mktemp("tool-grammar") / "starter-qwen-template.gguf"
    subprocess.run([sys.executable, "-m", "gguf.scripts.gguf_new_metadata", "--force",
                    "--chat-template-file", str(template), str(starter_model_path), str(path)],
                   check=True, capture_output=True)
    s = ServerProcess(path, "-c", "2048")
    yield OpenAI(base_url=s.url + "/v1", api_key="unused", max_retries=0, timeout=600)
    s.stop()


def _checked_calls(choice) -> list[tuple[str, dict]]:
    assert choice.finish_reason == "tool_calls"
    out = []
    for call in choice.message.tool_calls:
        args = json.loads(call.function.arguments)
        jsonschema.validate(args, SCHEMAS[call.function.name])
        out.append((call.function.name, args))
    return out


def test_required_answers_with_a_call_that_validates(client):
    r = client.chat.completions.create(model="m", messages=USER, tools=TOOLS, temperature=0,
                                       max_tokens=200, tool_choice="required",
                                       parallel_tool_calls=False)
    calls = _checked_calls(r.choices[0])
    assert len(calls) == 1 and calls[0][0] in SCHEMAS


def test_a_named_function_is_the_one_called(client):
    r = client.chat.completions.create(
        model="m", messages=USER, tools=TOOLS, temperature=0, max_tokens=200,
        tool_choice={"type": "function", "function": {"name": "write_note"}})
    [(name, args)] = _checked_calls(r.choices[0])
    assert name == "write_note" and isinstance(args["urgent"], bool)


def test_required_with_response_format_is_a_call(client):
    # the reply is a call, with no text for the format to shape
    r = client.chat.completions.create(
        model="m", messages=USER, tools=TOOLS, temperature=0, max_tokens=200,
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
        response_format={"type": "json_object"})
    assert [n for n, _ in _checked_calls(r.choices[0])] == ["get_weather"]


def test_a_constraint_with_tool_choice_auto_is_a_400_that_says_why(client):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="m", messages=USER, tools=TOOLS, max_tokens=4,
                                       response_format={"type": "json_object"})
    assert e.value.param == "response_format"
    assert "tool_choice 'required'" in e.value.body["message"]


def test_a_schema_the_grammar_cannot_enforce_is_a_400(client):
    bad = [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"x": {"type": "string", "patternz": "a"}}}}}]
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="m", messages=USER, tools=bad, max_tokens=4,
                                       tool_choice="required")
    assert (e.value.param, e.value.code) == ("tools", "invalid_value")
    assert "tools[0].function.parameters" in e.value.body["message"]


def test_streamed_forced_calls_arrive_as_deltas_that_validate(client):
    calls: dict[int, dict] = {}
    reasons = []
    for chunk in client.chat.completions.create(model="m", messages=USER, tools=TOOLS,
                                                temperature=0, max_tokens=200, stream=True,
                                                tool_choice="required",
                                                # greedy, this model repeats calls until
                                                # max_tokens cuts one: one call only
                                                parallel_tool_calls=False):
        for choice in chunk.choices:
            assert not choice.delta.content  # nothing of a call leaks into content
            for d in choice.delta.tool_calls or ():
                c = calls.setdefault(d.index, {"name": "", "arguments": ""})
                c["name"] += d.function.name or ""
                c["arguments"] += d.function.arguments or ""
            if choice.finish_reason:
                reasons.append(choice.finish_reason)
    assert reasons == ["tool_calls"] and len(calls) == 1
    for c in calls.values():
        jsonschema.validate(json.loads(c["arguments"]), SCHEMAS[c["name"]])
