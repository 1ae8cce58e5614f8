"""Chatting with mixture-of-experts models in the app: the synthetic qwen3moe and gpt-oss
files (tools/make_arch_models.py) open and stream the reply the engine itself gives for the
prompt, gpt-oss in its harmony format; and a harmony reply (a model whose greedy output is
fixed: tests/support/chain_models.py) streams its analysis channel into the thoughts block,
then its final channel as the answer, and only the answer reaches the next prompt."""
from __future__ import annotations

import itertools

import pytest
from PySide6.QtWidgets import QLabel

from tests.support.chain_models import harmony_app_model
from tests.support.ui import (  # noqa: F401
    GEN_TIMEOUT_MS,
    data_dir,
    find,
    load_by_drop,
    make_window,
    type_and_send,
    write_settings,
)
from tests.ui.test_ui_reasoning import _state
from tools import make_arch_models

pytestmark = pytest.mark.native


def engine_reply(path, text, n):
    """The engine's own greedy reply to a one-message chat, cut at the prompt's stop
    strings, with the template (or built-in format) the file points to."""
    from ember.chat import ChatTemplate, StopScanner
    from ember.engine import Model, SamplingParams, Session
    m = Model(str(path), n_ctx=512)
    try:
        t = ChatTemplate.from_metadata(m.metadata, token_text=m.token_text)
        p = t.prompt([{"role": "user", "content": text}])
        sc = StopScanner(p.stop_strings)
        out = []
        for piece in Session(m).generate(p.text, n, SamplingParams(temperature=0.0)):
            emit, stopped = sc.feed(piece)
            out.append(emit)
            if stopped:
                break
        else:
            out.append(sc.flush())
        return "".join(out), p
    finally:
        m.close()


class FlushAtOnce:
    """Every streamed chunk reaches the view as it arrives."""

    def __init__(self, win):
        self.win = win

    def isActive(self):
        return False

    def start(self):
        self.win.chat.flush()

    def stop(self):
        pass


@pytest.mark.parametrize("family", ["qwen3moe", "gpt-oss"])
def test_moe_file_opens_and_streams_the_engines_reply(qtbot, data_dir, family):
    path = make_arch_models.build(family)
    prompt = "What is the capital of France?"
    want, p = engine_reply(path, prompt, 6)
    win = make_window(qtbot, data_dir)
    load_by_drop(qtbot, win, path)
    assert find(win, QLabel, "modelArch").text() == family
    assert "experts" in find(win, QLabel, "modelParams").text()
    if family == "gpt-oss":
        # no template in the file, Llama 3's vocabulary: the family's harmony format
        assert find(win, QLabel, "modelTemplate").text() == "Harmony (gpt-oss) (built-in)"
        assert p.text.endswith("<|end|><|start|>assistant")
        assert {"<|return|>", "<|call|>"} <= set(p.stop_strings)
        assert "<|end|>" not in p.stop_strings
    win.chat.flush_timer = FlushAtOnce(win)
    states = []
    win.reply_progress.connect(lambda _id, text: states.append(text))
    stats = type_and_send(qtbot, win, prompt)
    assert stats["generated_tokens"] >= 1
    stored = win.store.messages(win.current_conv)[-1]
    assert stored.role == "assistant" and stored.content == want
    assert states and all(b.startswith(a) for a, b in itertools.pairwise(states))
    win.close()


def test_harmony_reply_streams_thoughts_then_answer(qtbot, data_dir, tmp_path, templates_dir):
    source = (templates_dir / "openai-gpt-oss-120b.jinja").read_text(encoding="utf-8")
    path = harmony_app_model(source).write(tmp_path / "harmony.gguf")
    write_settings(data_dir, max_new_tokens=32, n_ctx=1024)
    win = make_window(qtbot, data_dir)
    with qtbot.waitSignal(win.model_loaded, timeout=120_000):
        win.open_model_path(path)
    win.chat.flush_timer = FlushAtOnce(win)
    states = []
    win.reply_progress.connect(
        lambda msg_id, _text: states.append(_state(win.chat_view.widget_for(msg_id))))
    with qtbot.waitSignal(win.generation_finished, timeout=GEN_TIMEOUT_MS) as blocker:
        win.send("Hello")
    stats = blocker.args[0]
    # <|end|> closed the analysis without ending the reply; <|return|> ended it
    assert stats["stop_reason"] == "eog" and stats["generated_tokens"] == 10
    seen = list(dict.fromkeys(states))
    assert seen == [
        (None, None, "Thinking…"),                # "<|channel|>analysis": a header arriving
        ("Thinking…", "", None),                  # "<|message|>": the analysis is open
        ("Thinking…", "Hmm", None),               # the thoughts fill as they stream
        ("Thinking…", "Hmm, a greeting.", None),
        ("Thoughts", None, None),                 # <|end|>: folded, the final header comes
        ("Thoughts", None, "Hi"),
        ("Thoughts", None, "Hi there"),
    ], seen
    stored = win.store.messages(win.current_conv)[-1]
    assert stored.content == ("<|channel|>analysis<|message|>Hmm, a greeting.<|end|>"
                              "<|start|>assistant<|channel|>final<|message|>Hi there")
    w = win.chat_view.messages()[-1]
    assert _state(w) == ("Thoughts", None, "Hi there")
    assert w.answer_text == "Hi there"

    # reloaded from the store: the same split
    conv = win.current_conv
    win.new_chat()
    win.select_conversation(conv)
    w = win.chat_view.messages()[-1]
    qtbot.waitUntil(w.isVisible)
    assert _state(w) == ("Thoughts", None, "Hi there")

    # the next prompt has the answer as the final channel, and no analysis
    from ember.chat import GenRequest, build_prompt
    history = win._history(conv) + [{"role": "user", "content": "Again"}]
    built = build_prompt(win.model, win.model.n_ctx, win.template,
                         GenRequest(conv, 0, history, max_new_tokens=16))
    assert "Hmm" not in built.text
    assert built.text.endswith("<|start|>assistant<|channel|>final<|message|>Hi there<|end|>"
                               "<|start|>user<|message|>Again<|end|><|start|>assistant")
    win.close()
