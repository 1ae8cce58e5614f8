"""Reasoning blocks (<think>...</think>): split from the answer however the reply is
streamed, kept out of later prompts, and shown as thoughts in the terminal chat."""
from __future__ import annotations

import io
import itertools
import random
from pathlib import Path

import pytest

from ember.chat import (
    ChatTemplate,
    ReasoningStream,
    Reply,
    prompt_opens_thinking,
    split_reply,
    strip_thoughts,
    strip_thoughts_from_history,
)
from ember.chat.reasoning import normalize_reply
from ember.commands.terminal import DIM, RESET, ReplyWriter

QWEN3_REPLY = ("<think>\nThe user greets me. I should greet back.\n</think>\n\n"
               "Hello! How can I help?")


# --------------------------------------------------------------------------- split_reply

@pytest.mark.parametrize("text, want", [
    (QWEN3_REPLY, Reply("The user greets me. I should greet back.", "Hello! How can I help?",
                        False, True)),
    ("Plain answer, no reasoning.", Reply("", "Plain answer, no reasoning.")),
    ("<think>Still weighing it up", Reply("Still weighing it up", "", True, True)),
    ("<think>\n\n</think>\n\nNo thoughts today.", Reply("", "No thoughts today.", False, True)),
    # DeepSeek-R1's template opens the block itself: the reply has only the close tag
    ("Okay, 2 + 2.</think>\n\n4", Reply("Okay, 2 + 2.", "4", False, True)),
    # tags in the middle of an answer are the answer's text
    ("Wrap it in <think> and </think> tags.", Reply("", "Wrap it in <think> and </think> tags.")),
    ("Sure.\n<think>later</think>", Reply("", "Sure.\n<think>later</think>")),
])
def test_split_reply(text, want):
    assert split_reply(text) == want


def test_text_without_a_block_is_kept_as_is():
    # raw completion feeds earlier turns back verbatim: " there" keeps its space
    assert split_reply(" there was").answer == " there was"
    assert strip_thoughts(" there was") == " there was"
    assert strip_thoughts("<think>x</think>\n\n there") == "there"


def test_empty_block_has_no_thoughts_to_show():
    assert not split_reply("<think></think>Hi").has_thoughts
    assert split_reply("<think>").has_thoughts  # open: the model is thinking


def test_opened_by_the_prompt():
    # the reply so far, before the close tag arrives, is thoughts, not answer
    assert split_reply("Let me see", opened=True) == Reply("Let me see", "", True, True)
    assert split_reply("Let me see", opened=False) == Reply("", "Let me see")
    assert split_reply("a</think>b", opened=True) == Reply("a", "b", False, True)


def _prefixes_agree(text: str, opened: bool = False) -> None:
    """Every streamed prefix shows nothing that the finished reply contradicts: its
    thoughts and answer are prefixes of the final ones (the split never takes text
    back from the answer once shown)."""
    final = split_reply(text, opened=opened)
    for i in range(len(text) + 1):
        r = split_reply(text[:i], opened=opened, streaming=True)
        assert final.thoughts.startswith(r.thoughts), (text[:i], r)
        assert final.answer.startswith(r.answer), (text[:i], r)
        if r.answer:
            assert not r.thinking
    assert split_reply(text, opened=opened, streaming=True) == final


@pytest.mark.parametrize("text", [QWEN3_REPLY, "Plain answer", "<think>x</think>y",
                                  "  <think>a\nb</think>  c", "<think>no close yet"])
def test_streamed_prefixes_never_flash_tags_as_answer(text):
    _prefixes_agree(text)
    # "<thi" on its own could become the tag: nothing is shown yet
    assert split_reply("<thi", streaming=True) == Reply("", "")
    assert split_reply("<think>abc</thi", streaming=True).thoughts == "abc"


def test_streamed_prefixes_with_the_block_opened_by_the_prompt():
    _prefixes_agree("Okay, so the user wants 4.\n</think>\n\nIt is 4.", opened=True)


