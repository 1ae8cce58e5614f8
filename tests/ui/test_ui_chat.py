"""The desktop app end to end on the real starter model: drop it on the window, chat
with streaming, stop, regenerate, edit, switch chats, restart, export and import."""
from __future__ import annotations

import json
import re
import time

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QListView, QPlainTextEdit, QPushButton, QScrollArea, QWidget

from tests.support.ui import (  # noqa: F401
    GEN_TIMEOUT_MS,
    data_dir,
    find,
    load_by_drop,
    make_window,
    type_and_send,
    write_settings,
)

pytestmark = pytest.mark.native


def greedy_reply(model_path, text, n):
    """What the engine itself answers, greedily, for a one-message chat."""
    from ember.chat import ChatTemplate, StopScanner
    from ember.engine import Model, SamplingParams, Session
    m = Model(model_path, n_ctx=512)
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
        return "".join(out)
    finally:
        m.close()


def bodies(win):
    return [(w.role, w.content) for w in win.chat_view.messages()]


def test_first_run_drop_model_and_stream_a_reply(qtbot, data_dir, starter_model_path):
    win = make_window(qtbot, data_dir)
    # first run: the welcome view, no model, no chats
    assert win.stack.currentWidget() is find(win, QWidget, "welcomeView")
    assert find(win, QPushButton, "openModelButton").isVisible()
    assert find(win, QListView, "conversationList").model().rowCount() == 0

    load_by_drop(qtbot, win, starter_model_path)
    assert win.stack.currentWidget() is win.chat_page
    card = find(win, QWidget, "modelCard")
    assert card.isVisible()
    assert find(win, QLabel, "modelArch").text() == "llama"
    assert find(win, QLabel, "modelQuant").text() == "Q4_1"
    assert find(win, QLabel, "modelParams").text() == "134.5M"
    assert find(win, QLabel, "modelTrainedContext").text() == "8,192 tokens"
    assert find(win, QLabel, "modelContext").text() == "512 tokens"
    assert find(win, QLabel, "modelFileSize").text() == "93.8 MB"
    assert find(win, QLabel, "modelRamEstimate").text().startswith("≈ ")

    states = []
    win.reply_progress.connect(lambda _id, text: states.append(text))

    # The window flushes streamed text at most every FLUSH_MS; a fast engine writes these
    # six tokens within one interval, so here every chunk flushes as it arrives and the
    # test sees the stream itself, whatever the machine's speed.
    class FlushAtOnce:
        def isActive(self):
            return False

        def start(self):
            win.chat.flush()

        def stop(self):
            pass

    win.chat.flush_timer = FlushAtOnce()
    prompt = "What is the capital of France?"
    stats = type_and_send(qtbot, win, prompt)
    want = greedy_reply(starter_model_path, prompt, 6)

    # streamed in order: every batch extends the one before, and the last is the answer
    assert len(states) >= 2, states
    for a, b in zip(states, states[1:], strict=False):
        assert b.startswith(a) and len(b) > len(a)
    assert states[-1] == want
    assert bodies(win) == [("user", prompt), ("assistant", want)]
    assert stats["stop_reason"] == "length" and stats["generated_tokens"] == 6
    msgs = win.store.messages(win.current_conv)
    assert [(m.role, m.content, m.complete) for m in msgs] == [
        ("user", prompt, True), ("assistant", want, True)]
    assert msgs[1].meta["generated_tokens"] == 6
    # the chat is named after the first message; the status bar has the numbers
    assert find(win, QListView, "conversationList").model().index(0, 0).data() == prompt
    tps = find(win, QLabel, "statusTokensPerSecond").text()
    assert "prompt" in tps and "generation" in tps and "t/s" in tps
    assert find(win, QLabel, "statusContext").text().endswith("/ 512")
    # the test process may hold other models by now: MB or GB, but a real number
    assert re.fullmatch(r"memory \d+(\.\d+)? (MB|GB)", find(win, QLabel, "statusMemory").text())
    assert find(win, QLabel, "statusBackend").text().startswith("CPU")
    assert win.composer.input.toPlainText() == ""


