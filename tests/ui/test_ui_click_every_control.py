"""Every button and menu item of the main window, clicked as a person does (a mouse click
on the button, the menu opened from the menu bar and its item clicked), each checked by
what it does: a message stored and shown, a chat made, a dialog opened, a file written.
Dialogs are answered by the test (file dialogs return a path, modal ones are closed)."""
from __future__ import annotations

import datetime
import json

import pytest
from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QApplication,
    QDialogButtonBox,
    QFileDialog,
    QLabel,
    QLineEdit,
    QListView,
    QMessageBox,
    QPlainTextEdit,
    QPushButton,
    QToolButton,
)

from tests.support.ui import (  # noqa: F401
    GEN_TIMEOUT_MS,
    LOAD_TIMEOUT_MS,
    data_dir,
    find,
    load_by_drop,
    make_window,
    write_settings,
)

pytestmark = pytest.mark.native


def click(qtbot, button) -> None:
    # a widget added to a shown window is shown at the next turn of the event loop
    qtbot.waitUntil(lambda: button.isVisible() and button.isEnabled())
    qtbot.mouseClick(button, Qt.LeftButton)


def type_into(qtbot, box, text) -> None:
    box.setFocus()
    qtbot.keyClicks(box, text)


def menu_item(win, menu: str, item: str):
    top = next(a for a in win.menuBar().actions() if a.text().replace("&", "") == menu)
    found = [a for a in top.menu().actions() if a.text() == item]
    assert len(found) == 1, f"{menu} > {item}: {[a.text() for a in top.menu().actions()]}"
    return top, found[0]


def click_menu(qtbot, win, menu: str, item: str) -> None:
    """Opens the menu from the menu bar with a click and clicks the item in it."""
    top, action = menu_item(win, menu, item)
    assert action.isEnabled(), f"{menu} > {item} is off"
    bar, popup = win.menuBar(), top.menu()
    qtbot.mouseClick(bar, Qt.LeftButton, pos=bar.actionGeometry(top).center())
    qtbot.waitUntil(popup.isVisible)
    qtbot.mouseClick(popup, Qt.LeftButton, pos=popup.actionGeometry(action).center())
    qtbot.waitUntil(lambda: not popup.isVisible())


def answer_modal(answer) -> list:
    """Calls answer(dialog) on the next modal dialog, once it is open (the click that
    opens it returns only when it closes); returns the dialogs seen."""
    seen: list = []

    def poll(tries: int = 3000) -> None:  # a minute at most: a hang guard
        modal = QApplication.activeModalWidget()
        if modal is None:
            if tries:
                QTimer.singleShot(20, lambda: poll(tries - 1))
            return
        seen.append(modal)
        answer(modal)

    QTimer.singleShot(0, poll)
    return seen


class FileDialogs:
    """QFileDialog's static methods answering with paths set by the test, recording what
    they were asked (title, suggested path)."""

    def __init__(self, monkeypatch):
        self.open_path = ""
        self.save_path = ""
        self.asked: list[tuple[str, str, str]] = []
        monkeypatch.setattr(QFileDialog, "getOpenFileName", self._open)
        monkeypatch.setattr(QFileDialog, "getSaveFileName", self._save)

    def _open(self, parent, title, start="", filters="", **_options):
        self.asked.append(("open", title, start))
        return self.open_path, filters

    def _save(self, parent, title, suggested="", filters="", **_options):
        self.asked.append(("save", title, suggested))
        return self.save_path, filters


def click_chat(qtbot, win, row: int) -> None:
    lst = find(win, QListView, "conversationList")
    qtbot.mouseClick(lst.viewport(), Qt.LeftButton,
                     pos=lst.visualRect(lst.model().index(row, 0)).center())


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


