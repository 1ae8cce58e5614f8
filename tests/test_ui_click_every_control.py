"""Every button and menu item of the main window, clicked as a person does (a mouse click
on the button, the menu opened from the menu bar and its item clicked), each checked by
what it does: a message stored and shown, a chat made, a dialog opened, a file written.
Dialogs are answered by the test (file dialogs return a path, modal ones are closed)."""
from __future__ import annotations

import json

import pytest
from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QApplication, QPushButton

from tests.test_ui_support import (  # noqa: F401
    GEN_TIMEOUT_MS,
    data_dir,
    find,
    load_by_drop,
    make_window,
    write_settings,
)

pytestmark = pytest.mark.native


def click(qtbot, button) -> None:
    assert button.isVisible() and button.isEnabled(), button.objectName()
    qtbot.mouseClick(button, Qt.LeftButton)


def type_into(qtbot, box, text) -> None:
    box.setFocus()
    qtbot.keyClicks(box, text)


def send_by_click(qtbot, win, text):
    """Types into the message box and clicks Send; returns the finished reply's stats."""
    type_into(qtbot, win.composer.input, text)
    with qtbot.waitSignal(win.generation_finished, timeout=GEN_TIMEOUT_MS) as done:
        click(qtbot, find(win, QPushButton, "sendButton"))
    return done.args[0]


def test_clicking_send_stores_and_shows_the_message(qtbot, data_dir, starter_model_path):
    win = make_window(qtbot, data_dir)
    load_by_drop(qtbot, win, starter_model_path)
    stats = send_by_click(qtbot, win, "What is the capital of France?")
    assert not win.error_banner.isVisible()
    msgs = win.store.messages(win.current_conv)
    assert [(m.role, m.complete) for m in msgs] == [("user", True), ("assistant", True)]
    assert msgs[0].content == "What is the capital of France?" and msgs[1].content
    assert [(w.role, w.content) for w in win.chat_view.messages()] == [
        (m.role, m.content) for m in msgs]
    assert stats["generated_tokens"] == msgs[1].meta["generated_tokens"] >= 1
    assert win.composer.input.toPlainText() == ""


def test_send_that_takes_stops_place_under_the_cursor_sends(qtbot, data_dir,
                                                           starter_model_path):
    """Stop is clicked, the reply ends, Send appears where Stop was: the next click there
    sends the next message."""
    write_settings(data_dir, max_new_tokens=400)
    win = make_window(qtbot, data_dir)
    load_by_drop(qtbot, win, starter_model_path)
    type_into(qtbot, win.composer.input, "Tell me a long story about a dragon.")
    stop = find(win, QPushButton, "stopButton")
    with qtbot.waitSignal(win.reply_progress, timeout=GEN_TIMEOUT_MS):
        click(qtbot, find(win, QPushButton, "sendButton"))
    where = stop.geometry().center()  # in the composer
    assert win.composer.childAt(where) is stop
    with qtbot.waitSignal(win.generation_finished, timeout=GEN_TIMEOUT_MS) as done:
        click(qtbot, stop)
    assert done.args[0]["stop_reason"] == "cancelled"
    send = find(win, QPushButton, "sendButton")
    qtbot.waitUntil(lambda: win.composer.childAt(where) is send)  # once laid out again
    win.chat.settings.max_new_tokens = 4
    type_into(qtbot, win.composer.input, "And then?")
    with qtbot.waitSignal(win.generation_finished, timeout=GEN_TIMEOUT_MS):
        qtbot.mouseClick(send, Qt.LeftButton, pos=send.mapFrom(win.composer, where))
    assert not win.error_banner.isVisible()
    assert [m.content for m in win.store.messages(win.current_conv) if m.role == "user"] == [
        "Tell me a long story about a dragon.", "And then?"]
