"""Reasoning in the chat view: <think>...</think> shows as a "Thoughts" block (open
while the model thinks, folded once it answers, a header to click), the answer is
what Copy and the Markdown export give, and thoughts never reach later prompts."""
from __future__ import annotations

import json

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication

from tests.support.chain_models import reasoning_model
from tests.support.ui import GEN_TIMEOUT_MS, data_dir, make_window  # noqa: F401


def _widget(qtbot, content="", streaming=False):
    from ember.ui.theme import LIGHT
    from ember.ui.widgets import MessageWidget
    w = MessageWidget(1, "assistant", content, LIGHT)
    qtbot.addWidget(w)
    w.resize(600, 400)
    w.show()
    if streaming:
        w.set_streaming(True)
    return w


def _state(w):
    """What the user sees: (thoughts header or None, thoughts shown or None, answer)."""
    header = w.thoughts_toggle.text() if w.thoughts_box.isVisible() else None
    shown = (w.thoughts_body.toPlainText().replace("\u258d", "").strip()
             if w.thoughts_box.isVisible() and w.thoughts_body.isVisible() else None)
    answer = w.body.toPlainText().replace("\u258d", "").strip() if w.body.isVisible() else None
    return header, shown, answer


def test_streaming_reply_shows_thinking_then_folds(qtbot):
    w = _widget(qtbot, streaming=True)
    text = ""
    seen = []
    # the open and close tags arrive split across chunks
    for chunk in ["<th", "ink>\nThe user", " says hi.\n</", "think>\n\n", "Hello", " there!"]:
        text += chunk
        w.set_content(text)
        seen.append(_state(w))
    assert seen == [
        (None, None, "Thinking…"),                     # "<th": could be a tag, nothing shown
        ("Thinking…", "The user", None),               # thoughts open while thinking
        ("Thinking…", "The user says hi.", None),      # "</" held back, not shown as text
        ("Thoughts", None, None),                      # closed: folded, the answer is coming
        ("Thoughts", None, "Hello"),
        ("Thoughts", None, "Hello there!"),
    ]
    w.set_streaming(False)
    assert _state(w) == ("Thoughts", None, "Hello there!")
    assert w.content == text  # the message keeps its thoughts


def test_thoughts_header_expands_and_folds(qtbot):
    w = _widget(qtbot, "<think>Step 1. Step 2.</think>\n\nDone.")
    assert _state(w) == ("Thoughts", None, "Done.")
    assert w.thoughts_toggle.arrowType() == Qt.RightArrow
    qtbot.mouseClick(w.thoughts_toggle, Qt.LeftButton)
    assert _state(w) == ("Thoughts", "Step 1. Step 2.", "Done.")
    assert w.thoughts_toggle.isChecked() and w.thoughts_toggle.arrowType() == Qt.DownArrow
    qtbot.mouseClick(w.thoughts_toggle, Qt.LeftButton)
    assert _state(w) == ("Thoughts", None, "Done.")
    # Copy gives the answer only
    w.copy()
    assert QGuiApplication.clipboard().text() == "Done."


def test_users_choice_survives_the_stream(qtbot):
    w = _widget(qtbot, streaming=True)
    w.set_content("<think>Let me think")
    qtbot.mouseClick(w.thoughts_toggle, Qt.LeftButton)  # fold it while thinking
    w.set_content("<think>Let me think more")
    assert _state(w)[1] is None
    qtbot.mouseClick(w.thoughts_toggle, Qt.LeftButton)  # and open it again
    w.set_content("<think>Let me think more</think>OK")
    assert _state(w) == ("Thoughts", "Let me think more", "OK")  # stays open: user's choice


def test_reply_cut_off_while_thinking_says_so(qtbot):
    w = _widget(qtbot, "<think>I was about to")
    header, _, answer = _state(w)
    assert header == "Thoughts" and "stopped while the model was still thinking" in answer
    w.copy()
    assert QGuiApplication.clipboard().text() == ""