# --------------------------------------------------------------------------- ReasoningStream

def _run_stream(parts, opened=False):
    rs = ReasoningStream(opened=opened)
    out = []
    for p in parts:
        out += rs.feed(p)
    out += rs.finish()
    return ("".join(t for k, t in out if k == "thought"),
            "".join(t for k, t in out if k == "answer"), out)


def _splits(text, n_cuts, rng):
    cuts = sorted(rng.sample(range(1, len(text)), min(n_cuts, len(text) - 1)))
    return [text[a:b] for a, b in itertools.pairwise([0, *cuts, len(text)])]


@pytest.mark.parametrize("text, opened", [
    (QWEN3_REPLY, False), ("Plain answer, no reasoning.", False),
    ("<think>open only", False), ("  <think>\n a \n</think> b", False),
    ("Okay.</think>\n\nDone.", True), ("Use <think> tags", False),
])
def test_stream_matches_split_reply_however_chunked(text, opened):
    want = split_reply(text, opened=opened)
    rng = random.Random(7)
    splits = [[text], list(text)] + [_splits(text, k, rng) for k in (1, 2, 3, 5) for _ in range(20)]
    for parts in splits:
        thoughts, answer, out = _run_stream(parts, opened)
        assert (thoughts, answer) == (want.thoughts, want.answer), parts
        # never an answer piece before the last thought piece
        kinds = [k for k, _ in out]
        assert kinds == sorted(kinds, key=lambda k: k == "answer"), out


def test_stream_splits_the_open_tag_across_chunks():
    rs = ReasoningStream()
    assert rs.feed("<th") == []  # could still be the tag: held back
    assert rs.feed("ink>I wonder") == [("thought", "I wonder")]
    assert rs.feed(" about it</th") == [("thought", " about it")]
    assert rs.thinking
    assert rs.feed("ink>\n\nYes.") == [("answer", "Yes.")]
    assert not rs.thinking and rs.answer == "Yes."


# --------------------------------------------------------------------------- history

def test_thoughts_are_not_fed_back_into_later_prompts(templates_dir: Path):
    chat = [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "<think>secret plan</think>\n\nHello!"},
        {"role": "user", "content": "What was your plan?"},
    ]
    assert strip_thoughts_from_history(chat)[1]["content"] == "Hello!"
    assert chat[1]["content"].startswith("<think>")  # the caller's copy is untouched
    sources = {
        "chatml": ChatTemplate.chatml(),
        "r1-distill": ChatTemplate.from_string(
            (templates_dir / "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja").read_text("utf-8")),
        "llama3.1": ChatTemplate.from_string(
            (templates_dir / "meta-llama-Llama-3.1-8B-Instruct.jinja").read_text("utf-8")),
        "qwen3": ChatTemplate.from_string(
            (templates_dir / "Qwen-Qwen3-0.6B.jinja").read_text("utf-8")),
    }
    for name, t in sources.items():
        # a template that keeps history verbatim would leak the reasoning when rendered raw
        text = t.prompt(chat).text
        assert "secret plan" not in text, name
        assert "Hello!" in text and "What was your plan?" in text, name
    assert "secret plan" in sources["chatml"].render(chat)  # render() itself is faithful