def test_file_menu(qtbot, data_dir, starter_model_path, tmp_path, monkeypatch):
    files = FileDialogs(monkeypatch)
    win = make_window(qtbot, data_dir, restore_last=False)
    files.open_path = str(starter_model_path)
    with qtbot.waitSignal(win.model_loaded, timeout=LOAD_TIMEOUT_MS) as loaded:
        click_menu(qtbot, win, "File", "Open model…")
    assert files.asked[-1][:2] == ("open", "Open a model")
    assert loaded.args[0] == str(starter_model_path) and win.model is not None
    assert win.stack.currentWidget() is win.chat_page
    send_by_click(qtbot, win, "Name a colour.")
    first = win.current_conv

    click_menu(qtbot, win, "File", "New chat")
    assert win.current_conv not in (None, first)
    assert win.chat_view.messages() == [] and win.chat_title.text() == "New chat"
    assert find(win, QListView, "conversationList").model().rowCount() == 2

    click_chat(qtbot, win, 1)
    assert win.current_conv == first
    files.save_path = str(tmp_path / "one.md")
    click_menu(qtbot, win, "File", "Export chat as Markdown…")
    assert files.asked[-1][2].endswith("Name a colour_.md")  # the chat's title suggested
    md = (tmp_path / "one.md").read_text(encoding="utf-8")
    assert "Name a colour." in md and win.store.messages(first)[1].content in md
    files.save_path = str(tmp_path / "one.json")
    click_menu(qtbot, win, "File", "Export chat as JSON…")
    one = json.loads((tmp_path / "one.json").read_text(encoding="utf-8"))
    assert [c["title"] for c in one["conversations"]] == ["Name a colour."]
    files.save_path = str(tmp_path / "all.json")
    click_menu(qtbot, win, "File", "Export all chats…")
    today = datetime.date.today().isoformat()
    assert files.asked[-1][2].endswith(f"Ember chats {today}.json")  # not this chat's name
    every = json.loads((tmp_path / "all.json").read_text(encoding="utf-8"))
    assert len(every["conversations"]) == len(win.store.conversations()) == 2

    # importing the chat's own export again adds nothing (the import is idempotent)...
    files.open_path = str(tmp_path / "one.json")
    click_menu(qtbot, win, "File", "Import chats…")
    assert len(win.store.conversations()) == 2
    assert find(win, QLabel, "statusMessage").full_text() == "0 chats imported, 1 already here"
    # ...and an export of another chat (started at another time) is imported and shown
    one["conversations"][0]["created"] -= 3600
    (tmp_path / "other.json").write_text(json.dumps(one), encoding="utf-8")
    files.open_path = str(tmp_path / "other.json")
    click_menu(qtbot, win, "File", "Import chats…")
    assert len(win.store.conversations()) == 3
    assert win.current_conv not in (first, None)
    assert [m.content for m in win.store.messages(win.current_conv)] == [
        m.content for m in win.store.messages(first)]

    click_menu(qtbot, win, "File", "Models")
    assert win.stack.currentWidget() is win.models_view
    assert win.models_view.isVisible() and win.sidebar.models_button.isChecked()
    click(qtbot, find(win, QPushButton, "modelsBackButton"))
    assert win.stack.currentWidget() is win.chat_page

    def add_a_bad_address(dialog):
        qtbot.keyClicks(dialog.findChild(QLineEdit, "endpointUrl"), "localhost:8080")
        box = dialog.findChild(QDialogButtonBox)
        qtbot.mouseClick(box.button(QDialogButtonBox.Ok), Qt.LeftButton)

    seen = answer_modal(add_a_bad_address)
    click_menu(qtbot, win, "File", "Add an OpenAI-compatible endpoint…")
    assert [type(d).__name__ for d in seen] == ["EndpointDialog"]
    assert win.error_banner.isVisible()
    assert win.error_banner.plain.startswith("That is not an endpoint address")
    click(qtbot, find(win, QToolButton, "errorBannerClose"))
    assert not win.error_banner.isVisible()

    before = win.settings
    seen = answer_modal(lambda dialog: dialog.reject())
    click_menu(qtbot, win, "File", "Settings…")
    assert [type(d).__name__ for d in seen] == ["SettingsDialog"]
    assert win.settings is before  # cancelled: nothing applied

    click_menu(qtbot, win, "File", "Quit")
    qtbot.waitUntil(lambda: not win.isVisible())
    assert win.store.db is None  # closed as at quit: the history is written and shut


