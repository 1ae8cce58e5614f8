"""Qwen3.5's chat format in the app's template engine: llama.cpp's Qwen3.5-4B.jinja renders
ChatML turns, drops earlier replies' thoughts, and opens a thinking block in the generation
prompt (or, with enable_thinking off, an empty closed one, which the reasoning splitter
reads as "no thoughts"); its turn markers are single special tokens of the qwen35 vocabulary."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "app"))

from ember.chat import ChatTemplate  # noqa: E402
from ember.chat.reasoning import prompt_opens_thinking  # noqa: E402

CONVERSATION = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Hi?"},
    {"role": "assistant", "content": "<think>\nThe user greets me.\n</think>\n\nHello."},
    {"role": "user", "content": "Again?"},
]
TURNS = ("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi?<|im_end|>\n"
         "<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\nAgain?<|im_end|>\n"
         "<|im_start|>assistant\n")


@pytest.fixture(scope="module")
def qwen35_template(templates_dir: Path) -> ChatTemplate:
    source = (templates_dir / "Qwen3.5-4B.jinja").read_text(encoding="utf-8")
    return ChatTemplate.from_string(source, "", "<|im_end|>")


def test_thinking_on_by_default(qwen35_template) -> None:
    prompt = qwen35_template.render(CONVERSATION)
    assert prompt == TURNS + "<think>\n"     # the earlier reply's thoughts are not sent again
    assert prompt_opens_thinking(prompt)
    assert qwen35_template.stop_strings == ("<|im_end|>",)


def test_thinking_off(qwen35_template) -> None:
    prompt = qwen35_template.prompt(CONVERSATION, enable_thinking=False).text
    assert prompt == TURNS + "<think>\n\n</think>\n\n"
    assert not prompt_opens_thinking(prompt)


@pytest.mark.native
def test_markers_are_single_tokens_of_the_qwen35_vocabulary(qwen35_template) -> None:
    from ember.engine import Model
    from tools import make_arch_models
    m = Model(make_arch_models.build("qwen35"), vocab_only=True)
    try:
        ids = m.tokenize(qwen35_template.render(CONVERSATION), add_special=False, parse_special=True)
        # (<think> is text in this vocabulary file: llama.cpp tokenizes it the same way)
        for marker in ("<|im_start|>", "<|im_end|>"):
            one = m.tokenize(marker, add_special=False, parse_special=True)
            assert len(one) == 1 and one[0] in ids, marker
    finally:
        m.close()
