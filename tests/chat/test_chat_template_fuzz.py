"""Chat templates on hostile input, driven by Hypothesis: templates built from Jinja
fragments (sandbox probes, mutation, recursion, raise_exception, huge repetitions) and
messages of every shape. Whatever comes in, the template layer answers with a Prompt or a
ChatTemplateError, never another exception, and the sandbox caps the work a template can
ask for (the regression cases below were found this way)."""

from __future__ import annotations

import sys
from datetime import datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "app"))

from ember.chat import ChatTemplate, ChatTemplateError, Prompt, TemplateRenderError
from ember.chat.sandbox import MAX_RANGE_ITEMS, MAX_REPEAT_ITEMS

NOW = datetime(2025, 3, 14, 15, 9, 26)
META = {
    "tokenizer.ggml.tokens": ["<unk>", "<s>", "</s>"],
    "tokenizer.ggml.bos_token_id": 1,
    "tokenizer.ggml.eos_token_id": 2,
}

EXPRESSIONS = [
    "m.content",
    "m['role']",
    "message.content | trim",
    "messages[0]",
    "messages[-1].content",
    "messages | length",
    "bos_token",
    "eos_token",
    "add_generation_prompt",
    "tools | tojson",
    "m.content | tojson(indent=2)",
    "''.__class__",
    "m.__class__.__mro__",
    "messages.append(1)",
    "messages.pop()",
    "m.update({'a': 1})",
    "cycler.__init__.__globals__",
    "lipsum.__globals__",
    "raise_exception('refused')",
    "strftime_now('%Y-%m-%d')",
    "namespace(a=1).a",
    "range(5) | list",
    "range(10**9)",
    "'ab' * 3",
    "[1, 2] * 2",
    "(m.content or '') * 2",
    "1 / 0",
    "undefined_name.attr",
    "m.content.split(' ')",
    "x.y.z",
    "m.tool_calls[0].function.name",
    "(messages | map(attribute='role') | list)",
    "{'a': m} | tojson",
    "7 ** 3",
    "m.content[::-1]",
]
STATEMENTS = [
    "{% set ns = namespace(n=0) %}",
    "{% set x = messages[0] %}",
    "{% if m.role == 'system' %}S{% endif %}",
    "{% macro f(n) %}{{ f(n) }}{% endmacro %}",
    "{% generation %}g{% endgeneration %}",
    "{% for i in range(3) %}{% if i == 1 %}{% break %}{% endif %}{{ i }}{% endfor %}",
    "{%- if not add_generation_prompt -%}{{ raise_exception('no') }}{%- endif -%}",
    "{% include 'x.jinja' %}",
    "{% import 'y' as y %}",
    "{% extends 'base' %}",
    "{% raw %}{{{% endraw %}",
]


@st.composite
def templates(draw, depth=0):
    parts = []
    for _ in range(draw(st.integers(0, 5))):
        kind = draw(
            st.sampled_from(
                ["text", "expr", "stmt", "loop", "if", "junk"]
                if depth < 2
                else ["text", "expr", "stmt", "junk"]
            )
        )
        if kind == "text":
            parts.append(draw(st.text(max_size=12)))
        elif kind == "expr":
            parts.append("{{ " + draw(st.sampled_from(EXPRESSIONS)) + " }}")
        elif kind == "stmt":
            parts.append(draw(st.sampled_from(STATEMENTS)))
        elif kind == "loop":
            parts.append("{% for m in messages %}" + draw(templates(depth + 1)) + "{% endfor %}")
        elif kind == "if":
            parts.append(
                "{% if "
                + draw(st.sampled_from(EXPRESSIONS))
                + " %}"
                + draw(templates(depth + 1))
                + "{% else %}"
                + draw(templates(depth + 1))
                + "{% endif %}"
            )
        else:  # unbalanced or broken syntax
            parts.append(
                draw(
                    st.sampled_from(
                        [
                            "{{",
                            "}}",
                            "{%",
                            "%}",
                            "{% endfor %}",
                            "{% if %}",
                            "{{ m. }}",
                            "{# ",
                            "{{ 'unterminated }}",
                        ]
                    )
                )
            )
    return "".join(parts)


scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20))
contents = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["{{ 7 * 7 }}", "{% for x in range(9) %}", "<|im_end|>", "</s>", "\x00\ud7ff"]),
    st.none(),
    st.lists(
        st.one_of(
            st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=10)}),
            st.dictionaries(st.text(max_size=5), scalars, max_size=3),
            st.text(max_size=5),
        ),
        max_size=3,
    ),
    scalars,
)
messages = st.lists(
    st.fixed_dictionaries(
        {
            "role": st.one_of(
                st.sampled_from(["system", "user", "assistant", "tool"]), st.text(max_size=6)
            ),
            "content": contents,
        },
        optional={
            "tool_calls": st.lists(
                st.dictionaries(st.text(max_size=5), scalars, max_size=2), max_size=2
            ),
            "reasoning_content": st.text(max_size=10),
        },
    ),
    max_size=5,
)

SETTINGS = settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)


def _prompt_or_template_error(template: ChatTemplate, msgs) -> Prompt | None:
    try:
        p = template.prompt(msgs)
    except ChatTemplateError:
        return None
    assert isinstance(p, Prompt) and isinstance(p.text, str)
    return p


@SETTINGS
@given(source=templates(), msgs=messages)
def test_hostile_templates_give_a_prompt_or_a_template_error(source, msgs):
    t = ChatTemplate.from_metadata({**META, "tokenizer.chat_template": source}, now=lambda: NOW)
    _prompt_or_template_error(t, msgs)


@SETTINGS
@given(source=st.text(max_size=200), msgs=messages)
def test_arbitrary_text_as_template_never_escapes(source, msgs):
    t = ChatTemplate.from_metadata({**META, "tokenizer.chat_template": source}, now=lambda: NOW)
    _prompt_or_template_error(t, msgs)


@SETTINGS
@given(text=st.text(max_size=60))
def test_message_text_is_rendered_verbatim_never_evaluated(text):
    # ChatML (the fallback every model can get): a user's "{{ ... }}" must reach the
    # model as typed, not run as template code
    t = ChatTemplate.chatml("", "<|im_end|>", now=lambda: NOW)
    p = t.prompt([{"role": "user", "content": text}])
    assert f"<|im_start|>user\n{text}<|im_end|>" in p.text


@pytest.fixture(scope="module")
def real_templates(templates_dir):
    paths = sorted(templates_dir.glob("*.jinja"))
    assert len(paths) >= 50
    return [
        ChatTemplate.from_metadata(
            {**META, "tokenizer.chat_template": p.read_text(encoding="utf-8")}, now=lambda: NOW
        )
        for p in paths
    ]


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    derandomize=True,
)
@given(msgs=messages, data=st.data())
def test_real_templates_on_hostile_messages(real_templates, msgs, data):
    t = data.draw(st.sampled_from(real_templates))
    _prompt_or_template_error(t, msgs)


# Regression cases: each of these ran for seconds to minutes and took gigabytes of memory
# before the sandbox capped repetition and range() (found by the generator above, with
# bigger literals than it draws by default).
@pytest.mark.parametrize(
    "source",
    [
        "{{ 'a' * 100000000 }}",
        "{{ [1] * 100000000 }}",
        "{{ (messages | list) * 100000000 }}",
        "{{ 100000000 * 'a' }}",
        "{{ 10 ** 100000000 }}",
        "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}",
    ],
)
def test_work_a_template_may_ask_for_is_capped(source):
    t = ChatTemplate.from_string(source, now=lambda: NOW)
    with pytest.raises(TemplateRenderError) as err:
        t.render([{"role": "user", "content": "hi"}])
    assert "too large" in str(err.value) or "too many" in str(err.value)


def test_work_within_the_caps_still_renders():
    t = ChatTemplate.from_string(
        "{{ '-' * 40 }}{% for i in range(1000) %}{% endfor %}{{ 2 ** 10 }}{{ [0] * 3 }}",
        now=lambda: NOW,
    )
    assert t.render([]) == "-" * 40 + "1024[0, 0, 0]"
    assert MAX_REPEAT_ITEMS >= 100_000 and MAX_RANGE_ITEMS >= 100_000


@pytest.mark.parametrize("content", [True, 7, 2.5, {"text": "hi"}])
def test_system_folding_takes_a_user_turn_that_is_not_text(content):
    # found by test_real_templates_on_hostile_messages: a template without a system role
    # raised, and folding the system text into a user turn whose content was a bool
    # raised TypeError out of prompt() instead of falling back
    t = ChatTemplate.from_string(
        "{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('no system') }}"
        "{% endif %}[{{ m.content }}]{% endfor %}",
        now=lambda: NOW,
    )
    p = t.prompt([{"role": "system", "content": "Be brief."}, {"role": "user", "content": content}])
    assert p.text == f"[Be brief.\n\n{content}]"
