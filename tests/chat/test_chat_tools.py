"""Tool calls through llama.cpp's real chat templates (models/templates/ of the
llama-cpp-python 0.3.36 sdist, fetched by tools/fetch_assets.py): a conversation whose last
turn is an assistant's tool calls is rendered, the assistant's part cut out as the model
would have written it, and parsed back into the same calls, whole and streamed."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from ember.chat import CHATML_TEMPLATE, ChatTemplate, split_reply
from ember.chat.tools import ToolCallStream, tool_support

TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"},
        "metric": {"type": "boolean"}}, "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "get_time", "description": "The time in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]
CALLS = [("abcDEF123", "get_weather", {"city": "Paris", "days": 3, "metric": True}),
         ("xyz789UVW", "get_time", {"city": "Rome, Lazio"})]
USER = {"role": "user", "content": "Weather in Paris and the time in Rome?"}

# template, the format its family writes, whether it takes several calls, ids rendered
CASES = [
    ("Qwen-Qwen2.5-7B-Instruct", "hermes", True, False),
    ("NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use", "hermes", True, False),
    ("NousResearch-Hermes-3-Llama-3.1-8B-tool_use", "hermes", True, False),
    ("MiMo-VL", "hermes", True, False),
    ("ibm-granite-granite-4.0", "hermes", True, False),
    ("Qwen3-Coder", "qwen-xml", True, False),
    ("Qwen3.5-4B", "qwen-xml", True, False),
    ("meta-llama-Llama-3.1-8B-Instruct", "llama3", False, False),
    ("meta-llama-Llama-3.2-3B-Instruct", "llama3", False, False),
    ("meta-llama-Llama-3.3-70B-Instruct", "llama3", False, False),
    ("mistralai-Mistral-Nemo-Instruct-2407", "mistral", True, True),
    ("Mistral-Small-3.2-24B-Instruct-2506", "mistral", True, True),
    ("unsloth-mistral-Devstral-Small-2507", "mistral", True, False),
    ("mistralai-Ministral-3-14B-Reasoning-2512", "mistral", True, False),
    ("Qwen-Qwen3-0.6B", "hermes", True, False),
    ("ibm-granite-granite-4.1", "hermes", True, False),
    ("Reka-Edge", "hermes", True, False),
    ("Bielik-11B-v3.0-Instruct", "hermes", True, False),
    ("StepFun3.5-Flash", "qwen-xml", True, False),
    ("GLM-4.6", "glm", True, False),
    ("inclusionai-ling-3.0-flash", "glm", True, False),
    ("poolside-Laguna-S-2.1", "glm", True, False),
    ("poolside-Laguna-XS.2", "glm", True, False),
    ("unsloth-Apriel-1.5", "tool-calls-json", True, False),
    ("MiniMax-M1", "tool-calls-json", True, False),
    ("CohereForAI-c4ai-command-r7b-12-2024-tool_use", "command-r", True, False),
    ("LFM2.5-8B-A1B", "lfm", True, False),
]


def load(templates_dir: Path, name: str) -> ChatTemplate:
    return ChatTemplate.from_string((templates_dir / f"{name}.jinja").read_text(encoding="utf-8"),
                                    bos_token="<s>", eos_token="</s>")


def assistant_text(template: ChatTemplate, calls) -> str:
    """What the model writes for these calls: the closed turn minus the open prompt, up to
    the template's end of turn."""
    turn = {"role": "assistant", "content": "", "tool_calls": [
        {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
        for i, n, a in calls]}
    prompt = template.render([USER], True, tools=TOOLS)
    closed = template.render([USER, turn], False, tools=TOOLS)
    assert closed.startswith(prompt)
    text = closed[len(prompt):]
    ends = [i for i in (text.find(s) for s in template.stop_strings) if i != -1]
    return text[:min(ends)] if ends else text


@pytest.mark.parametrize("name, family, parallel, ids", CASES)
def test_calls_rendered_by_the_template_parse_back_identical(templates_dir, name, family,
                                                            parallel, ids):
    template = load(templates_dir, name)
    support = tool_support(template)
    assert support.takes_tools and support.format.name == family
    calls = CALLS if parallel else CALLS[:1]
    text = assistant_text(template, calls)
    content, parsed = support.format.parse(text, TOOLS)
    assert [(c.name, json.loads(c.arguments)) for c in parsed] == [(n, a) for _, n, a in calls]
    # a reasoning block (empty, or closing one the prompt opened) may come before the calls
    assert not split_reply(content).answer.strip()
    if ids:
        assert [c.id for c in parsed] == [i for i, _, _ in calls]
    else:
        assert len({c.id for c in parsed}) == len(parsed) and all(c.id for c in parsed)

    # streamed in small pieces: nothing of a call leaks out as text, the same calls at the end
    stream = ToolCallStream(support.format, TOOLS)
    said = "".join(stream.feed(text[i:i + 3]) for i in range(0, len(text), 3))
    rest, streamed = stream.finish()
    assert not split_reply(said + rest).answer.strip()
    assert [(c.name, c.arguments) for c in streamed] == [(c.name, c.arguments) for c in parsed]


@pytest.mark.parametrize("name", ["Qwen-Qwen2.5-7B-Instruct", "Mistral-Small-3.2-24B-Instruct-2506",
                                  "Qwen3-Coder", "MiniMax-M1",
                                  "CohereForAI-c4ai-command-r7b-12-2024-tool_use",
                                  "poolside-Laguna-XS.2"])
def test_text_before_the_calls_is_streamed_and_kept(templates_dir, name):
    template = load(templates_dir, name)
    fmt = tool_support(template).format
    text = "Let me look that up [1] <b>.\n" + assistant_text(template, CALLS).lstrip()
    stream = ToolCallStream(fmt, TOOLS)
    said = "".join(stream.feed(ch) for ch in text)
    rest, calls = stream.finish()
    assert said == "Let me look that up [1] <b>.\n" and not rest.strip()
    assert [c.name for c in calls] == ["get_weather", "get_time"]
    assert ToolCallStream(fmt, TOOLS, "").feed(text) == said  # the same in one piece
    whole = ToolCallStream(fmt, TOOLS)
    whole.feed(text)
    assert whole.whole()[0] == "Let me look that up [1] <b>."


@pytest.mark.parametrize("name", [n for n, *_ in CASES])
def test_a_plain_answer_is_text_whole_and_streamed(templates_dir, name):
    fmt = tool_support(load(templates_dir, name)).format
    text = "Paris is sunny; {not a call} and [TOOL] <tool> end."
    stream = ToolCallStream(fmt, TOOLS)
    said = "".join(stream.feed(text[i:i + 2]) for i in range(0, len(text), 2))
    rest, calls = stream.finish()
    assert said + rest == text and calls == []


@pytest.mark.parametrize("name", [n for n, *_ in CASES])
def test_a_broken_call_comes_back_as_text(templates_dir, name):
    template = load(templates_dir, name)
    fmt = tool_support(template).format
    text = assistant_text(template, CALLS[:1])
    cut = text[:text.index("Paris") + 2]  # the reply ended inside the arguments' JSON
    if fmt.name == "qwen-xml":
        cut = text.replace("<function=get_weather>", "<function get_weather>")
    stream = ToolCallStream(fmt, TOOLS)
    said = stream.feed(cut)
    rest, calls = stream.finish()
    assert calls == [] and said + rest == cut


@pytest.mark.parametrize("name, family", [(n, f) for n, f, *_ in CASES])
def test_a_forced_prefix_starts_a_call_the_parser_completes(templates_dir, name, family):
    template = load(templates_dir, name)
    fmt = tool_support(template).format
    text = assistant_text(template, CALLS[:1]).lstrip()
    for forced in (fmt.forced_prefix(None), fmt.forced_prefix("get_weather")):
        if not text.startswith(forced):
            # the template spaces its JSON otherwise: the forced text is the format's own
            continue
        stream = ToolCallStream(fmt, TOOLS, forced)
        said = stream.feed(text[len(forced):])
        rest, calls = stream.finish()
        assert not (said + rest).strip()
        assert [(c.name, json.loads(c.arguments)) for c in calls] == [(CALLS[0][1], CALLS[0][2])]


def test_templates_without_tools_say_so(templates_dir):
    for t in (ChatTemplate.from_string(CHATML_TEMPLATE),
              load(templates_dir, "google-gemma-2-2b-it"),
              ChatTemplate.chatml()):
        assert not tool_support(t).takes_tools and not tool_support(t).usable


def test_a_template_that_takes_tools_in_a_format_not_parsed_is_not_usable(templates_dir):
    support = tool_support(load(templates_dir, "moonshotai-Kimi-K2"))
    assert support.takes_tools and support.format is None and not support.usable


@pytest.mark.parametrize("name", ["LFM2-8B-A1B", "LFM2.5-Instruct", "LFM2.5-8B-A1B"])
def test_lfm_templates_take_their_python_calls(templates_dir, name):
    """LFM2's templates list the tools in the system turn; the models answer with a Python
    list of keyword calls between <|tool_call_start|> and <|tool_call_end|> (the format
    LFM2.5-8B-A1B's template renders past calls in)."""
    support = tool_support(load(templates_dir, name))
    assert support.takes_tools and support.usable and support.format.name == "lfm"
    fmt = support.format
    text = ("Checking.<|tool_call_start|>[get_weather(city='Paris', days=-2, metric=true, "
            'opts={"units": "si", "hours": [6, 18], "alt": null}), ns.get_time(city="Rome, Lazio")]'
            "<|tool_call_end|>")
    content, calls = fmt.parse(text, TOOLS)
    assert content == "Checking."
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [
        ("get_weather", {"city": "Paris", "days": -2, "metric": True,
                         "opts": {"units": "si", "hours": [6, 18], "alt": None}}),
        ("ns.get_time", {"city": "Rome, Lazio"})]
    # anything but literals is not a call, and nothing in it runs
    for bad in ("<|tool_call_start|>[get_weather(city=__import__('os').getcwd())]<|tool_call_end|>",
                "<|tool_call_start|>[get_weather('Paris')]<|tool_call_end|>",
                "<|tool_call_start|>[get_weather(**{'city': 'Paris'})]<|tool_call_end|>",
                "<|tool_call_start|>[get_weather(city='Par<|tool_call_end|>"):
        assert fmt.parse(bad, TOOLS) == (bad, [])
    stream = ToolCallStream(fmt, TOOLS)
    said = "".join(stream.feed(text[i:i + 4]) for i in range(0, len(text), 4))
    rest, streamed = stream.finish()
    assert said == "Checking." and not rest.strip() and [c.name for c in streamed] == ["get_weather", "ns.get_time"]
