"""gpt-oss' harmony replies through llama.cpp's real gpt-oss template: a tool call the
template renders parses back, reasoning (analysis) and answer (final) come apart, streamed
however the text is cut, and text that is not harmony stays text."""
from __future__ import annotations

import json

import pytest
from ember.chat.harmony import HarmonyFormat, HarmonyStream
from ember.chat.tools import tool_support

from tests.chat.test_chat_tools import CALLS, TOOLS, USER, assistant_text, load

NAME = "openai-gpt-oss-120b"
THINK_THEN_CALL = ('<|channel|>analysis<|message|>The user wants the weather.<|end|>'
                   '<|start|>assistant<|channel|>commentary to=functions.get_weather '
                   '<|constrain|>json<|message|>{"city": "Paris", "days": 3}')
THINK_THEN_ANSWER = ('<|channel|>analysis<|message|>A greeting. Be nice.<|end|>'
                     '<|start|>assistant<|channel|>final<|message|>Hello there!')


def run(text: str, step: int, **kw) -> tuple[list[tuple[str, str]], HarmonyStream]:
    stream = HarmonyStream(**kw)
    parts = []
    for i in range(0, len(text), step):
        parts += stream.feed(text[i:i + step])
    parts += stream.finish()
    return parts, stream


def joined(parts, kind):
    return "".join(t for k, t in parts if k == kind)


def test_the_template_is_harmony_with_tools(templates_dir):
    support = tool_support(load(templates_dir, NAME))
    assert support.usable and support.format.name == "harmony"


def test_a_call_the_template_renders_parses_back(templates_dir):
    template = load(templates_dir, NAME)
    text = assistant_text(template, CALLS[:1])  # harmony: one call per message
    content, calls = tool_support(template).format.parse(text, TOOLS)
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [(CALLS[0][1], CALLS[0][2])]
    assert not content.strip()


def test_an_answer_the_template_renders_parses_back(templates_dir):
    template = load(templates_dir, NAME)
    prompt = template.render([USER], True)
    closed = template.render([USER, {"role": "assistant", "content": "Sunny, 21 C."}], False)
    assert closed.startswith(prompt)
    reply = closed[len(prompt):]
    reply = reply[:reply.index("<|return|>")]  # the stop the engine ends on, never shown
    parts, stream = run(reply, 5)
    assert joined(parts, "answer") == "Sunny, 21 C." and stream.calls == []


@pytest.mark.parametrize("step", [1, 3, 1000])
def test_reasoning_then_a_call(step):
    parts, stream = run(THINK_THEN_CALL, step)
    assert joined(parts, "thought") == "The user wants the weather."
    assert joined(parts, "answer") == ""
    assert [(c.name, json.loads(c.arguments)) for c in stream.calls] == [
        ("get_weather", {"city": "Paris", "days": 3})]
    assert stream.has_thoughts


@pytest.mark.parametrize("step", [1, 4, 1000])
def test_reasoning_then_an_answer(step):
    parts, stream = run(THINK_THEN_ANSWER, step)
    assert joined(parts, "thought") == "A greeting. Be nice."
    assert joined(parts, "answer") == "Hello there!"
    assert stream.calls == []
    # streamed: the reasoning is all out before the answer starts
    kinds = [k for k, _ in parts]
    assert kinds == sorted(kinds, key=lambda k: k != "thought")


def test_without_split_the_analysis_is_left_out_and_without_tools_calls_are_text():
    parts, stream = run(THINK_THEN_ANSWER, 2, split=False)
    assert {k for k, _ in parts} == {"answer"} and joined(parts, "answer") == "Hello there!"
    parts, stream = run(THINK_THEN_CALL, 2, tools=False, split=False)
    assert stream.calls == [] and {k for k, _ in parts} == {"answer"}
    assert joined(parts, "answer") == '{"city": "Paris", "days": 3}'


def test_a_forced_call_opening_is_completed_by_the_reply():
    fmt = HarmonyFormat()
    for name, rest in ((None, 'get_time <|constrain|>json<|message|>{"city": "Rome"}'),
                       ("get_time", '{"city": "Rome"}')):
        parts, stream = run(rest, 3, prefix=fmt.forced_prefix(name))
        assert [(c.name, json.loads(c.arguments)) for c in stream.calls] == [
            ("get_time", {"city": "Rome"})]
        assert not joined(parts, "answer")


def test_a_broken_call_and_plain_text():
    _, stream = run(THINK_THEN_CALL[:-5], 3)  # the JSON cut off
    assert stream.calls == []
    parts, stream = run("Just text, no channels.", 4)
    assert joined(parts, "answer") == "Just text, no channels." and stream.calls == []