def test_user_text_with_tags_is_just_text(qtbot):
    from ember.ui.theme import LIGHT
    from ember.ui.widgets import MessageWidget
    w = MessageWidget(1, "user", "<think>not hidden</think> ok", LIGHT)
    qtbot.addWidget(w)
    w.show()
    assert not w.thoughts_box.isVisible()
    assert "not hidden" in w.body.toPlainText()


@pytest.mark.native
def test_reasoning_model_in_the_app(qtbot, data_dir, tmp_path):
    """A model whose template opens <think> (as DeepSeek-R1's does): the reply streams
    as thoughts then answer, is stored with its thoughts, reloads the same way, and
    the next prompt carries only the answer."""
    cm = reasoning_model()
    path = cm.write(tmp_path / "reasoning.gguf")
    win = make_window(qtbot, data_dir)
    with qtbot.waitSignal(win.model_loaded, timeout=120_000):
        win.open_model_path(path)

    class FlushAtOnce:  # every streamed chunk reaches the view as it arrives
        def isActive(self):
            return False

        def start(self):
            win.chat.flush()

        def stop(self):
            pass

    win.chat.flush_timer = FlushAtOnce()
    states = []

    def record(msg_id, _text):
        states.append(_state(win.chat_view.widget_for(msg_id)))

    win.reply_progress.connect(record)
    with qtbot.waitSignal(win.generation_finished, timeout=GEN_TIMEOUT_MS) as blocker:
        win.send("Hello")
    stats = blocker.args[0]
    assert stats["stop_reason"] == "eog" and stats["generated_tokens"] == 5
    assert states == [
        ("Thinking…", "Hmm", None),
        ("Thinking…", "Hmm, a greeting.", None),
        ("Thoughts", None, None),
        ("Thoughts", None, "Hi"),
        ("Thoughts", None, "Hi there"),
    ]
    stored = win.store.messages(win.current_conv)[-1]
    assert stored.content == "<think>Hmm, a greeting.</think>Hi there"
    w = win.chat_view.messages()[-1]
    assert _state(w) == ("Thoughts", None, "Hi there")

    # reloaded from the store: the same split, folded
    conv = win.current_conv
    win.new_chat()
    win.select_conversation(conv)
    w = win.chat_view.messages()[-1]
    qtbot.waitUntil(w.isVisible)  # a new widget in a shown layout appears on the next loop
    assert _state(w) == ("Thoughts", None, "Hi there")
    qtbot.mouseClick(w.thoughts_toggle, Qt.LeftButton)
    assert _state(w) == ("Thoughts", "Hmm, a greeting.", "Hi there")

    # exports: Markdown has the answer, JSON keeps the whole stored message
    md, js = tmp_path / "c.md", tmp_path / "c.json"
    win.export_conversation(md, "md", conv)
    win.export_conversation(js, "json", conv)
    assert "## Assistant\n\nHi there\n" in md.read_text() and "Hmm" not in md.read_text()
    data = json.loads(js.read_text())
    assert data["conversations"][0]["messages"][-1]["content"] == stored.content

    # the next turn: the earlier reasoning is not in the prompt, the answer is
    from ember.chat import GenRequest, build_prompt
    history = win._history(conv) + [{"role": "user", "content": "Again"}]
    built = build_prompt(win.model, win.model.n_ctx,
                         win.template, GenRequest(conv, 0, history, max_new_tokens=8))
    assert "Hmm" not in built.text
    assert "<|im_start|>assistant\nHi there<|im_end|>\n<|im_start|>user\nAgain" in built.text
    assert built.think_open
    with qtbot.waitSignal(win.generation_finished, timeout=GEN_TIMEOUT_MS):
        win.send("Again")
    assert win.store.messages(conv)[-1].content == "<think>Hmm, a greeting.</think>Hi there"

    # continuing a reply cut off mid-thought does not write the open tag twice
    built = build_prompt(win.model, win.model.n_ctx, win.template, GenRequest(
        conv, 0, win._history(conv)[:1], prefix="<think>Hmm", max_new_tokens=8))
    assert built.text.endswith("<|im_start|>assistant\n<think>\nHmm")
    win.close()