def test_shift_enter_is_a_newline_not_a_send(qtbot, data_dir, starter_model_path):
    win = make_window(qtbot, data_dir)
    load_by_drop(qtbot, win, starter_model_path)
    inp = find(win, QPlainTextEdit, "chatInput")
    inp.setFocus()
    qtbot.keyClicks(inp, "line one")
    qtbot.keyClick(inp, Qt.Key_Return, Qt.ShiftModifier)
    qtbot.keyClicks(inp, "line two")
    assert inp.toPlainText() == "line one\nline two"
    assert not win.generating and win.chat_view.messages() == []


def test_stop_regenerate_and_edit(qtbot, data_dir, starter_model_path):
    win = make_window(qtbot, data_dir)
    load_by_drop(qtbot, win, starter_model_path)
    win.settings.max_new_tokens = 200  # long enough to stop it in the middle

    # stop mid-answer with Esc
    inp = win.composer.input
    inp.setFocus()
    qtbot.keyClicks(inp, "Tell me a long story about a dragon.")
    with qtbot.waitSignal(win.reply_progress, timeout=GEN_TIMEOUT_MS):
        qtbot.keyClick(inp, Qt.Key_Return)
    assert win.generating and find(win, QPushButton, "stopButton").isVisible()
    with qtbot.waitSignal(win.generation_finished, timeout=GEN_TIMEOUT_MS) as blocker:
        t0 = time.perf_counter()
        qtbot.keyClick(inp, Qt.Key_Escape)
    stop_s = time.perf_counter() - t0
    stats = blocker.args[0]
    assert stats["stop_reason"] == "cancelled"
    assert 0 < stats["generated_tokens"] < 200
    assert stop_s < 3.0, f"stopping took {stop_s:.2f} s"
    partial = win.store.messages(win.current_conv)[-1]
    assert partial.role == "assistant" and partial.content and partial.complete
    assert partial.meta["stop_reason"] == "cancelled"
    assert find(win, QPushButton, "sendButton").isVisible()

    # regenerate replaces the reply (greedy: the same start, now to the 6-token limit)
    win.settings.max_new_tokens = 6
    last = win.chat_view.messages()[-1]
    assert last.regenerate_button.isVisible()
    with qtbot.waitSignal(win.generation_finished, timeout=GEN_TIMEOUT_MS):
        qtbot.mouseClick(last.regenerate_button, Qt.LeftButton)
    msgs = win.store.messages(win.current_conv)
    assert [m.role for m in msgs] == ["user", "assistant"]
    assert msgs[1].id != partial.id and msgs[1].complete
    regenerated = msgs[1].content
    assert regenerated and (partial.content.startswith(regenerated)
                            or regenerated.startswith(partial.content))

    # continue extends the same reply
    with qtbot.waitSignal(win.generation_finished, timeout=GEN_TIMEOUT_MS):
        qtbot.mouseClick(win.chat_view.messages()[-1].continue_button, Qt.LeftButton)
    msgs = win.store.messages(win.current_conv)
    assert len(msgs) == 2 and msgs[1].content.startswith(regenerated)
    assert len(msgs[1].content) > len(regenerated)

    # edit the question: the later reply is replaced by one for the new text
    user_w = win.chat_view.messages()[0]
    qtbot.mouseClick(user_w.edit_button, Qt.LeftButton)
    editor = find(win, QPlainTextEdit, "messageEditor")
    editor.setPlainText("Name a colour.")
    with qtbot.waitSignal(win.generation_finished, timeout=GEN_TIMEOUT_MS):
        qtbot.mouseClick(find(win, QPushButton, "saveEditButton"), Qt.LeftButton)
    msgs = win.store.messages(win.current_conv)
    assert [(m.role, m.content) for m in msgs][:1] == [("user", "Name a colour.")]
    assert len(msgs) == 2 and msgs[1].role == "assistant" and msgs[1].content
    assert msgs[1].content == greedy_reply(starter_model_path, "Name a colour.", 6)
    assert bodies(win) == [(m.role, m.content) for m in msgs]


