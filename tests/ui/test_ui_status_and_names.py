"""Rough edges a new user hit (issue 13, bugs 3 and 5-8), each on the real starter model:
the message box after a relaunch, a status bar per chat, one name for the model, a status
line that says what happened last, Continue's token count, and a way to open a model
after a failed load when chats exist."""
from __future__ import annotations

import json

import pytest
from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtWidgets import QLabel, QPushButton

from tests.support.ui import (  # noqa: F401
    GEN_TIMEOUT_MS,
    LOAD_TIMEOUT_MS,
    data_dir,
    find,
    load_by_drop,
    make_window,
    type_and_send,
    write_settings,
)

pytestmark = pytest.mark.native


def history_with_model(data_dir, model_path, n_chats=1):
    """A data folder as a previous session left it: chats with replies, the model to reopen."""
    from ember.storage.store import Store
    write_settings(data_dir, last_model=str(model_path), recent_models=[str(model_path)])
    store = Store(data_dir / "history.sqlite3")
    ids = []
    for i in range(n_chats):
        cid = store.create_conversation(title=f"Chat {i}", model_path=str(model_path))
        store.add_message(cid, "user", f"Question {i}")
        store.add_message(cid, "assistant", f"Answer {i}",
                          meta={"generated_tokens": 2, "stop_reason": "eog"})
        ids.append(cid)
    store.close()
    return ids


class PaintLog(QObject):
    """Records, for every paint of a text box's whole viewport, the placeholder it drew."""

    def __init__(self, edit):
        super().__init__()
        self.edit = edit
        self.full_paints: list[str] = []
        edit.viewport().installEventFilter(self)

    def eventFilter(self, obj, e):
        if e.type() == QEvent.Paint and e.rect().contains(self.edit.viewport().rect()):
            self.full_paints.append(self.edit.placeholderText())
        return False


# ---- bug 3: the message box after a relaunch ------------------------------------------------

def test_message_box_stops_saying_loading_once_the_model_is_loaded(qtbot, data_dir,
                                                                    starter_model_path,
                                                                    monkeypatch):
    import threading

    from ember.chat import ChatTemplate
    history_with_model(data_dir, starter_model_path)
    # the load finishes only when the test says so: the user clicks into the message box
    # while the model loads (so no focus change repaints the box when the load ends)
    release = threading.Event()
    real = ChatTemplate.from_metadata

    def held(*a, **k):
        release.wait(60)
        return real(*a, **k)

    monkeypatch.setattr(ChatTemplate, "from_metadata", held)
    win = make_window(qtbot, data_dir)
    inp = win.composer.input
    paints = PaintLog(inp)
    assert win.loading and inp.placeholderText() == "Loading the model…"
    qtbot.mouseClick(inp.viewport(), Qt.LeftButton)
    qtbot.waitUntil(lambda: inp.hasFocus() and bool(paints.full_paints)
                    and paints.full_paints[-1] == "Loading the model…")
    qtbot.wait(100)
    with qtbot.waitSignal(win.model_loaded, timeout=LOAD_TIMEOUT_MS):
        release.set()
    assert win.composer.send_button.isEnabled()
    assert inp.placeholderText() == "Message Ember…"
    # what is on screen is the new text: the empty box was repainted whole with it
    qtbot.waitUntil(lambda: paints.full_paints[-1] == "Message Ember…", timeout=3000)


# ---- bug 5: the status bar belongs to the chat on screen --------------------------------------

def status(win):
    return (find(win, QLabel, "statusTokensPerSecond").text(),
            find(win, QLabel, "statusContext").text())


def test_status_bar_shows_the_chat_on_screen(qtbot, data_dir, starter_model_path):
    win = make_window(qtbot, data_dir)
    load_by_drop(qtbot, win, starter_model_path)
    stats = type_and_send(qtbot, win, "Tell me about the sea, the sky, the mountains and "
                                      "the rivers of the world, in detail.")
    first = win.current_conv
    first_status = status(win)
    assert first_status[1] == f"context {stats['n_past']:,} / 512"
    win.new_chat()
    # an empty chat uses no context and has no speeds yet
    assert status(win) == ("— t/s", "context 0 / 512")
    type_and_send(qtbot, win, "Hi")
    second_status = status(win)
    assert second_status[1] != first_status[1]
    win.select_conversation(first)
    assert status(win) == first_status
    # a relaunch shows each chat's numbers from the store
    win.close()
    win2 = make_window(qtbot, data_dir)
    with qtbot.waitSignal(win2.model_loaded, timeout=LOAD_TIMEOUT_MS):
        pass
    win2.select_conversation(first)
    assert status(win2)[1] == first_status[1]


