"""Another chat while one generates: Send in a second chat queues its reply behind the
running one (its place shown in the chat and the sidebar), and the queue runs in order.
The first reply is held after its first token by a gate, so the test does not depend on
the machine's speed; the replies themselves come from the real engine."""
from __future__ import annotations

import threading

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QPushButton

from tests.support.ui import GEN_TIMEOUT_MS, data_dir, find, load_by_drop, make_window  # noqa: F401

pytestmark = pytest.mark.native


def hold_after_first_token(win) -> threading.Event:
    gate = threading.Event()
    real = win.session.generate

    def generate(*a, **kw):
        it = real(*a, **kw)
        try:
            for i, piece in enumerate(it):
                yield piece
                if i == 0:
                    gate.wait(120)  # a safety net for a broken test, not a time limit
        finally:
            it.close()

    win.session.generate = generate
    return gate


def send(qtbot, win, text):
    inp = win.composer.input
    inp.setFocus()
    inp.setPlainText(text)
    qtbot.keyClick(inp, Qt.Key_Return)


def badge(win, conv_id):
    from ember.ui.conversation_model import BADGE_ROLE
    return win.sidebar.index_for(conv_id).data(BADGE_ROLE)


@pytest.fixture
def win(qtbot, data_dir, starter_model_path):
    w = make_window(qtbot, data_dir)
    load_by_drop(qtbot, w, starter_model_path)
    yield w


def test_send_in_other_chats_queues_behind_the_running_reply(qtbot, win):
    gate = hold_after_first_token(win)
    finished = []
    win.generation_finished.connect(lambda st: finished.append(st["conv_id"]))
    a = win.new_chat()
    send(qtbot, win, "Hello")
    qtbot.waitUntil(lambda: win.chat.reply is not None and win.chat.reply.first is not None,
                    timeout=GEN_TIMEOUT_MS)
    b = win.new_chat()
    assert b != a
    assert win.composer.send_button.isVisible() and win.composer.send_button.isEnabled()
    assert not win.composer.stop_button.isVisible()
    send(qtbot, win, "What is two plus two?")
    assert [(m.role, m.content) for m in win.store.messages(b)] == [
        ("user", "What is two plus two?")]
    bar = find(win, QLabel, "queueText")
    assert bar.isVisible()
    assert bar.text().startswith("Queued (1 in line): the reply starts when the one in "
                                 "“Hello” finishes")
    c = win.new_chat()
    send(qtbot, win, "Name a colour.")
    assert bar.text().startswith("Queued (2 in line)")
    assert bar.text().endswith("after 1 other chat.")
    assert (badge(win, a), badge(win, b), badge(win, c)) == ("replying", "queued 1", "queued 2")
    # the running chat shows Stop, not the queue
    win.select_conversation(a)
    assert not bar.isVisibleTo(win) and win.composer.stop_button.isVisible()
    win.select_conversation(b)
    assert bar.isVisibleTo(win)
    gate.set()
    qtbot.waitUntil(lambda: len(finished) == 3 and not win.generating, timeout=GEN_TIMEOUT_MS)
    assert finished == [a, b, c]
    for cid in (a, b, c):
        msgs = win.store.messages(cid)
        assert [m.role for m in msgs] == ["user", "assistant"]
        assert msgs[1].complete and msgs[1].content.strip()
        assert msgs[1].meta["generated_tokens"] >= 1
    # b is on screen: its reply arrived there while it was shown
    assert [w.role for w in win.chat_view.messages()] == ["user", "assistant"]
    assert win.chat_view.messages()[1].content == win.store.messages(b)[1].content
    assert not bar.isVisibleTo(win)
    assert (badge(win, a), badge(win, b), badge(win, c)) == ("", "", "")


def test_cancel_takes_a_chat_out_of_the_queue(qtbot, win):
    gate = hold_after_first_token(win)
    win.new_chat()
    send(qtbot, win, "Hello")
    qtbot.waitUntil(lambda: win.chat.reply is not None and win.chat.reply.first is not None,
                    timeout=GEN_TIMEOUT_MS)
    b = win.new_chat()
    send(qtbot, win, "Are you there?")
    assert badge(win, b) == "queued 1"
    qtbot.mouseClick(find(win, QPushButton, "queueCancelButton"), Qt.LeftButton)
    assert badge(win, b) == "" and not find(win, QLabel, "queueText").isVisibleTo(win)
    with qtbot.waitSignal(win.generation_finished, timeout=GEN_TIMEOUT_MS):
        gate.set()
    assert not win.generating
    assert [m.role for m in win.store.messages(b)] == ["user"]  # kept, not answered


def test_escape_in_a_queued_chat_does_not_stop_the_running_reply(qtbot, win):
    gate = hold_after_first_token(win)
    a = win.new_chat()
    send(qtbot, win, "Hello")
    qtbot.waitUntil(lambda: win.chat.reply is not None and win.chat.reply.first is not None,
                    timeout=GEN_TIMEOUT_MS)
    win.new_chat()
    send(qtbot, win, "Hi")
    qtbot.keyClick(win.composer.input, Qt.Key_Escape)
    with qtbot.waitSignal(win.generation_finished, timeout=GEN_TIMEOUT_MS) as first:
        gate.set()
    assert first.args[0]["conv_id"] == a
    assert first.args[0]["stop_reason"] != "cancelled"
    assert win.store.messages(a)[1].meta["stop_reason"] != "cancelled"


def test_a_deleted_chat_leaves_the_queue(qtbot, win):
    gate = hold_after_first_token(win)
    finished = []
    win.generation_finished.connect(lambda st: finished.append(st["conv_id"]))
    a = win.new_chat()
    send(qtbot, win, "Hello")
    qtbot.waitUntil(lambda: win.chat.reply is not None and win.chat.reply.first is not None,
                    timeout=GEN_TIMEOUT_MS)
    b = win.new_chat()
    send(qtbot, win, "Hi")
    win.delete_conversation(b)
    assert win.chat.queue == []
    with qtbot.waitSignal(win.generation_finished, timeout=GEN_TIMEOUT_MS):
        gate.set()
    assert finished == [a] and not win.generating
