"""Versions instead of loss: Regenerate and Edit keep the earlier reply or question (with
the conversation that followed it), each such message shows "‹ 2/2 ›", and the arrows move
between versions; the choice is stored, and a relaunch shows the same."""
from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QPlainTextEdit, QPushButton

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


def shown(win):
    return [(w.role, w.content) for w in win.chat_view.messages()]


def version_of(w):
    return w.version_label.text() if w.version_label.isVisibleTo(w) else None


def test_regenerate_keeps_the_earlier_reply(qtbot, data_dir, starter_model_path):
    win = make_window(qtbot, data_dir)
    load_by_drop(qtbot, win, starter_model_path)
    win.settings.max_new_tokens = 6
    type_and_send(qtbot, win, "Name a fruit.")
    first = shown(win)
    assert version_of(win.chat_view.messages()[-1]) is None  # one version: no arrows
    win.settings.max_new_tokens = 3  # the new version differs (a shorter greedy reply)
    with qtbot.waitSignal(win.generation_finished, timeout=GEN_TIMEOUT_MS):
        qtbot.mouseClick(win.chat_view.messages()[-1].regenerate_button, Qt.LeftButton)
    second = shown(win)
    assert second[0] == first[0] and second[1] != first[1]
    last = win.chat_view.messages()[-1]
    assert version_of(last) == "2/2"
    assert last.version_prev.isEnabled() and not last.version_next.isEnabled()
    assert len(win.store.all_messages(win.current_conv)) == 3  # nothing was deleted
    qtbot.mouseClick(last.version_prev, Qt.LeftButton)
    assert shown(win) == first
    last = win.chat_view.messages()[-1]
    assert version_of(last) == "1/2" and not last.version_prev.isEnabled()
    # the footer and the status bar are this version's
    assert last.footer.text().startswith("6 tokens")
    qtbot.mouseClick(last.version_next, Qt.LeftButton)
    assert shown(win) == second
    assert win.chat_view.messages()[-1].footer.text().startswith("3 tokens")


def test_edit_keeps_the_earlier_question_and_what_followed(qtbot, data_dir, starter_model_path,
                                                           tmp_path):
    win = make_window(qtbot, data_dir)
    load_by_drop(qtbot, win, starter_model_path)
    type_and_send(qtbot, win, "Hello there")
    type_and_send(qtbot, win, "How are you?")
    before = shown(win)
    assert len(before) == 4
    user_w = win.chat_view.messages()[0]
    qtbot.mouseClick(user_w.edit_button, Qt.LeftButton)
    find(win, QPlainTextEdit, "messageEditor").setPlainText("Name a colour.")
    with qtbot.waitSignal(win.generation_finished, timeout=GEN_TIMEOUT_MS):
        qtbot.mouseClick(find(win, QPushButton, "saveEditButton"), Qt.LeftButton)
    after = shown(win)
    assert [r for r, _ in after] == ["user", "assistant"] and after[0][1] == "Name a colour."
    first = win.chat_view.messages()[0]
    assert version_of(first) == "2/2"
    assert version_of(win.chat_view.messages()[1]) is None  # the new reply has one version
    # back to the first version: the whole earlier conversation, as it was
    qtbot.mouseClick(first.version_prev, Qt.LeftButton)
    assert shown(win) == before
    assert version_of(win.chat_view.messages()[0]) == "1/2"
    # a reply to it continues that branch
    type_and_send(qtbot, win, "Thanks")
    assert shown(win)[:4] == before and len(shown(win)) == 6
    conv = win.current_conv
    win.close()

    # a relaunch shows the version chosen last, and the other is still there
    win2 = make_window(qtbot, data_dir)
    with qtbot.waitSignal(win2.model_loaded, timeout=LOAD_TIMEOUT_MS):
        pass
    win2.select_conversation(conv)
    assert shown(win2)[:4] == before and len(shown(win2)) == 6
    assert version_of(win2.chat_view.messages()[0]) == "1/2"
    qtbot.mouseClick(win2.chat_view.messages()[0].version_next, Qt.LeftButton)
    assert shown(win2) == after


def test_versions_cannot_change_while_a_reply_streams(qtbot, data_dir, starter_model_path):
    win = make_window(qtbot, data_dir)
    load_by_drop(qtbot, win, starter_model_path)
    type_and_send(qtbot, win, "Say hi")
    win.settings.max_new_tokens = 200
    with qtbot.waitSignal(win.reply_progress, timeout=GEN_TIMEOUT_MS):
        win.regenerate_last()
    last = win.chat_view.messages()[-1]
    assert win.generating and version_of(last) == "2/2"
    assert not last.version_prev.isEnabled()
    win.show_version(last.msg_id, -1)  # refused while generating
    assert win.chat_view.messages()[-1] is last
    with qtbot.waitSignal(win.generation_finished, timeout=GEN_TIMEOUT_MS):
        win.stop()
    assert win.chat_view.messages()[-1].version_prev.isEnabled()


def test_switching_versions_keeps_the_message_in_view(qtbot, data_dir, starter_model_path):
    """Issue 45, bug 16: ‹ on the first reply jumped to the end of a long chat."""
    from ember.storage.store import Store
    from PySide6.QtCore import QPoint

    from tests.ui.test_ui_layout import settle
    store = Store(data_dir / "history.sqlite3")
    cid = store.create_conversation(title="Versions", model_path=str(starter_model_path))
    u1 = store.add_message(cid, "user", "Tell me about the sea")
    first = store.add_message(cid, "assistant", "The first version. " + "Waves. " * 80)
    store.add_message(cid, "user", "More " * 300)
    store.add_message(cid, "assistant", "Even more. " * 600)
    second = store.add_message(cid, "assistant", "The second version. " + "Tides. " * 80,
                               parent_id=u1)
    store.add_message(cid, "user", "And more " * 300)
    store.add_message(cid, "assistant", "Yet more. " * 600)
    store.close()
    write_settings(data_dir, last_model=str(starter_model_path))
    win = make_window(qtbot, data_dir)
    with qtbot.waitSignal(win.model_loaded, timeout=LOAD_TIMEOUT_MS):
        pass
    win.resize(900, 600)
    win.select_conversation(cid)
    settle(qtbot)
    view = win.chat_view
    bar = view.verticalScrollBar()

    def offset_of(w) -> int:  # px from the view's top
        return w.mapTo(view.viewport(), QPoint(0, 0)).y()
    w = view.widget_for(second)
    bar.setValue(offset_of(w) + bar.value() - 40)  # its header near the top
    settle(qtbot)
    assert bar.maximum() > 1000 and 0 < bar.value() < bar.maximum()
    top = offset_of(w)
    qtbot.mouseClick(w.version_prev, Qt.LeftButton)
    settle(qtbot)
    shown = view.widget_for(first)
    assert shown is not None and shown.version_label.text() == "1/2"
    # the other version is where this one was, its ‹ › under the pointer, not the chat's end
    assert offset_of(shown) == top
    assert bar.value() < bar.maximum() - 500
    button = shown.version_next
    pos = button.mapTo(view.viewport(), QPoint(0, 0))
    assert view.viewport().rect().contains(pos)