def test_edit_menu_acts_on_the_focused_text_box(qtbot, data_dir, starter_model_path):
    win = make_window(qtbot, data_dir)
    load_by_drop(qtbot, win, starter_model_path)
    clipboard = QGuiApplication.clipboard()
    box = win.composer.input
    type_into(qtbot, box, "hello world")
    click_menu(qtbot, win, "Edit", "Select All")
    assert box.textCursor().selectedText() == "hello world"
    click_menu(qtbot, win, "Edit", "Cut")
    assert box.toPlainText() == "" and clipboard.text() == "hello world"
    click_menu(qtbot, win, "Edit", "Undo")
    assert box.toPlainText() == "hello world"
    click_menu(qtbot, win, "Edit", "Redo")
    assert box.toPlainText() == ""
    click_menu(qtbot, win, "Edit", "Paste")
    click_menu(qtbot, win, "Edit", "Paste")
    assert box.toPlainText() == "hello worldhello world"
    search = find(win, QLineEdit, "conversationSearch")
    type_into(qtbot, search, "nothing like this")
    click_menu(qtbot, win, "Edit", "Select All")
    click_menu(qtbot, win, "Edit", "Copy")
    assert clipboard.text() == "nothing like this"
    assert box.toPlainText() == "hello worldhello world"  # the box without the focus: as it was
    search.clear()
    click_menu(qtbot, win, "Edit", "Find chat")
    assert search.hasFocus()


def test_chat_menu(qtbot, data_dir, starter_model_path):
    win = make_window(qtbot, data_dir)
    load_by_drop(qtbot, win, starter_model_path)
    send_by_click(qtbot, win, "Say something.")
    conv = win.current_conv
    first_reply = win.store.messages(conv)[1]

    with qtbot.waitSignal(win.generation_finished, timeout=GEN_TIMEOUT_MS):
        click_menu(qtbot, win, "Chat", "Regenerate reply")
    reply = win.store.messages(conv)[1]
    assert reply.id != first_reply.id and win.store.versions(reply.id) == [first_reply.id,
                                                                          reply.id]
    assert win.chat_view.messages()[-1].version_label.text() == "2/2"

    with qtbot.waitSignal(win.generation_finished, timeout=GEN_TIMEOUT_MS):
        click_menu(qtbot, win, "Chat", "Continue reply")
    longer = win.store.messages(conv)[1]
    assert longer.id == reply.id and longer.content.startswith(reply.content)
    assert longer.meta["generated_tokens"] > reply.meta["generated_tokens"]

    win.chat.settings.max_new_tokens = 400
    type_into(qtbot, win.composer.input, "Tell me a long story.")
    with qtbot.waitSignal(win.reply_progress, timeout=GEN_TIMEOUT_MS):
        click(qtbot, find(win, QPushButton, "sendButton"))
    with qtbot.waitSignal(win.generation_finished, timeout=GEN_TIMEOUT_MS) as done:
        click_menu(qtbot, win, "Chat", "Stop")
    assert done.args[0]["stop_reason"] == "cancelled"
    assert win.store.messages(conv)[-1].meta["stop_reason"] == "cancelled"

    lst = find(win, QListView, "conversationList")
    click_menu(qtbot, win, "Chat", "Rename chat")
    editor = lst.findChild(QLineEdit)
    assert editor is not None and editor.isVisible()
    editor.selectAll()
    qtbot.keyClicks(editor, "Stories")
    qtbot.keyClick(editor, Qt.Key_Return)
    qtbot.waitUntil(lambda: win.store.conversation(conv).title == "Stories")  # (queued)
    assert win.chat_title.text() == "Stories"

    click_menu(qtbot, win, "Chat", "Delete chat")
    assert win.store.conversation(conv).deleted_at is not None
    assert not lst.isVisible()  # the only chat: the list gives way to "Your chats..."
    assert "Stories" in win.sidebar.undo_text.text()
    lst.setFocus()  # no text box to undo in: Edit > Undo brings the chat back
    click_menu(qtbot, win, "Edit", "Undo")
    assert win.store.conversation(conv).deleted_at is None and win.current_conv == conv
    click_menu(qtbot, win, "Chat", "Delete chat")
    assert win.store.conversation(conv).deleted_at is not None
    click(qtbot, find(win, QPushButton, "undoButton"))
    assert win.store.conversation(conv).deleted_at is None and win.current_conv == conv