def test_a_reply_being_continued_keeps_its_thoughts():
    chat = [{"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "<think>hmm"}]
    assert strip_thoughts_from_history(chat)[-1]["content"] == "<think>hmm"
    out = ChatTemplate.chatml().prompt(chat, add_generation_prompt=False).text
    assert out.endswith("<|im_start|>assistant\n<think>hmm<|im_end|>\n")


def test_which_prompts_open_the_block(templates_dir: Path):
    def template(name):
        return ChatTemplate.from_string((templates_dir / name).read_text("utf-8"))

    hello = [{"role": "user", "content": "Hello"}]
    # DeepSeek-R1 (and its Llama distill) end the generation prompt with "<think>\n"
    for name in ("llama-cpp-deepseek-r1.jinja", "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja"):
        assert prompt_opens_thinking(template(name).prompt(hello).text), name
    # closed blocks: thinking switched off (Qwen3, DeepSeek V3.1), or none at all
    qwen3 = template("Qwen-Qwen3-0.6B.jinja")
    assert not prompt_opens_thinking(qwen3.prompt(hello, enable_thinking=False).text)
    assert not prompt_opens_thinking(qwen3.prompt(hello).text)
    assert not prompt_opens_thinking(template("deepseek-ai-DeepSeek-V3.1.jinja").prompt(hello).text)
    assert not prompt_opens_thinking(ChatTemplate.chatml().prompt(hello).text)


def test_stored_reply_names_its_block():
    assert normalize_reply("Hmm.</think>Hi", opened=True) == "<think>Hmm.</think>Hi"
    assert normalize_reply("<think>Hmm.</think>Hi", opened=True) == "<think>Hmm.</think>Hi"
    assert normalize_reply("Hi", opened=False) == "Hi"
    assert strip_thoughts(normalize_reply("Hmm.", opened=True)) == ""  # cut off mid-thought


# --------------------------------------------------------------------------- terminal

class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_terminal_prefixes_thoughts_when_not_a_tty():
    out = io.StringIO()
    w = ReplyWriter(out)
    for piece in ["<thi", "nk>\nFirst line.\nSecond", " line.\n</thi", "nk>\n\nThe answer."]:
        w.feed(piece)
    w.finish()
    assert out.getvalue() == "| First line.\n| Second line.\n\nThe answer."
    assert w.answer == "The answer."


def test_terminal_dims_thoughts_on_a_tty():
    out = _Tty()
    w = ReplyWriter(out, opened=True)  # the template opened the block
    for piece in ["Think", "ing.</think>", "Done."]:
        w.feed(piece)
    w.finish()
    assert out.getvalue() == f"{DIM}Thinking.{RESET}\n\nDone."
    # cut off while thinking: the colour is reset all the same
    out = _Tty()
    w = ReplyWriter(out)
    w.feed("<think>still")
    w.finish()
    assert out.getvalue() == f"{DIM}still{RESET}" and w.answer == ""


def test_terminal_answer_without_reasoning_is_untouched():
    out = io.StringIO()
    w = ReplyWriter(out)
    for piece in ["Hel", "lo <b", "> there"]:
        w.feed(piece)
    w.finish()
    assert out.getvalue() == "Hello <b> there"


@pytest.mark.native
def test_terminal_chat_shows_thoughts_apart_and_keeps_them_out_of_history(tmp_path, monkeypatch):
    """`ember chat` on a model whose template opens <think>: the thoughts are prefixed,
    the answer plain, and the next turn's prompt holds only the answer."""
    from ember.chat import template as template_module
    from ember.engine import SamplingParams
    from ember.commands.terminal import chat_loop
    from tests.support.chain_models import reasoning_model
    path = reasoning_model().write(tmp_path / "reasoning.gguf")
    prompts = []
    real_prompt = template_module.ChatTemplate.prompt

    def spy(self, messages, *a, **kw):
        p = real_prompt(self, messages, *a, **kw)
        prompts.append(p.text)
        return p

    monkeypatch.setattr(template_module.ChatTemplate, "prompt", spy)
    out = io.StringIO()
    rc = chat_loop(path, n_ctx=256, params=SamplingParams(temperature=0.0), max_tokens=16,
                   stdin=io.StringIO("Hello\nAgain\n\n"), stdout=out)
    assert rc == 0
    turn = "| Hmm, a greeting.\n\nHi there\n"
    assert out.getvalue() == f"\n> {turn}\n> {turn}\n> "
    assert len(prompts) == 2
    assert "Hmm" not in prompts[1]
    assert "<|im_start|>assistant\nHi there<|im_end|>\n<|im_start|>user\nAgain" in prompts[1]
