"""gpt-oss's harmony chat format: the prompt Ember renders is what openai-gpt-oss-120b.jinja
(llama.cpp's copy, an asset of tools/fetch_assets.py) gives, the built-in harmony format for
files without a template renders the same, and a reply's analysis channel is the thoughts
block and its final channel the answer, however the stream is cut into chunks.

The replies parsed here are rendered by the real template itself (an assistant turn with
``thinking`` as the last message, add_generation_prompt off: what the model is trained to
write after the prompt), not written by hand."""
from __future__ import annotations

from pathlib import Path

import pytest
from ember.chat import (
    BUILTIN_FORMATS,
    ChatTemplate,
    ReasoningStream,
    StopScanner,
    detect_builtin_format,
    split_reply,
    strip_thoughts,
)

from tests.chat.test_chat_templates import BOS, EOS, FIXED_NOW, reference_render

TEMPLATE = "openai-gpt-oss-120b.jinja"

THINKING = "The user asks for the capital of France.\n\nThat is Paris; say so briefly."
ANSWER = "The capital of France is **Paris**.\n\n- population: about 2.1 million"

CONVERSATIONS = {
    "one turn": [{"role": "user", "content": "What is the capital of France?"}],
    "system and two turns": [
        {"role": "system", "content": "You are a concise assistant."},
        {"role": "user", "content": "What is the capital of France?"},
        {"role": "assistant", "content": "Paris."},
        {"role": "user", "content": "And of Italy?"},
    ],
    "developer": [
        {"role": "developer", "content": "Answer in French."},
        {"role": "user", "content": "Hello"},
    ],
}


@pytest.fixture(scope="module")
def source(templates_dir: Path) -> str:
    return (templates_dir / TEMPLATE).read_text(encoding="utf-8")


def ours(source: str) -> ChatTemplate:
    return ChatTemplate.from_string(source, BOS, EOS, now=lambda: FIXED_NOW)


def model_reply(source: str, messages: list[dict], thinking: str, answer: str) -> str:
    """What the model writes after the generation prompt, as the template itself renders
    a turn with its analysis: the training-time rendering minus the inference prompt."""
    prompt = reference_render(source, messages)
    full = reference_render(source, [*messages, {"role": "assistant", "thinking": thinking,
                                                 "content": answer}],
                            add_generation_prompt=False)
    assert prompt.endswith("<|start|>assistant") and full.startswith(prompt)
    return full[len(prompt):]


# --------------------------------------------------------------------------- the prompt

@pytest.mark.parametrize("name", CONVERSATIONS)
@pytest.mark.parametrize("kwargs", [{}, {"reasoning_effort": "high"},
                                    {"model_identity": "You are Ember's test model."}])
def test_prompt_is_what_the_template_gives(source, name, kwargs):
    msgs = CONVERSATIONS[name]
    want = reference_render(source, msgs, **kwargs)
    assert ours(source).render(msgs, **kwargs) == want
    assert ours(source).prompt(msgs, **kwargs).text == want
    assert want.endswith("<|end|><|start|>assistant")


@pytest.mark.parametrize("name", CONVERSATIONS)
@pytest.mark.parametrize("kwargs", [{}, {"reasoning_effort": "low"}])
def test_builtin_harmony_renders_as_the_template(source, name, kwargs):
    msgs = CONVERSATIONS[name]
    builtin = ChatTemplate.from_builtin("harmony", BOS, EOS, now=lambda: FIXED_NOW)
    for add in (True, False):
        assert builtin.render(msgs, add, **kwargs) == reference_render(
            source, msgs, add_generation_prompt=add, **kwargs)
    # a last assistant turn with its analysis, as training renders it
    turn = [*msgs, {"role": "assistant", "thinking": THINKING, "content": ANSWER}]
    assert builtin.render(turn, False) == reference_render(source, turn,
                                                           add_generation_prompt=False)


def test_stored_replies_reach_the_next_prompt_as_their_final_channel(source):
    """The app stores a reply as the model wrote it (channels and all); the template
    refuses channel tags in content, so the next prompt carries the answer only, as the
    template does itself with a turn's thinking."""
    first = [{"role": "user", "content": "What is the capital of France?"}]
    stored = model_reply(source, first, THINKING, ANSWER)
    # what the app keeps: the stop string <|return|> is cut off
    stored = stored[: stored.index("<|return|>")]
    chat = [*first, {"role": "assistant", "content": stored},
            {"role": "user", "content": "Thanks!"}]
    want = reference_render(source, [*first, {"role": "assistant", "thinking": THINKING,
                                              "content": ANSWER},
                                     {"role": "user", "content": "Thanks!"}])
    assert ours(source).prompt(chat).text == want
    assert THINKING not in want
    assert strip_thoughts(stored) == ANSWER


def test_stop_strings_end_the_reply_not_its_analysis(source):
    for t in (ours(source), ChatTemplate.from_builtin("harmony", BOS, EOS)):
        assert "<|return|>" in t.stop_strings and "<|call|>" in t.stop_strings
        assert "<|end|>" not in t.stop_strings  # it closes the analysis message too
    # a file whose EOS (or EOT) token is <|end|>: the engine does not end on it (it drops
    # it from the end-of-generation set when <|return|> and <|call|> exist, as llama.cpp
    # does), so neither does the text
    t = ChatTemplate.from_string(source, "<|startoftext|>", "<|end|>",
                                 extra_stop_tokens=["<|end|>"])
    assert "<|end|>" not in t.stop_strings and "<|return|>" in t.stop_strings