def test_help_menu(qtbot, data_dir, monkeypatch):
    shown = []
    monkeypatch.setattr(QMessageBox, "information",
                        lambda parent, title, text, *a: shown.append((title, text)))
    monkeypatch.setattr(QMessageBox, "about", lambda parent, title, text: shown.append(
        (title, text)))
    win = make_window(qtbot, data_dir, restore_last=False)
    click_menu(qtbot, win, "Help", "Log file…")
    assert shown[-1][0] == "Log file" and str(win.log_path) in shown[-1][1]
    click_menu(qtbot, win, "Help", "About Ember")
    from ember import __version__
    assert shown[-1][0] == "About Ember" and f"Ember {__version__}" in shown[-1][1]
    assert str(win.data_dir) in shown[-1][1]


def test_welcome_and_no_model_buttons(qtbot, data_dir, starter_model_path, monkeypatch):
    from ember import starter
    files = FileDialogs(monkeypatch)
    models = data_dir / "models"
    models.mkdir()
    installed = models / starter.FILENAME  # "Use the starter model" opens it, no download
    installed.symlink_to(starter_model_path)
    write_settings(data_dir, recent_models=[str(starter_model_path)])

    def loads(win, button, want):
        with qtbot.waitSignal(win.model_loaded, timeout=LOAD_TIMEOUT_MS) as loaded:
            button()
        assert loaded.args[0] == str(want) and win.model_info["path"] == str(want)
        win.close()

    win = make_window(qtbot, data_dir, restore_last=False)
    assert win.stack.currentWidget() is win.welcome
    recent = win.welcome.recent
    qtbot.waitUntil(recent.isVisible)
    rect = recent.visualItemRect(recent.item(0))

    def double_click():
        # (QTest's double click alone has no press before it: the view would not act)
        qtbot.mouseClick(recent.viewport(), Qt.LeftButton, pos=rect.center())
        qtbot.mouseDClick(recent.viewport(), Qt.LeftButton, pos=rect.center())

    loads(win, double_click, starter_model_path)
    files.open_path = str(starter_model_path)
    win = make_window(qtbot, data_dir, restore_last=False)
    loads(win, lambda: click(qtbot, find(win, QPushButton, "openModelButton")),
          starter_model_path)
    assert files.asked[-1][:2] == ("open", "Open a model")
    win = make_window(qtbot, data_dir, restore_last=False)
    loads(win, lambda: click(qtbot, find(win, QPushButton, "starterModelButton")), installed)

    # a chat with messages and no model: the bar above the message box offers both
    from ember.storage.store import Store
    store = Store(data_dir / "history.sqlite3")
    store.add_message(store.create_conversation("Earlier"), "user", "hello")
    store.close()
    win = make_window(qtbot, data_dir, restore_last=False)
    assert win.stack.currentWidget() is win.chat_page and win.model is None
    loads(win, lambda: click(qtbot, find(win, QPushButton, "noModelOpenButton")),
          starter_model_path)
    win = make_window(qtbot, data_dir, restore_last=False)
    loads(win, lambda: click(qtbot, find(win, QPushButton, "noModelStarterButton")), installed)


