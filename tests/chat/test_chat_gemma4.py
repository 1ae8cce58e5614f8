"""Gemma 4's chat format in the app's template engine: llama.cpp's google-gemma-4-31B-it.jinja
and the template a gemma4 file carries (the synthetic one copies the gemma-4 vocabulary's,
the 26B-A4B release's) render the same prompt (turn markers, the empty thought channel the
generation prompt opens), their markers are single special tokens, and <turn|> stops."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "app"))

from ember.chat import ChatTemplate  # noqa: E402

CONVERSATION = [
    {"role": "system", "content": "You are a concise assistant."},
    {"role": "user", "content": "What is the capital of France?"},
    {"role": "assistant", "content": "The capital of France is Paris."},
    {"role": "user", "content": "And how many people live there?"},
]
WANT = ("<bos><|turn>system\nYou are a concise assistant.<turn|>\n"
        "<|turn>user\nWhat is the capital of France?<turn|>\n"
        "<|turn>model\nThe capital of France is Paris.<turn|>\n"
        "<|turn>user\nAnd how many people live there?<turn|>\n"
        "<|turn>model\n<|channel>thought\n<channel|>")


def test_gemma4_31b_template_renders(templates_dir: Path) -> None:
    source = (templates_dir / "google-gemma-4-31B-it.jinja").read_text(encoding="utf-8")
    template = ChatTemplate.from_string(source, "<bos>", "<eos>")
    assert template.render(CONVERSATION) == WANT
    assert "<turn|>" in template.stop_strings


@pytest.mark.native
def test_gemma4_file_template_renders_and_tokenizes() -> None:
    from ember.engine import Model
    from tools import make_arch_models
    m = Model(make_arch_models.build("gemma4"), vocab_only=True)
    try:
        template = ChatTemplate.from_metadata(m.metadata, token_text=m.token_text)
        assert not template.is_fallback
        assert (template.bos_token, template.eos_token) == ("<bos>", "<eos>")
        assert template.stop_strings == ("<eos>", "<turn|>")
        prompt = template.render(CONVERSATION)
        assert prompt == WANT
        ids = m.tokenize(prompt, add_special=False, parse_special=True)
        for marker in ("<|turn>", "<turn|>", "<|channel>", "<channel|>"):
            one = m.tokenize(marker, add_special=False, parse_special=True)
            assert len(one) == 1 and one[0] in ids, marker
        assert ids[0] == m.bos_id
    finally:
        m.close()
