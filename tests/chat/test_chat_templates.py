"""Chat templates: sandboxed rendering must match plain jinja2 with HF's conventions.

The reference renderer below is written independently of ember.chat on
purpose: it is what transformers' ``apply_chat_template`` does, minus the
sandbox, so any difference is either a bug of ours or a sandbox refusal.
Templates that cannot render the standard conversation as-is are listed in
``ADJUSTED`` with the reason, the error they give, and the adjusted call that
must then match; nothing is skipped silently.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import jinja2
import jinja2.ext
import jinja2.nodes
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "app"))

from ember.chat import (
    CHATML_TEMPLATE,
    ChatTemplate,
    ChatTemplateError,
    Prompt,
    TemplateCompileError,
    TemplateRaisedError,
    TemplateRenderError,
    UnsupportedTemplateError,
    raw_prompt,
)

# Every template renders the same clock, so strftime_now cannot make outputs
# differ across a second (or midnight) boundary.
FIXED_NOW = datetime(2025, 3, 14, 15, 9, 26)
BOS, EOS = "<s>", "</s>"

SYSTEM = {"role": "system", "content": "You are a concise assistant."}
CONVERSATION = [
    SYSTEM,
    {"role": "user", "content": "What is the capital of France?"},
    {"role": "assistant", "content": "The capital of France is Paris."},
    {"role": "user", "content": "And how many people live there?"},
]
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather for a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Zürich"}
            },
            "required": ["city"],
        },
    },
}
# Expected number of llama.cpp templates (llama-cpp-python 0.3.36, pinned by
# sha256 in tools/fetch_assets.py).  Guards against an empty or partial dir
# passing vacuously.
EXPECTED_TEMPLATE_COUNT = 70


# --------------------------------------------------------------------------
# Reference: plain jinja2 + transformers' conventions
# --------------------------------------------------------------------------


class _RefGeneration(jinja2.ext.Extension):
    # transformers' AssistantTracker wraps the body in a CallBlock; with
    # tracking off that only renders the body.
    tags = frozenset({"generation"})

    def parse(self, parser: Any) -> jinja2.nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        call = self.call_method("_render_body")
        return jinja2.nodes.CallBlock(call, [], [], body).set_lineno(lineno)

    def _render_body(self, caller: Any) -> str:
        return caller()


def _ref_raise(message: str) -> None:
    raise jinja2.exceptions.TemplateError(message)


def _ref_tojson(
    x: Any,
    ensure_ascii: bool = False,
    indent: Any = None,
    separators: Any = None,
    sort_keys: bool = False,
) -> str:
    return json.dumps(
        x,
        ensure_ascii=ensure_ascii,
        indent=indent,
        separators=separators,
        sort_keys=sort_keys,
    )


def reference_render(source: str, messages: list[dict], **kwargs: Any) -> str:
    env = jinja2.Environment(
        trim_blocks=True,
        lstrip_blocks=True,
        extensions=[_RefGeneration, jinja2.ext.loopcontrols],
    )
    env.filters["tojson"] = _ref_tojson
    env.globals["raise_exception"] = _ref_raise
    env.globals["strftime_now"] = lambda fmt: FIXED_NOW.strftime(fmt)
    context = {
        "messages": messages,
        "tools": None,
        "documents": None,
        "add_generation_prompt": True,
        "bos_token": BOS,
        "eos_token": EOS,
        **kwargs,
    }
    return env.from_string(source).render(context)


def ours(source: str) -> ChatTemplate:
    return ChatTemplate.from_string(source, BOS, EOS, now=lambda: FIXED_NOW)


# --------------------------------------------------------------------------
# Documented differences
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Adjusted:
    reason: str
    error: type[ChatTemplateError]  # what ours raises for the standard call
    message: str  # substring of that error (the template's own words where it has some)
    drop_system: bool = False
    kwargs: dict[str, Any] = field(default_factory=dict)


ADJUSTED: dict[str, Adjusted] = {
    "google-gemma-2-2b-it.jinja": Adjusted(
        reason="Gemma 2 has no system role; its template raises for one. Rendered without the system message.",
        error=TemplateRaisedError,
        message="System role not supported",
        drop_system=True,
    ),
    "CohereForAI-c4ai-command-r-plus-tool_use.jinja": Adjusted(
        reason="tool_use variant loops over `tools` unconditionally; tools=None is not iterable. "
        "Rendered with tools=[] (no tools offered).",
        error=TemplateRenderError,
        message="'NoneType' object is not iterable",
        kwargs={"tools": []},
    ),
    "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja": Adjusted(
        reason="tool_use variant loops over `tools` unconditionally. Rendered with one tool.",
        error=TemplateRenderError,
        message="'NoneType' object is not iterable",
        kwargs={"tools": [WEATHER_TOOL]},
    ),
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja": Adjusted(
        reason="tool_use variant loops over `tools` unconditionally. Rendered with one tool.",
        error=TemplateRenderError,
        message="'NoneType' object is not iterable",
        kwargs={"tools": [WEATHER_TOOL]},
    ),
    "fireworks-ai-llama-3-firefunction-v2.jinja": Adjusted(
        reason="needs caller variables `functions` (JSON text of the specs) and `datetime` (today as text). "
        "Rendered with both supplied.",
        error=TemplateRenderError,
        message="'functions' is undefined",
        kwargs={
            "functions": json.dumps([WEATHER_TOOL["function"]]),
            "datetime": "14 Mar 2025",
        },
    ),
}


def _template_files(templates_dir: Path) -> list[Path]:
    files = sorted(templates_dir.glob("*.jinja"))
    assert len(files) == EXPECTED_TEMPLATE_COUNT, (
        f"{templates_dir}: {len(files)} templates"
    )
    return files


# --------------------------------------------------------------------------
# Acceptance: the whole llama.cpp suite
# --------------------------------------------------------------------------


def test_every_template_matches_plain_jinja(templates_dir: Path) -> None:
    files = _template_files(templates_dir)
    mismatches: list[str] = []
    identical = 0
    for path in files:
        if path.name in ADJUSTED:
            continue
        source = path.read_text(encoding="utf-8")
        expected = reference_render(source, CONVERSATION)
        try:
            got = ours(source).render(CONVERSATION, add_generation_prompt=True)
        except ChatTemplateError as exc:
            mismatches.append(f"{path.name}: raised {type(exc).__name__}: {exc}")
            continue
        if got != expected:
            mismatches.append(
                f"{path.name}: output differs\n  ours: {got!r}\n  ref:  {expected!r}"
            )
            continue
        # Identical-but-empty would prove nothing: the last user turn must be in there.
        if "And how many people live there?" not in got:
            mismatches.append(f"{path.name}: last user message missing from {got!r}")
            continue
        identical += 1
    assert not mismatches, "\n".join(mismatches)
    assert identical == EXPECTED_TEMPLATE_COUNT - len(ADJUSTED) == 65


@pytest.mark.parametrize("name", sorted(ADJUSTED))
def test_adjusted_template_fails_clearly_then_matches(
    templates_dir: Path, name: str
) -> None:
    adj = ADJUSTED[name]
    source = (templates_dir / name).read_text(encoding="utf-8")
    template = ours(source)

    # As-is, plain jinja2 fails too: the difference is the template's demand, not the sandbox.
    with pytest.raises((jinja2.TemplateError, TypeError)) as ref_exc:
        reference_render(source, CONVERSATION)
    assert adj.message in str(ref_exc.value)
    with pytest.raises(adj.error) as exc:
        template.render(CONVERSATION)
    assert adj.message in str(exc.value)

    messages = [
        m for m in CONVERSATION if not (adj.drop_system and m["role"] == "system")
    ]
    got = template.render(messages, **adj.kwargs)
    assert got == reference_render(source, messages, **adj.kwargs)
    assert "And how many people live there?" in got


def test_gemma2_system_error_is_the_templates_message(templates_dir: Path) -> None:
    template = ours(
        (templates_dir / "google-gemma-2-2b-it.jinja").read_text(encoding="utf-8")
    )
    with pytest.raises(TemplateRaisedError) as exc:
        template.render(CONVERSATION)
    assert str(exc.value) == "System role not supported"


def test_tools_and_kwargs_reach_the_template(templates_dir: Path) -> None:
    qwen = (templates_dir / "Qwen-Qwen2.5-7B-Instruct.jinja").read_text(
        encoding="utf-8"
    )
    messages = CONVERSATION[:2]
    got = ours(qwen).render(messages, tools=[WEATHER_TOOL])
    assert got == reference_render(qwen, messages, tools=[WEATHER_TOOL])
    # HF's tojson keeps non-ASCII and key order (jinja's builtin would escape and sort).
    assert json.dumps(WEATHER_TOOL, ensure_ascii=False) in got
    assert "Zürich" in got

    qwen3 = (templates_dir / "Qwen-Qwen3-0.6B.jinja").read_text(encoding="utf-8")
    no_think = ours(qwen3).render(messages, enable_thinking=False)
    assert no_think.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert no_think == reference_render(qwen3, messages, enable_thinking=False)


def test_strftime_now_uses_the_clock(templates_dir: Path) -> None:
    llama32 = (templates_dir / "meta-llama-Llama-3.2-3B-Instruct.jinja").read_text(
        encoding="utf-8"
    )
    assert "Today Date: 14 Mar 2025" in ours(llama32).render(CONVERSATION)


def test_generation_block_renders_its_body() -> None:
    src = "{% for m in messages %}[{{ m.role }}]{% generation %}{{ m.content }}{% endgeneration %}{% endfor %}"
    assert ours(src).render([{"role": "assistant", "content": "hi"}]) == "[assistant]hi"


def test_add_generation_prompt_false() -> None:
    out = ChatTemplate.chatml().render(
        [{"role": "user", "content": "hi"}], add_generation_prompt=False
    )
    assert out == "<|im_start|>user\nhi<|im_end|>\n"


# --------------------------------------------------------------------------
# Sandbox
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "source",
    [
        "{{ ''.__class__.__mro__ }}",
        "{{ ''.__class__ }}",
        "{{ messages.__class__.__subclasses__() }}",
        "{{ raise_exception.__globals__ }}",
        "{{ '{0.__class__}'.format(messages) }}",
    ],
)
def test_sandbox_blocks_dunder_access(source: str) -> None:
    with pytest.raises(UnsupportedTemplateError) as exc:
        ours(source).render([{"role": "user", "content": "x"}])
    assert "unsafe" in str(exc.value)
    assert "sandbox forbids" in str(exc.value)


def test_sandbox_keeps_callers_messages_immutable() -> None:
    messages = [{"role": "user", "content": "x"}]
    with pytest.raises(UnsupportedTemplateError, match="'append' of 'list'"):
        ours("{% set _ = messages.append({'role': 'user'}) %}").render(messages)
    with pytest.raises(UnsupportedTemplateError, match="'update' of 'dict'"):
        ours("{% set _ = messages[0].update({'content': 'y'}) %}").render(messages)
    assert messages == [{"role": "user", "content": "x"}]


def test_kimi_tool_calls_need_list_mutation_which_the_sandbox_refuses(
    templates_dir: Path,
) -> None:
    # Kimi-K2 queues tool-call ids with list.append; HF's immutable sandbox
    # refuses that too.  We must say so clearly, and prompt() must fall back.
    source = (templates_dir / "Kimi-K2-Instruct.jinja").read_text(encoding="utf-8")
    messages = [
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "18C"},
    ]
    template = ours(source)
    with pytest.raises(
        UnsupportedTemplateError, match="'append' of 'list'.*template line"
    ):
        template.render(messages)
    prompt = template.prompt(messages)
    assert prompt.is_fallback
    assert prompt.notice is not None
    assert "failed to render" in prompt.notice
    assert "UnsupportedTemplateError" in prompt.notice
    assert prompt.text.startswith("<|im_start|>user\nWeather in Paris?<|im_end|>\n")
    assert "<|im_end|>" in prompt.stop_strings


def test_runaway_recursion_is_our_error() -> None:
    with pytest.raises(TemplateRenderError, match="RecursionError"):
        ours("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}").render([])


# --------------------------------------------------------------------------
# Fallback to ChatML
# --------------------------------------------------------------------------

HELLO = [{"role": "user", "content": "Hello"}]
CHATML_HELLO = "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n"


def test_missing_template_falls_back_with_notice() -> None:
    template = ChatTemplate.from_metadata({"general.architecture": "llama"})
    assert template.is_fallback
    assert (
        template.notice
        == "The model has no chat template (tokenizer.chat_template is missing); using ChatML instead."
    )
    assert template.render(HELLO) == CHATML_HELLO
    assert template.source == CHATML_TEMPLATE
    prompt = template.prompt(HELLO)
    assert prompt == Prompt(
        CHATML_HELLO, ("<|im_start|>", "<|im_end|>"), True, template.notice
    )


def test_blank_template_counts_as_missing() -> None:
    template = ChatTemplate.from_metadata({"tokenizer.chat_template": "  \n"})
    assert template.is_fallback
    assert "no chat template" in (template.notice or "")


def test_broken_template_falls_back_with_notice() -> None:
    meta = {"tokenizer.chat_template": "{% for m in messages %}{{ m.content }}"}
    template = ChatTemplate.from_metadata(meta)
    assert template.is_fallback
    assert template.notice is not None
    assert template.notice.startswith("The model's chat template does not compile (")
    assert "endfor" in template.notice
    assert template.render(HELLO) == CHATML_HELLO


def test_unknown_tag_is_a_compile_error() -> None:
    with pytest.raises(TemplateCompileError, match="unknown tag 'do'"):
        ChatTemplate.from_string("{% do messages.append(1) %}")


def test_render_failure_falls_back_with_notice() -> None:
    template = ChatTemplate.from_metadata(
        {"tokenizer.chat_template": "{{ raise_exception('Roles must alternate') }}"}
    )
    assert not template.is_fallback
    assert template.notice is None
    with pytest.raises(TemplateRaisedError, match="^Roles must alternate$"):
        template.render(HELLO)
    prompt = template.prompt(HELLO)
    assert prompt.text == CHATML_HELLO
    assert prompt.is_fallback
    assert prompt.notice == (
        "The model's chat template failed to render (TemplateRaisedError: Roles must alternate); using ChatML instead."
    )


def test_successful_prompt_has_no_notice(templates_dir: Path) -> None:
    source = (templates_dir / "meta-llama-Llama-3.1-8B-Instruct.jinja").read_text(
        encoding="utf-8"
    )
    prompt = ours(source).prompt(CONVERSATION)
    assert not prompt.is_fallback
    assert prompt.notice is None
    assert prompt.text.endswith("<|start_header_id|>assistant<|end_header_id|>\n\n")
    assert prompt.stop_strings == (EOS, "<|eot_id|>", "<|eom_id|>")


def test_chatml_fallback_handles_multimodal_and_empty_content() -> None:
    messages = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Look: "},
                {"type": "image"},
                {"type": "text", "text": "ok?"},
            ],
        },
        {"role": "assistant", "content": None},
    ]
    out = ChatTemplate.chatml().render(messages)
    assert (
        out
        == "<|im_start|>user\nLook: ok?<|im_end|>\n<|im_start|>assistant\n<|im_end|>\n<|im_start|>assistant\n"
    )


# --------------------------------------------------------------------------
# Metadata
# --------------------------------------------------------------------------


def test_from_metadata_resolves_special_tokens_from_vocab() -> None:
    vocab = ["<unk>", "<|begin_of_text|>", "<|end_of_text|>", "hello", "<|eot_id|>"]
    meta = {
        "tokenizer.chat_template": "{{ bos_token }}{% for m in messages %}{{ m.content }}<|eot_id|>{% endfor %}",
        "tokenizer.ggml.tokens": vocab,
        "tokenizer.ggml.bos_token_id": 1,
        "tokenizer.ggml.eos_token_id": "2",  # llama.cpp hands metadata values over as strings
        "tokenizer.ggml.eot_token_id": 4,
        "tokenizer.ggml.eom_token_id": 99,  # out of range: ignored, not a crash
    }
    template = ChatTemplate.from_metadata(meta)
    assert not template.is_fallback
    assert (template.bos_token, template.eos_token) == (
        "<|begin_of_text|>",
        "<|end_of_text|>",
    )
    assert template.render(HELLO) == "<|begin_of_text|>Hello<|eot_id|>"
    assert template.stop_strings == ("<|end_of_text|>", "<|eot_id|>")


def test_from_metadata_prefers_token_text_callback() -> None:
    names = {7: "<bos>", 8: "<eos>"}
    meta = {
        "tokenizer.ggml.bos_token_id": 7,
        "tokenizer.ggml.eos_token_id": 8,
        "tokenizer.ggml.eot_token_id": 9,
    }
    template = ChatTemplate.from_metadata(meta, token_text=lambda i: names[i])
    assert (template.bos_token, template.eos_token) == ("<bos>", "<eos>")
    assert template.stop_strings == ("<eos>", "<|im_start|>", "<|im_end|>")


# --------------------------------------------------------------------------
# Raw completion
# --------------------------------------------------------------------------


def test_raw_prompt_passes_text_through() -> None:
    prompt = raw_prompt("Once upon a time", stop_strings=["</s>", "", "</s>"])
    assert prompt == Prompt("Once upon a time", ("</s>",), False, None)
