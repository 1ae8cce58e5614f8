"""Importing chats: an export imported twice adds its chats once and says how many were
already here; chats of the same title told apart by a date on a second line, which leaves
the title the row's whole width."""
from __future__ import annotations

import json

from ember.storage.store import Store
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QListView, QStyleOptionViewItem

from tests.support.ui import data_dir, drop_file, find, make_window  # noqa: F401

TITLE = "Write a 300-word story"


def write_export(tmp_path, name: str, chats: list[tuple[str, float, list[str]]]):
    """An export from another Ember's history: (title, created, user messages) per chat."""
    other = Store(tmp_path / f"{name}.sqlite3")
    for title, created, texts in chats:
        cid = other.create_conversation(title, created=created)
        for t in texts:
            other.add_message(cid, "user", t)
            other.add_message(cid, "assistant", f"About {t}.")
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(other.export_json()), encoding="utf-8")
    other.close()
    return path


def sidebar_titles(win) -> list[str]:
    m = find(win, QListView, "conversationList").model()
    return [m.index(i, 0).data() for i in range(m.rowCount())]


def test_importing_the_same_export_twice_adds_its_chats_once(qtbot, data_dir, tmp_path):
    win = make_window(qtbot, data_dir, restore_last=False)
    export = write_export(tmp_path, "laptop", [("Pasta", 1_700_000_000.5, ["boiling"]),
                                               ("Rust", 1_700_000_100.25, ["lifetimes"])])
    status = find(win, QLabel, "statusMessage")
    assert drop_file(win.centralWidget(), export)
    assert sorted(sidebar_titles(win)) == ["Pasta", "Rust"]
    assert status.text() == "2 chats imported"
    assert drop_file(win.centralWidget(), export)
    assert sorted(sidebar_titles(win)) == ["Pasta", "Rust"]
    assert len(win.store.conversations()) == 2
    assert status.text() == "0 chats imported, 2 already here"
    # a later export of the same history: one chat more, and a chat renamed here is the same
    win.store.rename_conversation(win.store.conversations()[0].id, "Renamed here")
    data = json.loads(export.read_text(encoding="utf-8"))
    tea = write_export(tmp_path, "tea", [("Tea", 1_700_000_200.0, ["green tea"])])
    data["conversations"] += json.loads(tea.read_text(encoding="utf-8"))["conversations"]
    later = tmp_path / "later.json"
    later.write_text(json.dumps(data), encoding="utf-8")
    assert drop_file(win.centralWidget(), later)
    assert len(win.store.conversations()) == 3 and "Tea" in sidebar_titles(win)
    assert status.text() == "1 chat imported, 2 already here"
    # the same start time with other messages is another chat
    changed = write_export(tmp_path, "changed", [("Pasta", 1_700_000_000.5, ["frying"])])
    assert drop_file(win.centralWidget(), changed)
    assert len(win.store.conversations()) == 4
    assert status.text() == "1 chat imported"


def test_a_date_beside_equal_titles_leaves_the_title_its_width(qtbot, data_dir, tmp_path):
    win = make_window(qtbot, data_dir, restore_last=False)
    win.resize(1240, 800)
    export = write_export(tmp_path, "twice", [(TITLE, 1_700_000_000.0, ["a lighthouse"]),
                                              (TITLE, 1_700_086_400.0, ["a harbour"])])
    assert drop_file(win.centralWidget(), export)
    lst = find(win, QListView, "conversationList")
    qtbot.waitUntil(lambda: lst.viewport().width() > 100)
    delegate = lst.itemDelegate()
    fm = lst.fontMetrics()
    for row in range(lst.model().rowCount()):
        index = lst.model().index(row, 0)
        opt = QStyleOptionViewItem()
        opt.initFrom(lst)
        opt.rect = lst.visualRect(index)
        opt.widget = lst
        lay = delegate.row_layout(opt, index)
        assert lay.date, "equal titles are told apart by their dates"
        # the title has the row's text width to itself: the date is on the line below
        assert fm.horizontalAdvance(TITLE) <= lay.title_rect.width()
        assert lay.title == fm.elidedText(TITLE, Qt.ElideRight, lay.title_rect.width()) == TITLE
        # beside the title, as it was, the date would have cut it ("Write a 300-wor…")
        assert fm.horizontalAdvance(TITLE) > opt.rect.width() - fm.horizontalAdvance(lay.date) - 36
        assert lay.date_rect.top() >= lay.title_rect.bottom()
        assert opt.rect.contains(lay.title_rect) and opt.rect.contains(lay.date_rect)
        assert fm.horizontalAdvance(lay.date) <= lay.date_rect.width()
