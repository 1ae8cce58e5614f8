"""Pinned chats in the sidebar (issue 45): pinned from a row's context menu or by
Ctrl+Shift+P, listed first under "Pinned", still there after a relaunch, and unpinned."""
from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QContextMenuEvent, QKeySequence
from PySide6.QtWidgets import QApplication, QMenu

from tests.support.ui import data_dir, find, make_window  # noqa: F401
from tests.ui.test_ui_layout import settle


def three_chats(data_dir) -> dict[str, int]:
    """Three chats in the window's database, Clouds the newest (listed first)."""
    from ember.storage.store import Store
    store = Store(data_dir / "history.sqlite3")
    ids = {}
    for n, title in enumerate(("Apples", "Bees", "Clouds")):
        cid = store.create_conversation(title=title, created=1000.0 + n)
        store.add_message(cid, "user", f"Tell me about {title.lower()}")
        store.db.execute("UPDATE conversations SET updated = ? WHERE id = ?", (1000.0 + n, cid))
        ids[title] = cid
    store.close()
    return ids


def rows(win) -> list[str]:
    """The sidebar's rows as shown, headers in brackets."""
    m = win.sidebar.model
    headers = dict(m.headers())
    return [f"[{headers[i]}]" if i in headers else m.index(i).data()
            for i in range(m.rowCount())]


def context_menu_action(qtbot, win, conv_id: int, text: str) -> None:
    """Right-clicks the chat's row and clicks the menu's entry called text."""
    lst = win.sidebar.list
    pos = lst.visualRect(win.sidebar.index_for(conv_id)).center()
    QApplication.sendEvent(lst.viewport(), QContextMenuEvent(
        QContextMenuEvent.Mouse, pos, lst.viewport().mapToGlobal(pos)))
    settle(qtbot, 20)
    menu = QApplication.activePopupWidget()
    assert isinstance(menu, QMenu) and menu.objectName() == "conversationMenu"
    action = next((a for a in menu.actions() if a.text() == text), None)
    assert action is not None, [a.text() for a in menu.actions()]
    qtbot.mouseClick(menu, Qt.LeftButton, pos=menu.actionGeometry(action).center())
    settle(qtbot, 20)


def test_a_chat_pinned_by_its_menu_is_first_after_a_relaunch_and_unpins(qtbot, data_dir):
    from ember.storage.store import Store
    ids = three_chats(data_dir)
    win = make_window(qtbot, data_dir, restore_last=False)
    settle(qtbot)
    assert rows(win) == ["Clouds", "Bees", "Apples"] and win.sidebar.model.headers() == []
    context_menu_action(qtbot, win, ids["Apples"], "Pin")
    assert rows(win) == ["[Pinned]", "Apples", "[Chats]", "Clouds", "Bees"]
    # the header is not a chat: neither selectable nor given a menu
    header = win.sidebar.model.index(0)
    assert not header.flags() & Qt.ItemIsSelectable
    # in the database
    store = Store(data_dir / "history.sqlite3")
    first = store.conversations()[0]
    assert (first.title, first.pinned) == ("Apples", True)
    store.close()
    win.close()
    # relaunched on the same file: still pinned, still on top, the menu offers Unpin
    win = make_window(qtbot, data_dir, restore_last=False)
    settle(qtbot)
    assert rows(win) == ["[Pinned]", "Apples", "[Chats]", "Clouds", "Bees"]
    lst = win.sidebar.list
    assert lst.visualRect(win.sidebar.index_for(ids["Apples"])).top() < \
        lst.visualRect(win.sidebar.index_for(ids["Clouds"])).top()
    context_menu_action(qtbot, win, ids["Apples"], "Unpin")
    assert rows(win) == ["Clouds", "Bees", "Apples"]
    store = Store(data_dir / "history.sqlite3")
    assert not any(c.pinned for c in store.conversations())
    store.close()


def test_ctrl_shift_p_pins_and_unpins_the_open_chat(qtbot, data_dir):
    ids = three_chats(data_dir)
    win = make_window(qtbot, data_dir, restore_last=False)
    settle(qtbot)
    win.select_conversation(ids["Bees"])
    win.sidebar.select(ids["Bees"])
    action = find(win, QAction, "actionPinChat")
    assert action.shortcut() == QKeySequence("Ctrl+Shift+P")
    win.activateWindow()
    qtbot.keyClick(win.sidebar.list, Qt.Key_P, Qt.ControlModifier | Qt.ShiftModifier)
    settle(qtbot, 20)
    assert rows(win) == ["[Pinned]", "Bees", "[Chats]", "Clouds", "Apples"]
    assert win.sidebar.current_id() == ids["Bees"]  # still the open chat, still selected
    # the arrow keys step over the "Chats" header to the next chat
    qtbot.keyClick(win.sidebar.list, Qt.Key_Down)
    settle(qtbot, 20)
    assert win.sidebar.current_id() == ids["Clouds"] and win.current_conv == ids["Clouds"]
    win.select_conversation(ids["Bees"])
    win.sidebar.select(ids["Bees"])
    qtbot.keyClick(win.sidebar.list, Qt.Key_P, Qt.ControlModifier | Qt.ShiftModifier)
    settle(qtbot, 20)
    assert rows(win) == ["Clouds", "Bees", "Apples"]
    # two pinned chats: newest first among them, above every other chat
    win.set_pinned(ids["Apples"], True)
    win.set_pinned(ids["Bees"], True)
    assert rows(win) == ["[Pinned]", "Bees", "Apples", "[Chats]", "Clouds"]
