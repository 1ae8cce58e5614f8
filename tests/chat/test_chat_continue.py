"""An assistant prefill through llama.cpp's real chat templates: the chat is rendered up to
the end of the last message's text, nothing of the template's turn end after it."""
from __future__ import annotations

from pathlib import Path

import pytest
from ember.chat import ChatTemplate, ChatTemplateError

PREFILL = "Sure, the answer is "
CHAT = [{"role": "user", "content": "What is 6 x 7?"}]


def _templates(templates_dir: Path) -> list[ChatTemplate]:
    out = []
    for f in sorted(templates_dir.glob("*.jinja")):
        out.append((f.stem, ChatTemplate.from_string(f.read_text(encoding="utf-8"),
                                                     bos_token="<s>", eos_token="</s>")))
    assert len(out) > 40
    return out


def test_every_template_continues_the_prefill_where_the_closed_turn_has_it(templates_dir):
    checked = closing = 0
    for name, t in _templates(templates_dir):
        messages = [*CHAT, {"role": "assistant", "content": PREFILL}]
        try:
            closed = t.render(messages, add_generation_prompt=False)
        except ChatTemplateError:
            continue  # the template refuses this chat at all (needs a system turn...)
        if PREFILL not in closed:
            continue  # a template that drops a final assistant turn: nothing to continue
        text = t.prompt(messages, continue_final=True).text
        # the open prompt is the closed one cut right after the prefill's text
        assert text.endswith(PREFILL), name
        assert closed.startswith(text), name
        closing += bool(closed[len(text):].strip())  # what the open prompt leaves out
        checked += 1
    assert checked > 40 and closing > 30


@pytest.mark.parametrize("name, tail", [
    ("Qwen-Qwen2.5-7B-Instruct", "<|im_start|>assistant\n" + PREFILL),
    ("meta-llama-Llama-3.1-8B-Instruct",
     "<|start_header_id|>assistant<|end_header_id|>\n\n" + PREFILL),
    ("google-gemma-2-2b-it", "<start_of_turn>model\n" + PREFILL),
    ("mistralai-Mistral-Nemo-Instruct-2407", "[/INST]" + PREFILL),
])
def test_the_open_turn_ends_in_the_prefill(templates_dir, name, tail):
    t = ChatTemplate.from_string((templates_dir / f"{name}.jinja").read_text(encoding="utf-8"),
                                 bos_token="<s>", eos_token="</s>")
    text = t.prompt([*CHAT, {"role": "assistant", "content": PREFILL}], continue_final=True).text
    assert text.endswith(tail)
