"""A model per chat: the chat remembers the model it was written with, and opening it while
another model is loaded offers that one (one click loads it)."""
from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QToolButton

from tests.support.ui import (  # noqa: F401
    LOAD_TIMEOUT_MS,
    data_dir,
    find,
    load_by_drop,
    make_window,
    type_and_send,
)

pytestmark = pytest.mark.native


def click_chat(qtbot, win, conv_id: int) -> None:
    """A click on the chat's row in the sidebar."""
    lst = win.sidebar.list
    qtbot.mouseClick(lst.viewport(), Qt.LeftButton,
                     pos=lst.visualRect(win.sidebar.index_for(conv_id)).center())
    assert win.current_conv == conv_id


def test_a_chat_offers_to_load_the_model_it_was_written_with(qtbot, data_dir, tmp_path,
                                                             starter_model_path):
    other = tmp_path / "Other-Model.Q4_1.gguf"
    other.symlink_to(starter_model_path)
    win = make_window(qtbot, data_dir, restore_last=False)
    bar = win.chat_model_bar
    load_by_drop(qtbot, win, starter_model_path)
    first = win.new_chat()
    type_and_send(qtbot, win, "Hello")
    assert win.store.conversation(first).model_path == str(starter_model_path)

    load_by_drop(qtbot, win, other, target=win)
    assert bar.isHidden()  # the user just chose it: no offer for the chat on screen
    second = win.new_chat()
    type_and_send(qtbot, win, "Hello again")
    assert win.store.conversation(second).model_path == str(other)

    # opening the first chat offers its own model
    click_chat(qtbot, win, first)
    assert bar.isVisible()
    assert bar.text.text() == ("This chat was written with SmolLM2-135M-Instruct; "
                               "Other-Model is loaded now.")
    assert bar.load_button.text() == "Load SmolLM2-135M-Instruct"
    with qtbot.waitSignal(win.model_loaded, timeout=LOAD_TIMEOUT_MS) as loaded:
        qtbot.mouseClick(bar.load_button, Qt.LeftButton)
    assert loaded.args == [str(starter_model_path)]
    assert win.model_info["path"] == str(starter_model_path) and bar.isHidden()

    # the second chat offers Other-Model; closing the offer keeps it closed for that chat
    click_chat(qtbot, win, second)
    assert bar.isVisible() and bar.load_button.text() == "Load Other-Model"
    qtbot.mouseClick(find(bar, QToolButton, "chatModelDismiss"), Qt.LeftButton)
    assert bar.isHidden()
    click_chat(qtbot, win, first)
    click_chat(qtbot, win, second)
    assert bar.isHidden()
    # going on in it with the model loaded now makes that the chat's model
    type_and_send(qtbot, win, "And now?")
    assert win.store.conversation(second).model_path == str(starter_model_path)
