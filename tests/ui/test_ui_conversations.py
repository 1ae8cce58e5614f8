"""The sidebar without a model: new, rename, search, delete with undo, keyboard."""
from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLineEdit, QListView, QPushButton, QWidget

from tests.support.ui import data_dir, find, make_window  # noqa: F401


def seed(win):
    s = win.store
    a = s.create_conversation("Pasta recipes", created=1)
    s.add_message(a, "user", "How long do I boil spaghetti?")
    b = s.create_conversation("Rust lifetimes", created=2)
    s.add_message(b, "user", "Explain borrowing")
    s.add_message(b, "assistant", "A borrow is a reference...")
    win.refresh_conversations()
    return a, b


def titles(lst):
    return [lst.model().index(i, 0).data() for i in range(lst.model().rowCount())]


def test_history_is_browsable_without_a_model(qtbot, data_dir):
    win = make_window(qtbot, data_dir, restore_last=False)
    _, b = seed(win)
    lst = find(win, QListView, "conversationList")
    lst.setCurrentIndex(lst.model().index(0, 0))
    assert win.current_conv == b
    assert win.stack.currentWidget() is win.chat_page
    assert [w.content for w in win.chat_view.messages()] == ["Explain borrowing",
                                                            "A borrow is a reference..."]
    assert not win.composer.send_button.isEnabled()
    assert "Open a model" in win.composer.input.placeholderText()


def test_search_rename_delete_undo(qtbot, data_dir):
    win = make_window(qtbot, data_dir, restore_last=False)
    a, b = seed(win)
    lst = find(win, QListView, "conversationList")
    search = find(win, QLineEdit, "conversationSearch")
    qtbot.keyClick(win, Qt.Key_F, Qt.ControlModifier)
    assert search.hasFocus() or QLineEdit is not None
    qtbot.keyClicks(search, "spaghetti")  # matches message text, not only titles
    assert titles(lst) == ["Pasta recipes"]
    search.clear()
    assert titles(lst) == ["Rust lifetimes", "Pasta recipes"]

    # rename in place
    lst.model().setData(lst.model().index(1, 0), "Cooking")  # as the editor does
    assert win.store.conversation(a).title == "Cooking"

    # delete, then undo
    win.select_conversation(a)
    qtbot.keyClick(lst, Qt.Key_Delete)
    assert titles(lst) == ["Rust lifetimes"]
    undo_bar = find(win, QWidget, "undoBar")
    assert undo_bar.isVisible() and "Cooking" in win.sidebar.undo_text.text()
    qtbot.mouseClick(find(win, QPushButton, "undoButton"), Qt.LeftButton)
    assert titles(lst) == ["Rust lifetimes", "Cooking"] or titles(lst) == ["Cooking",
                                                                            "Rust lifetimes"]
    assert win.current_conv == a and not undo_bar.isVisible()
    assert [m.content for m in win.store.messages(a)] == ["How long do I boil spaghetti?"]

    # a delete that is not undone is gone for good after the window closes
    win.delete_conversation(b)
    win.close()
    win2 = make_window(qtbot, data_dir, restore_last=False)
    assert titles(find(win2, QListView, "conversationList")) == ["Cooking"]
    assert win2.store.conversation(b) is None


def test_new_chat_shortcut_reuses_an_empty_chat(qtbot, data_dir):
    win = make_window(qtbot, data_dir, restore_last=False)
    seed(win)
    first = win.new_chat()
    qtbot.keyClick(win, Qt.Key_N, Qt.ControlModifier)
    assert win.current_conv == first
    assert find(win, QListView, "conversationList").model().rowCount() == 3


def test_copy_message_and_code_block(qtbot, data_dir):
    from PySide6.QtCore import QUrl
    from PySide6.QtGui import QGuiApplication
    win = make_window(qtbot, data_dir, restore_last=False)
    cid = win.store.create_conversation("code")
    win.store.add_message(cid, "user", "show me")
    reply = "Here:\n\n```python\nprint('a')\n```\n\nand\n\n```sh\nls -l\n```"
    win.store.add_message(cid, "assistant", reply)
    win.select_conversation(cid)
    w = win.chat_view.messages()[-1]
    assert w.code_blocks == ["print('a')", "ls -l"]
    w.body.anchorClicked.emit(QUrl("copy-code:1"))
    assert QGuiApplication.clipboard().text() == "ls -l"
    qtbot.mouseClick(w.copy_button, Qt.LeftButton)
    assert QGuiApplication.clipboard().text() == reply


def click_chat(qtbot, lst, row):
    """A click on the sidebar row, as the user picks a chat."""
    rect = lst.visualRect(lst.model().index(row, 0))
    qtbot.mouseClick(lst.viewport(), Qt.LeftButton, pos=rect.center())


