"""The app when its history cannot be written (here: the file turned read-only while a
reply streams): the error banner says why, the reply goes on and stays on screen in full,
what was stored before is kept, and once writing works again the next write saves it all."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QLabel, QWidget

from tests.support.ui import (  # noqa: F401
    data_dir,
    find,
    load_by_drop,
    make_window,
    type_and_send,
    write_settings,
)

pytestmark = pytest.mark.native


def test_a_reply_that_cannot_be_saved_is_kept_and_saved_later(qtbot, data_dir, starter_model_path):  # noqa: F811
    write_settings(data_dir, max_new_tokens=48)
    win = make_window(qtbot, data_dir, restore_last=False)
    load_by_drop(qtbot, win, starter_model_path)
    stored_before_fault = []

    def fault_after_first_write(reply):
        if not stored_before_fault:
            stored_before_fault.append(win.store.message(reply.msg_id).content)
            win.store.db.execute("PRAGMA query_only = 1")

    win.chat.reply_text.connect(fault_after_first_write)
    stats = type_and_send(qtbot, win, "Tell me about the sea.")
    win.chat.reply_text.disconnect(fault_after_first_write)
    msg_id, full = stats["msg_id"], stats["text"]
    assert (
        stored_before_fault and stored_before_fault[0] and len(full) > len(stored_before_fault[0])
    )

    # the banner says why; the screen has the whole reply; the file has what it had
    assert find(win, QWidget, "errorBanner").isVisible()
    text = find(win, QLabel, "errorText").text()
    assert "could not save" in text.lower() and "read-only" in text
    assert win.chat_view.widget_for(msg_id).content == full
    stored = win.store.message(msg_id)
    assert stored.content == stored_before_fault[0] and not stored.complete
    assert msg_id in win.chat.unsaved

    # writing works again: the next reply's first write saves the kept one first
    win.store.db.execute("PRAGMA query_only = 0")
    type_and_send(qtbot, win, "And about the sky?")
    saved = win.store.message(msg_id)
    assert saved.content == full and saved.complete
    assert win.chat.unsaved == {}
    assert tuple(win.store.db.execute("PRAGMA integrity_check").fetchone()) == ("ok",)