def test_switch_chats_restart_export_import(qtbot, data_dir, starter_model_path, tmp_path):
    win = make_window(qtbot, data_dir)
    load_by_drop(qtbot, win, starter_model_path)
    type_and_send(qtbot, win, "Hello there")
    first = win.current_conv
    qtbot.keyClick(win, Qt.Key_N, Qt.ControlModifier)  # Ctrl+N
    assert win.current_conv != first and win.chat_view.messages() == []
    type_and_send(qtbot, win, "Count to three")
    second = win.current_conv
    chats = find(win, QListView, "conversationList")
    assert chats.model().rowCount() == 2
    # newest first; clicking the older chat shows its messages
    assert chats.model().index(0, 0).data() == "Count to three"
    chats.setCurrentIndex(chats.model().index(1, 0))
    assert win.current_conv == first
    assert bodies(win)[0] == ("user", "Hello there")
    history = {c: [(m.role, m.content) for m in win.store.messages(c)] for c in (first, second)}
    win.close()

    # a new window on the same data folder reopens the model and has the history
    win2 = make_window(qtbot, data_dir)
    with qtbot.waitSignal(win2.model_loaded, timeout=120_000):
        pass
    chats = find(win2, QListView, "conversationList")
    assert [chats.model().index(i, 0).data() for i in range(chats.model().rowCount())] == [
        "Count to three", "Hello there"]
    win2.select_conversation(first)
    assert bodies(win2) == history[first]

    # export Markdown + JSON, import JSON as a new chat
    md, js = tmp_path / "chat.md", tmp_path / "chat.json"
    win2.export_conversation(md, "md", first)
    win2.export_conversation(js, "json", first)
    text = md.read_text()
    assert text.startswith("# Hello there") and "## You\n\nHello there" in text
    assert history[first][1][1].strip() in text
    data = json.loads(js.read_text())
    assert data["format"] == "ember-chat-export"
    assert [(m["role"], m["content"]) for m in data["conversations"][0]["messages"]] == \
        history[first]
    assert win2.import_chats(js) == []  # its own export: the chat is already here
    assert find(win2, QLabel, "statusMessage").full_text() == "0 chats imported, 1 already here"
    assert find(win2, QListView, "conversationList").model().rowCount() == 2
    elsewhere = tmp_path / "elsewhere"  # another computer's history
    elsewhere.mkdir()
    write_settings(elsewhere)
    win3 = make_window(qtbot, elsewhere)
    new_ids = win3.import_chats(js)
    assert len(new_ids) == 1 and win3.current_conv == new_ids[0]
    assert bodies(win3) == history[first]
    assert find(win3, QListView, "conversationList").model().rowCount() == 1


def test_view_follows_the_stream_unless_scrolled_up(qtbot, data_dir, starter_model_path):
    win = make_window(qtbot, data_dir)
    win.resize(900, 420)
    load_by_drop(qtbot, win, starter_model_path)
    view = find(win, QScrollArea, "messageList")
    # fill the view with history so that it scrolls
    cid = win.new_chat()
    for i in range(6):
        win.store.add_message(cid, "user", f"question {i}\n" * 3)
        win.store.add_message(cid, "assistant", f"answer {i}\n\n" * 4)
    win.select_conversation(cid)
    qtbot.waitUntil(lambda: view.verticalScrollBar().maximum() > 0)
    win.settings.max_new_tokens = 12
    type_and_send(qtbot, win, "Say hi")
    bar = view.verticalScrollBar()
    qtbot.waitUntil(lambda: bar.value() == bar.maximum())
    # scrolled up while a reply streams: the view stays where the user put it
    states = []
    win.reply_progress.connect(lambda _id, text: states.append(text))
    with qtbot.waitSignal(win.reply_progress, timeout=GEN_TIMEOUT_MS):
        win.send("Tell me a long story about a dragon.")
    qtbot.waitUntil(lambda: bar.value() == bar.maximum())
    bar.setValue(0)
    n_before, max_before = len(states), bar.maximum()
    with qtbot.waitSignal(win.generation_finished, timeout=GEN_TIMEOUT_MS):
        pass
    qtbot.wait(50)
    assert len(states) > n_before and bar.maximum() > max_before  # it did grow
    assert bar.value() == 0
    # back at the bottom, it follows again
    bar.setValue(bar.maximum())
    with qtbot.waitSignal(win.generation_finished, timeout=GEN_TIMEOUT_MS):
        win.continue_last()
    qtbot.waitUntil(lambda: bar.value() == bar.maximum())