def test_regenerate_does_not_report_a_prompt_speed_for_a_cached_prompt(qtbot, data_dir,
                                                                      starter_model_path):
    win = make_window(qtbot, data_dir)
    load_by_drop(qtbot, win, starter_model_path)
    stats = type_and_send(qtbot, win, "Name three colours of the rainbow, please.")
    assert stats["prompt_evaluated"] == stats["prompt_tokens"] > 16
    assert status(win)[0].startswith("prompt ") and "cached" not in status(win)[0]
    with qtbot.waitSignal(win.generation_finished, timeout=GEN_TIMEOUT_MS) as blocker:
        win.regenerate_last()
    stats = blocker.args[0]
    # the prompt was in the KV cache: one token evaluated, which is no prompt speed
    assert stats["prompt_evaluated"] <= 1
    tps = status(win)[0]
    assert tps.startswith("prompt cached · generation ") and tps.endswith(" t/s"), tps
    meta = win.store.messages(win.current_conv)[-1].meta
    assert meta["prompt_tps"] is None and meta["gen_tps"] > 0


# ---- bug 6: one name for the model ---------------------------------------------------------

@pytest.mark.parametrize(("file", "name"), [
    ("SmolLM2-135M-Instruct.Q4_1.gguf", "SmolLM2-135M-Instruct"),
    ("gemma-3-270m-q4_k_m.gguf", "gemma-3-270m"),
    ("Llama-3.2-1B-Instruct-IQ3_XXS.gguf", "Llama-3.2-1B-Instruct"),
    ("phi-4-BF16.gguf", "phi-4"),
    ("ember-synth-qwen3.gguf", "ember-synth-qwen3"),
    ("Q8_0.gguf", "Q8_0"),
    ("/models/My Model v2.gguf", "My Model v2"),
])
def test_display_name_is_the_file_name_without_the_quantization(file, name):
    from ember.model_card import display_name
    assert display_name(file) == name


def test_the_model_has_one_name(qtbot, data_dir, starter_model_path):
    from ember.model_card import display_name
    name = display_name(starter_model_path)
    assert name == "SmolLM2-135M-Instruct"
    history_with_model(data_dir, starter_model_path)
    win = make_window(qtbot, data_dir)
    assert win.loading
    # drawn before the load finished: already the model's name, not "Assistant"
    assert [w.role_label.text() for w in win.chat_view.messages()] == ["You", name]
    with qtbot.waitSignal(win.model_loaded, timeout=LOAD_TIMEOUT_MS):
        pass
    type_and_send(qtbot, win, "Hello")
    assert [w.role_label.text() for w in win.chat_view.messages()] == ["You", name, "You", name]
    assert find(win, QLabel, "modelName").text() == name
    assert win.windowTitle() == f"{name} — Ember"  # the app named once, last (as Qt adds it)
    assert win.store.messages(win.current_conv)[-1].meta["model"] == name


# ---- bug 7: the status line and Continue's count ---------------------------------------------

def test_a_failed_import_replaces_the_last_import_message(qtbot, data_dir, tmp_path):
    win = make_window(qtbot, data_dir)
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"format": "ember-chat-export", "version": 1, "conversations": [
        {"title": "Old chat", "messages": [{"role": "user", "content": "hi"}]}]}))
    bad = tmp_path / "bad.json"
    bad.write_text("{ not json")
    assert len(win.import_chats(good)) == 1
    assert find(win, QLabel, "statusMessage").full_text() == "1 chat imported"
    assert win.import_chats(bad) == []
    assert win.error_banner.isVisible()
    assert "imported" not in find(win, QLabel, "statusMessage").full_text()


def test_continue_counts_the_whole_reply(qtbot, data_dir, starter_model_path):
    win = make_window(qtbot, data_dir)
    load_by_drop(qtbot, win, starter_model_path)
    type_and_send(qtbot, win, "Tell me a long story about a dragon.")  # 6 tokens
    with qtbot.waitSignal(win.generation_finished, timeout=GEN_TIMEOUT_MS) as blocker:
        win.continue_last()
    assert blocker.args[0]["generated_tokens"] == 6  # this run
    msg = win.store.messages(win.current_conv)[-1]
    assert msg.meta["generated_tokens"] == 12
    assert win.chat_view.messages()[-1].footer.text().startswith("12 tokens")


# ---- bug 8: a way to open a model after a failed load -----------------------------------------

def test_after_a_failed_load_with_chats_the_window_offers_to_open_a_model(
        qtbot, data_dir, starter_model_path, tmp_path, monkeypatch):
    broken = tmp_path / "broken.gguf"
    broken.write_text("not a model")
    history_with_model(data_dir, broken)
    win = make_window(qtbot, data_dir)
    qtbot.waitUntil(lambda: not win.loading, timeout=LOAD_TIMEOUT_MS)
    assert win.model is None and win.error_banner.isVisible()
    assert win.stack.currentWidget() is win.chat_page  # the chats are there
    visible = [b for b in win.findChildren(QPushButton) if b.isVisible() and b.isEnabled()
               and "open" in b.text().lower() and "model" in b.text().lower()]
    assert visible, "no visible button opens a model"
    from PySide6.QtWidgets import QFileDialog
    monkeypatch.setattr(QFileDialog, "getOpenFileName",
                        lambda *a, **k: (str(starter_model_path), ""))
    with qtbot.waitSignal(win.model_loaded, timeout=LOAD_TIMEOUT_MS):
        qtbot.mouseClick(visible[0], Qt.LeftButton)
    assert not win.no_model_bar.isVisible()
    type_and_send(qtbot, win, "Hi")
