"""Stop strings: detection from templates and the streaming scanner."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "app"))

from ember.chat import ChatTemplate, StopScanner, detect_stop_strings

# --------------------------------------------------------------------------
# Detection
# --------------------------------------------------------------------------

# A model family's end-of-turn marker -> a template that uses it.
FAMILY_STOPS = {
    "Qwen-Qwen2.5-7B-Instruct.jinja": "<|im_end|>",  # ChatML
    "meta-llama-Llama-3.1-8B-Instruct.jinja": "<|eot_id|>",
    "google-gemma-2-2b-it.jinja": "<end_of_turn>",
    "google-gemma-4-31B-it.jinja": "<turn|>",
    "microsoft-Phi-3.5-mini-instruct.jinja": "<|end|>",
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja": "<｜end▁of▁sentence｜>",
    "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja": "<|END_OF_TURN_TOKEN|>",
    "GLM-4.6.jinja": "<|user|>",
    "ibm-granite-granite-3.3-2B-Instruct.jinja": "<|end_of_text|>",
    "openai-gpt-oss-120b.jinja": "<|return|>",
    "MiniMax-M2.jinja": "[e~[",
}

# Templates whose turns are not closed by any stop we detect, and why.
NOT_MARKED = {
    "llama-cpp-rwkv-world.jinja": "plain-text roles ('User: ' / 'Assistant:'), no marker token; relies on EOS",
    "openai-gpt-oss-120b.jinja": "past replies end with <|end|>, a generated one with <|return|>/<|call|> (the stops); "
    "<|end|> also closes the reasoning, so it must not stop",
    "tencent-Hy3.jinja": "assembles its end marker at render time ('<｜hy_eos{}｜>'.format(...)) instead of using "
    "eos_token; the model's EOS from metadata is that marker",
}


@pytest.mark.parametrize(("name", "marker"), sorted(FAMILY_STOPS.items()))
def test_family_marker_detected(templates_dir: Path, name: str, marker: str) -> None:
    template = ChatTemplate.from_string(
        (templates_dir / name).read_text(encoding="utf-8"), "<s>", "</s>"
    )
    assert marker in template.stop_strings
    assert template.stop_strings[0] == "</s>"  # EOS always stops, and first


def test_mistral_stops_on_eos_from_metadata(templates_dir: Path) -> None:
    # Mistral templates write eos_token, not a literal: the stop comes from the vocab.
    source = (templates_dir / "mistralai-Mistral-Nemo-Instruct-2407.jinja").read_text(
        encoding="utf-8"
    )
    template = ChatTemplate.from_string(source, "<s>", "</s>")
    assert template.stop_strings == ("</s>",)


def test_harmony_does_not_stop_at_end_of_analysis(templates_dir: Path) -> None:
    # gpt-oss closes its reasoning message with <|end|> and keeps going; only
    # <|return|>/<|call|> end the reply.
    source = (templates_dir / "openai-gpt-oss-120b.jinja").read_text(encoding="utf-8")
    stops = ChatTemplate.from_string(source, "", "<|return|>").stop_strings
    assert "<|end|>" not in stops
    assert stops == ("<|return|>", "<|call|>")


def test_markers_of_other_families_are_not_added() -> None:
    assert detect_stop_strings(
        "{{ '<|im_start|>' + m + '<|im_end|>' }}", ["<eos>"]
    ) == ("<eos>", "<|im_end|>")
    assert detect_stop_strings("plain {{ text }}", ["", "<eos>", "<eos>"]) == ("<eos>",)


def test_every_template_turn_end_is_a_stop(templates_dir: Path) -> None:
    # What a template writes between an assistant reply and the next user
    # message must contain a stop string, or the model could run on into a
    # fake next turn.
    messages = [
        {"role": "user", "content": "USER-ONE"},
        {"role": "assistant", "content": "ASSISTANT-ONE"},
        {"role": "user", "content": "USER-TWO"},
    ]
    extra = {
        "CohereForAI-c4ai-command-r-plus-tool_use.jinja": {"tools": []},
        "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja": {"tools": []},
        "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja": {"tools": []},
        "fireworks-ai-llama-3-firefunction-v2.jinja": {
            "functions": "[]",
            "datetime": "today",
        },
    }
    uncovered = []
    files = sorted(templates_dir.glob("*.jinja"))
    assert len(files) == 70
    for path in files:
        template = ChatTemplate.from_string(
            path.read_text(encoding="utf-8"), "<BOS>", "<EOS>"
        )
        text = template.render(messages, **extra.get(path.name, {}))
        between = text[
            text.index("ASSISTANT-ONE") + len("ASSISTANT-ONE") : text.index("USER-TWO")
        ]
        covered = any(stop in between for stop in template.stop_strings)
        if covered == (path.name in NOT_MARKED):
            uncovered.append(f"{path.name}: {between!r} vs {template.stop_strings}")
    assert not uncovered, "\n".join(uncovered)


# --------------------------------------------------------------------------
# Scanner
# --------------------------------------------------------------------------


def test_plain_text_passes_straight_through() -> None:
    scanner = StopScanner(["<|im_end|>"])
    assert scanner.feed("Hello, world") == ("Hello, world", False)
    assert scanner.flush() == ""


def test_stop_inside_a_chunk() -> None:
    scanner = StopScanner(["<|im_end|>"])
    assert scanner.feed("Paris.<|im_end|>\n<|im_start|>user") == ("Paris.", True)
    assert scanner.matched == "<|im_end|>"
    assert scanner.stopped
    assert scanner.feed("more") == ("", True)
    assert scanner.flush() == ""


def test_partial_marker_is_held_back() -> None:
    scanner = StopScanner(["<|eot_id|>"])
    assert scanner.feed("Done<|eot") == ("Done", False)
    assert scanner.feed("_id|>tail") == ("", True)
    assert scanner.matched == "<|eot_id|>"


def test_held_back_text_released_when_it_turns_out_harmless() -> None:
    scanner = StopScanner(["<|eot_id|>"])
    assert scanner.feed("a <|e") == ("a ", False)
    assert scanner.feed("xample") == ("<|example", False)
    assert scanner.feed(" <") == (" ", False)
    assert scanner.flush() == "<"  # end of stream: the tail was never a marker


def test_marker_split_one_character_at_a_time() -> None:
    scanner = StopScanner(["<end_of_turn>"])
    shown = []
    for ch in "Hi!<end_of_turn>\n":
        emitted, stopped = scanner.feed(ch)
        shown.append(emitted)
        if stopped:
            break
    assert "".join(shown) == "Hi!"
    assert scanner.stopped


def test_multibyte_marker_split() -> None:
    scanner = StopScanner(["<｜end▁of▁sentence｜>"])
    assert scanner.feed("答案是42<｜end▁") == ("答案是42", False)
    assert scanner.feed("of▁sentence｜>") == ("", True)


def test_earliest_completed_stop_wins() -> None:
    # Fed one character at a time "bc" completes before "abcd" would, so
    # it must win for a single chunk too.
    scanner = StopScanner(["abcd", "bc"])
    assert scanner.feed("xabcd") == ("xa", True)
    assert scanner.matched == "bc"


def test_no_stops_means_no_holding() -> None:
    scanner = StopScanner([])
    assert scanner.feed("<|im_end|>") == ("<|im_end|>", False)
    assert StopScanner([""]).feed("abc") == ("abc", False)


@pytest.mark.parametrize("seed", range(20))
def test_result_is_independent_of_chunking(seed: int) -> None:
    stops = ["<|im_end|>", "<|im_start|>", "</s>", "\n\nUser:"]
    text = "Sure <|im_e and </ then \n\nUse more <|im_sta text</s> after"
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(1, len(text)), rng.randint(1, 15)))
    chunks = [text[i:j] for i, j in zip([0, *cuts], [*cuts, len(text)], strict=True)]

    scanner = StopScanner(stops)
    out = []
    for chunk in chunks:
        emitted, stopped = scanner.feed(chunk)
        out.append(emitted)
        if stopped:
            break
    else:
        out.append(scanner.flush())
    assert "".join(out) == "Sure <|im_e and </ then \n\nUse more <|im_sta text"
    assert scanner.matched == "</s>"
