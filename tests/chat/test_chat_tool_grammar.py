"""The grammars of forced tool calls (tool_grammar.py), through the native grammar's text
matcher: for each family, a call written as that family writes it (after the format's
forced prefix) is a sentence, the parser reads it back as the same call, and near misses (a
wrong type, a missing required argument, an unknown tool, a second call where one is
allowed) are not."""
from __future__ import annotations

import json

import pytest
from ember.chat.harmony import HarmonyFormat
from ember.chat.json_schema import SchemaError
from ember.chat.tool_grammar import tool_call_gbnf
from ember.chat.tools import (
    CommandRFormat,
    GlmFormat,
    HermesFormat,
    Llama3Format,
    MistralFormat,
    QwenXmlFormat,
    ToolCallsJsonFormat,
)
from ember.engine import Grammar

TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "get_time", "parameters": {"type": "object", "properties": {
            "city": {"type": "string"}}}}}]
PARIS = {"city": "Paris", "days": 2}
ROME = {"city": "Rome"}


def j(v) -> str:
    return json.dumps(v)


# format, (text after the prefix for tool_choice "required": one call, two calls),
# (text after the prefix for the named function get_weather)
CASES = [
    (HermesFormat(),
     f'{{"name": "get_weather", "arguments": {j(PARIS)}}}\n</tool_call>',
     f'\n<tool_call>\n{{"name": "get_time", "arguments": {j(ROME)}}}\n</tool_call>',
     f'{j(PARIS)}}}\n</tool_call>'),
    (QwenXmlFormat("<tool_call><function="),
     ("get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n2\n"
      "</parameter>\n</function>\n</tool_call>"),
     ("\n<tool_call>\n<function=get_time>\n<parameter=city>\nRome\n</parameter>\n"
      "</function>\n</tool_call>"),
     ("<parameter=city>\nParis\n</parameter>\n<parameter=days>\n2\n</parameter>\n"
      "</function>\n</tool_call>")),
    (GlmFormat("<tool_call><arg_key>"),
     ("get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n"
      "<arg_key>days</arg_key>\n<arg_value>2</arg_value>\n</tool_call>"),
     ("\n<tool_call>get_time\n<arg_key>city</arg_key>\n<arg_value>Rome</arg_value>\n"
      "</tool_call>"),
     ("\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n<arg_key>days</arg_key>\n"
      "<arg_value>2</arg_value>\n</tool_call>")),
    (ToolCallsJsonFormat(),
     f'[{{"name": "get_weather", "arguments": {j(PARIS)}}}',
     f', {{"name": "get_time", "arguments": {j(ROME)}}}',
     f'{j(PARIS)}}}]</tool_calls>'),
    (CommandRFormat(),
     f'[\n    {{"tool_call_id": "0", "tool_name": "get_weather", "parameters": {j(PARIS)}}}',
     f',\n    {{"tool_call_id": "1", "tool_name": "get_time", "parameters": {j(ROME)}}}',
     f'{j(PARIS)}}}\n]'),
    (MistralFormat("[TOOL_CALLS]"),
     f'[{{"name": "get_weather", "arguments": {j(PARIS)}}}',
     f', {{"name": "get_time", "arguments": {j(ROME)}}}',
     f'{j(PARIS)}}}]'),
    (MistralFormat("[TOOL_CALLS][ARGS]"),
     f'get_weather[ARGS]{j(PARIS)}', f'[TOOL_CALLS]get_time[ARGS]{j(ROME)}',
     f'[ARGS]{j(PARIS)}'),
    (Llama3Format(), f'get_weather", "parameters": {j(PARIS)}}}', None, f'{j(PARIS)}}}'),
    (HarmonyFormat(), f'get_weather <|constrain|>json<|message|>{j(PARIS)}', None, j(PARIS)),
]
# the lists whose close follows the last call
CLOSES = {"tool-calls-json": "]</tool_calls>", "command-r": "\n]", "mistral": "]"}


def _close(fmt) -> str:
    return "" if "[ARGS]" in fmt.source else CLOSES.get(fmt.name, "")


def _ids(case) -> str:
    return case[0].name + ("-args" if "[ARGS]" in case[0].source else "")


def _parsed(fmt, prefix_name, text):
    _, calls = fmt.parse(fmt.forced_prefix(prefix_name) + text, TOOLS)
    return [(c.name, json.loads(c.arguments)) for c in calls]


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_required_accepts_one_call_and_rejects_near_misses(case):
    fmt, one, _, _ = case
    g = Grammar(tool_call_gbnf(fmt, TOOLS, None, parallel=False))
    text = one + _close(fmt)
    assert g.matches(text)
    assert _parsed(fmt, None, text) == [("get_weather", PARIS)]
    assert not g.matches(text.replace("2", '"2"', 1))  # days is an integer
    assert not g.matches(text.replace("get_weather", "get_wether"))  # no such tool
    assert not g.matches(text.replace("Paris", "Paris<", 1) if fmt.name in ("qwen-xml", "glm")
                         else text.replace('"Paris"', "Paris"))


@pytest.mark.parametrize("case", [c for c in CASES if c[2] is not None], ids=_ids)
def test_parallel_takes_several_calls_and_false_one(case):
    fmt, one, two, _ = case
    text = one + two + _close(fmt)
    assert Grammar(tool_call_gbnf(fmt, TOOLS, None, parallel=True)).matches(text)
    assert _parsed(fmt, None, text) == [("get_weather", PARIS), ("get_time", ROME)]
    assert not Grammar(tool_call_gbnf(fmt, TOOLS, None, parallel=False)).matches(text)


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_named_function_takes_its_arguments_only(case):
    fmt, _, _, named = case
    g = Grammar(tool_call_gbnf(fmt, TOOLS, "get_weather"))
    assert g.matches(named)
    assert _parsed(fmt, "get_weather", named) == [("get_weather", PARIS)]
    # city is required
    without_city = named.replace('"city": "Paris", ', "") \
        .replace("<parameter=city>\nParis\n</parameter>\n", "") \
        .replace("<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n", "")
    assert without_city != named and not g.matches(without_city)


def test_a_schema_the_converter_cannot_enforce_names_the_tool():
    bad = [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"x": {"type": "string", "patternz": "a"}}}}}]
    with pytest.raises(SchemaError) as e:
        tool_call_gbnf(HermesFormat(), bad, None)
    assert "tools[0].function.parameters" in str(e.value) and "patternz" in str(e.value)