def test_chat_buttons(qtbot, data_dir, starter_model_path, monkeypatch):
    files = FileDialogs(monkeypatch)
    win = make_window(qtbot, data_dir)
    load_by_drop(qtbot, win, starter_model_path)
    system_button = find(win, QToolButton, "systemPromptButton")
    system = find(win, QPlainTextEdit, "systemPromptEdit")
    click(qtbot, system_button)
    assert system.isVisible()
    click(qtbot, system_button)
    assert not system.isVisible()

    send_by_click(qtbot, win, "Tell me about the sea.")
    conv = win.current_conv
    user_w, reply_w = win.chat_view.messages()
    click(qtbot, user_w.copy_button)
    assert QGuiApplication.clipboard().text() == "Tell me about the sea."

    first = win.store.messages(conv)[1]
    with qtbot.waitSignal(win.generation_finished, timeout=GEN_TIMEOUT_MS):
        click(qtbot, reply_w.regenerate_button)
    second = win.store.messages(conv)[1]
    assert win.store.versions(second.id) == [first.id, second.id]
    reply_w = win.chat_view.messages()[1]
    assert reply_w.version_label.text() == "2/2"
    click(qtbot, reply_w.version_prev)
    reply_w = win.chat_view.messages()[1]
    assert (reply_w.msg_id, reply_w.version_label.text()) == (first.id, "1/2")
    assert win.store.messages(conv)[1].id == first.id
    click(qtbot, reply_w.version_next)
    reply_w = win.chat_view.messages()[1]
    assert (reply_w.msg_id, reply_w.version_label.text()) == (second.id, "2/2")

    with qtbot.waitSignal(win.generation_finished, timeout=GEN_TIMEOUT_MS):
        click(qtbot, reply_w.continue_button)
    longer = win.store.messages(conv)[1]
    assert longer.id == second.id and longer.content.startswith(second.content)
    assert longer.meta["generated_tokens"] > second.meta["generated_tokens"]

    user_w = win.chat_view.messages()[0]
    click(qtbot, user_w.edit_button)
    click(qtbot, user_w.findChild(QPushButton, "cancelEditButton"))
    qtbot.waitUntil(lambda: user_w.editor is None)
    assert win.store.messages(conv)[0].content == "Tell me about the sea."
    click(qtbot, user_w.edit_button)
    editor = user_w.editor
    editor.selectAll()
    qtbot.keyClicks(editor, "Tell me about rivers.")
    with qtbot.waitSignal(win.generation_finished, timeout=GEN_TIMEOUT_MS):
        click(qtbot, user_w.findChild(QPushButton, "saveEditButton"))
    msgs = win.store.messages(conv)
    assert [m.role for m in msgs] == ["user", "assistant"] and msgs[0].content == "Tell me about rivers."
    assert len(win.store.versions(msgs[0].id)) == 2
    assert win.chat_view.messages()[0].version_label.text() == "2/2"

    # the sidebar: New chat, search, Models and back
    click(qtbot, find(win, QPushButton, "newChatButton"))
    new = win.current_conv
    assert new != conv and win.store.messages(new) == []
    lst = find(win, QListView, "conversationList")
    assert lst.model().rowCount() == 2
    search = find(win, QLineEdit, "conversationSearch")
    type_into(qtbot, search, "rivers")  # in a message, not in the title
    assert [lst.model().index(i, 0).data() for i in range(lst.model().rowCount())] == [
        "Tell me about the sea."]
    search.clear()
    click(qtbot, find(win, QPushButton, "modelsButton"))
    assert win.stack.currentWidget() is win.models_view
    click(qtbot, find(win, QPushButton, "modelsBackButton"))
    assert win.stack.currentWidget() is win.chat_page

    # the model card: Open another model…
    files.open_path = str(starter_model_path)
    with qtbot.waitSignal(win.model_loaded, timeout=LOAD_TIMEOUT_MS):
        click(qtbot, find(win, QPushButton, "changeModelButton"))
    assert files.asked[-1][:2] == ("open", "Open a model")

    # the queue bar's Cancel: a chat waiting behind a long reply in another
    win.chat.settings.max_new_tokens = 400
    click_chat(qtbot, win, 1)
    assert win.current_conv == conv
    type_into(qtbot, win.composer.input, "Tell me a long story.")
    with qtbot.waitSignal(win.reply_progress, timeout=GEN_TIMEOUT_MS):
        click(qtbot, find(win, QPushButton, "sendButton"))
    click_chat(qtbot, win, 1)  # the new chat, now second in the list
    assert win.current_conv == new
    type_into(qtbot, win.composer.input, "Meanwhile, hi.")
    click(qtbot, find(win, QPushButton, "sendButton"))
    assert win.chat.queue == [new] and win.queue_bar.isVisible()
    click(qtbot, find(win, QPushButton, "queueCancelButton"))
    assert win.chat.queue == [] and not win.queue_bar.isVisible()
    assert [m.role for m in win.store.messages(new)] == ["user"]  # kept, not answered
    click_chat(qtbot, win, 1)
    assert win.current_conv == conv
    with qtbot.waitSignal(win.generation_finished, timeout=GEN_TIMEOUT_MS) as done:
        click(qtbot, find(win, QPushButton, "stopButton"))
    assert done.args[0]["stop_reason"] == "cancelled"
    assert [m.role for m in win.store.messages(new)] == ["user"]  # left out of the queue