def test_gpt_oss_file_without_template_speaks_harmony():
    """The synthetic gpt-oss file has no template and Llama 3's vocabulary: the family
    decides (gpt-oss is trained on harmony only), not the vocabulary."""
    meta = {"general.architecture": "gpt-oss",
            "tokenizer.ggml.tokens": ["<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]}
    assert detect_builtin_format(meta) is BUILTIN_FORMATS["harmony"]
    llama = {**meta, "general.architecture": "llama"}
    assert detect_builtin_format(llama) is BUILTIN_FORMATS["llama3"]
    t = ChatTemplate.from_metadata(meta)
    assert t.builtin is BUILTIN_FORMATS["harmony"] and "harmony" in t.notice.lower()
    # an o200k_harmony vocabulary points to it too, whatever the architecture
    o200k = {"tokenizer.ggml.tokens": ["<|start|>", "<|channel|>", "<|message|>", "<|end|>",
                                       "<|return|>", "<|call|>"]}
    assert detect_builtin_format(o200k) is BUILTIN_FORMATS["harmony"]


# --------------------------------------------------------------------------- the reply

@pytest.fixture(scope="module")
def generated(source) -> str:
    """The model's text after the prompt up to its stop string, as the app receives it."""
    text = model_reply(source, CONVERSATIONS["one turn"], THINKING, ANSWER)
    scanner = StopScanner(ours(source).stop_strings)
    shown, stopped = scanner.feed(text)
    assert stopped and scanner.matched == "<|return|>"
    assert shown.startswith("<|channel|>analysis<|message|>")
    return shown


def test_reply_splits_into_analysis_and_final(generated):
    r = split_reply(generated)
    assert (r.thoughts, r.answer) == (THINKING, ANSWER)
    assert r.has_block and not r.thinking
    # the same with the closing token the model writes (when no stop string cut it)
    for end in ("<|return|>", "<|end|>", "<|call|>"):
        assert split_reply(generated + end).answer == ANSWER


def test_every_streamed_prefix_grows_toward_the_whole(generated):
    """Cut anywhere, the streamed view shows a prefix of the final thoughts and answer,
    never a marker or part of one, with the thoughts block open exactly while the
    analysis message streams."""
    final = split_reply(generated)
    body_start = generated.index("<|message|>") + len("<|message|>")
    body_end = generated.index("<|end|>")
    prev_t = prev_a = ""
    for i in range(len(generated) + 1):
        r = split_reply(generated[:i], streaming=True)
        assert final.thoughts.startswith(r.thoughts) and final.answer.startswith(r.answer), i
        assert r.thoughts.startswith(prev_t) and r.answer.startswith(prev_a), i
        assert "<|" not in r.thoughts and "<|" not in r.answer, i
        assert r.thinking == (body_start <= i < body_end + len("<|end|>")), i
        if r.thinking:
            # the thoughts block fills as the analysis streams
            assert r.thoughts == THINKING[: i - body_start].strip(), i
            assert r.answer == ""
        prev_t, prev_a = r.thoughts, r.answer
    assert (prev_t, prev_a) == (final.thoughts, final.answer)


def test_chunks_split_anywhere_give_the_same_reply(generated, source):
    """The model's text (its closing <|return|> included) in two chunks cut at every
    position: the stop scanner passes the same reply, and the incremental splitter gives
    the same thoughts and answer as the whole reply split at once."""
    full = model_reply(source, CONVERSATIONS["one turn"], THINKING, ANSWER)
    for pos in range(len(full) + 1):
        scanner = StopScanner(ours(source).stop_strings)
        stream = ReasoningStream()
        text, pieces = "", []
        for chunk in (full[:pos], full[pos:]):
            shown, stopped = scanner.feed(chunk)
            text += shown
            pieces += stream.feed(shown)
            if stopped:
                break
        pieces += stream.finish()
        assert text == generated, pos
        assert "".join(t for k, t in pieces if k == "thought") == THINKING, pos
        assert "".join(t for k, t in pieces if k == "answer") == ANSWER, pos


def test_reasoning_stream_character_by_character(generated):
    stream = ReasoningStream()
    kinds = []
    thinking_seen = False
    for ch in generated:
        for kind, _text in stream.feed(ch):
            kinds.append(kind)
        thinking_seen |= stream.thinking
    for kind, _text in stream.finish():
        kinds.append(kind)
    assert thinking_seen and not stream.thinking
    assert (stream.thoughts, stream.answer) == (THINKING, ANSWER)
    # thoughts first, then the answer: never interleaved
    assert kinds == sorted(kinds, key=lambda k: k != "thought")


def test_preamble_is_answer_tool_call_is_neither():
    text = ("<|channel|>analysis<|message|>Need weather.<|end|>"
            "<|start|>assistant<|channel|>commentary<|message|>Let me look it up.<|end|>"
            "<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>"
            '{"city": "Paris"}')
    r = split_reply(text)
    assert r.thoughts == "Need weather." and r.answer == "Let me look it up."


def test_reply_cut_off_in_its_analysis_is_still_thinking():
    r = split_reply("<|channel|>analysis<|message|>Let me")
    assert r.thinking and r.thoughts == "Let me" and r.answer == ""


def test_text_that_only_mentions_channels_is_answer():
    r = split_reply("Harmony writes <|channel|>analysis<|message|> first.")
    assert r.answer.startswith("Harmony writes") and not r.has_block