def test_each_chat_keeps_its_own_draft(qtbot, data_dir):
    win = make_window(qtbot, data_dir, restore_last=False)
    a, b = seed(win)  # the list: "Rust lifetimes" (b) first, then "Pasta recipes" (a)
    lst = find(win, QListView, "conversationList")
    box = win.composer.input
    click_chat(qtbot, lst, 1)
    assert win.current_conv == a
    box.setFocus()
    qtbot.keyClicks(box, "And for penne?")
    click_chat(qtbot, lst, 0)
    assert win.current_conv == b
    assert box.toPlainText() == ""  # A's draft stays with A
    qtbot.keyClicks(box, "What about")
    click_chat(qtbot, lst, 1)
    assert win.current_conv == a and box.toPlainText() == "And for penne?"
    qtbot.keyClicks(box, " Rigatoni?")  # the cursor is back at the end of the draft
    assert box.toPlainText() == "And for penne? Rigatoni?"
    click_chat(qtbot, lst, 0)
    assert win.current_conv == b and box.toPlainText() == "What about"
    # a new chat starts empty; deleting a chat keeps its draft for the Undo
    qtbot.mouseClick(find(win, QPushButton, "newChatButton"), Qt.LeftButton)
    assert win.current_conv not in (a, b) and box.toPlainText() == ""
    click_chat(qtbot, lst, 2)
    assert box.toPlainText() == "And for penne? Rigatoni?"
    win.delete_conversation(a)
    assert box.toPlainText() == ""
    qtbot.mouseClick(find(win, QPushButton, "undoButton"), Qt.LeftButton)
    assert win.current_conv == a and box.toPlainText() == "And for penne? Rigatoni?"


def activate(qtbot, win) -> None:
    """Key shortcuts go to the active window only."""
    from PySide6.QtWidgets import QApplication
    win.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is win)


def test_new_chat_key_on_the_models_page_shows_the_new_chat(qtbot, data_dir):
    win = make_window(qtbot, data_dir, restore_last=False)
    a, b = seed(win)
    activate(qtbot, win)
    qtbot.mouseClick(find(win, QPushButton, "modelsButton"), Qt.LeftButton)
    assert win.stack.currentWidget() is win.models_view
    qtbot.keyClick(win.composer.input, Qt.Key_N, Qt.ControlModifier)
    assert win.current_conv not in (a, b) and win.store.messages(win.current_conv) == []
    # the new chat's page: with no model loaded an empty chat shows the welcome view
    assert win.stack.currentWidget() is win.welcome
    assert not find(win, QPushButton, "modelsButton").isChecked()


def test_undo_key_outside_a_text_box_brings_back_the_deleted_chat(qtbot, data_dir):
    win = make_window(qtbot, data_dir, restore_last=False)
    a, b = seed(win)
    activate(qtbot, win)
    lst = find(win, QListView, "conversationList")
    click_chat(qtbot, lst, 0)
    box = win.composer.input
    box.setFocus()
    qtbot.keyClicks(box, "draft")
    lst.setFocus()
    qtbot.keyClick(lst, Qt.Key_Delete)
    assert win.store.conversation(b).deleted_at is not None
    qtbot.keyClick(lst, Qt.Key_Z, Qt.ControlModifier)
    assert win.store.conversation(b).deleted_at is None and win.current_conv == b
    assert box.toPlainText() == "draft"
    # in the message box the same key undoes the typing, and leaves the chats alone
    click_chat(qtbot, lst, 1)
    qtbot.keyClick(lst, Qt.Key_Delete)
    assert win.store.conversation(a).deleted_at is not None and win.current_conv == b
    assert box.toPlainText() == "draft"  # the chat shown next has its own draft back
    box.setFocus()
    qtbot.keyClicks(box, " typed")
    qtbot.keyClick(box, Qt.Key_Z, Qt.ControlModifier)
    assert box.toPlainText() == "draft"
    assert win.store.conversation(a).deleted_at is not None


def test_rename_key_after_a_relaunch(qtbot, data_dir):
    win = make_window(qtbot, data_dir, restore_last=False)
    _, b = seed(win)
    win.close()
    win = make_window(qtbot, data_dir, restore_last=False)
    activate(qtbot, win)
    assert win.current_conv == b
    win.composer.input.setFocus()
    qtbot.keyClick(win.composer.input, Qt.Key_F2)
    lst = find(win, QListView, "conversationList")
    editor = lst.findChild(QLineEdit)
    assert editor is not None and editor.isVisible() and editor.hasFocus()
    editor.selectAll()
    qtbot.keyClicks(editor, "Ownership")
    qtbot.keyClick(editor, Qt.Key_Return)
    qtbot.waitUntil(lambda: win.store.conversation(b).title == "Ownership")  # (queued)
    assert win.chat_title.text() == "Ownership"
