"""Layout at large font sizes and in a small window (issue 13, bugs 2 and 4), measured on
the widgets: the model card's fields are whole at font size 14-16, a 900x600 window stays
900x600 with the message text wrapped inside the view, a long chat title ends in "…",
the inline rename editor is as tall as its text, and the settings spin boxes have arrows."""
from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QApplication,
    QGridLayout,
    QLineEdit,
    QSpinBox,
    QStyle,
    QStyleOptionSpinBox,
)

from tests.support.ui import LOAD_TIMEOUT_MS, data_dir, make_window, write_settings  # noqa: F401

pytestmark = pytest.mark.native

LONG_TITLE = ("A very long chat title about the history of the Roman empire and all of its "
              "many emperors")


def settle(qtbot, ms=50):
    for _ in range(3):
        QApplication.processEvents()
        qtbot.wait(ms)


def window_with_history(qtbot, data_dir, model_path, font_size):
    from ember.storage.store import Store
    write_settings(data_dir, font_size=font_size, last_model=str(model_path))
    store = Store(data_dir / "history.sqlite3")
    cid = store.create_conversation(title=LONG_TITLE, model_path=str(model_path))
    store.add_message(cid, "user", "Tell me about " + "the long history of things " * 20)
    store.add_message(cid, "assistant", "Sure. " + "Here is a sentence that should wrap. " * 30,
                      meta={"generated_tokens": 200, "stop_reason": "eog"})
    store.close()
    win = make_window(qtbot, data_dir)
    with qtbot.waitSignal(win.model_loaded, timeout=LOAD_TIMEOUT_MS):
        pass
    return win


def inside(child, ancestor) -> bool:
    """child's rectangle lies within ancestor's (in ancestor's coordinates)."""
    top_left = child.mapTo(ancestor, child.rect().topLeft())
    bottom_right = child.mapTo(ancestor, child.rect().bottomRight())
    return ancestor.rect().contains(top_left) and ancestor.rect().contains(bottom_right)


@pytest.mark.parametrize("font_size", [10, 14, 16])
def test_model_card_fields_are_whole(qtbot, data_dir, starter_model_path, font_size):
    win = window_with_history(qtbot, data_dir, starter_model_path, font_size)
    win.resize(900, 600)
    settle(qtbot)
    card = win.card
    if not card.isVisible():  # folded where it would squeeze the chat: the user opens it
        qtbot.mouseClick(win.card_button, Qt.LeftButton)
        settle(qtbot)
    assert card.isVisible()
    grid = card.findChildren(QGridLayout)[0]
    for name, value in card.values.items():
        row, _col, _rs, _cs = grid.getItemPosition(grid.indexOf(value))
        key = grid.itemAtPosition(row, 0).widget()
        # the field name ("Quantization") and its value ("8,192 tokens") are not cut off
        assert key.width() >= key.fontMetrics().horizontalAdvance(key.text()), key.text()
        fm = value.fontMetrics()
        if value.width() < fm.horizontalAdvance(value.text()):
            # longer than the widest card ("fits in 18.4 GB free" at 16 pt): it wraps, every
            # word whole and every line shown, instead of being cut
            assert value.wordWrap() and value.height() >= value.heightForWidth(value.width())
            assert all(fm.horizontalAdvance(w) <= value.width() for w in value.text().split()), \
                (name, value.text(), value.width())
        assert inside(key, card) and inside(value, card)


@pytest.mark.parametrize("font_size", [11, 14, 16])
def test_900x600_window_wraps_messages_inside_the_view(qtbot, data_dir, starter_model_path,
                                                       font_size):
    win = window_with_history(qtbot, data_dir, starter_model_path, font_size)
    win.resize(900, 600)
    settle(qtbot)
    assert (win.width(), win.height()) == (900, 600)
    assert win.sidebar.isVisible()
    view = win.chat_view.viewport()
    messages = win.chat_view.messages()
    assert len(messages) == 2
    for m in messages:
        # the whole message, its header and its text lie inside the visible view's width
        right = m.mapTo(view, m.rect().topRight()).x()
        assert right < view.width(), (right, view.width())
        for w in (m.role_label, m.body, m.copy_button):
            assert inside(w, m), w.objectName()
        # the text wraps to the body's width instead of running past it
        assert m.body.document().size().width() <= m.body.viewport().width() + 1
    # the window's parts are within the window
    for w in (win.chat_title, win.system_button, win.composer, win.card.change_button):
        assert inside(w, win) or not w.isVisible(), w.objectName()


def test_long_chat_title_ends_with_an_ellipsis(qtbot, data_dir, starter_model_path):
    win = window_with_history(qtbot, data_dir, starter_model_path, 11)
    win.resize(900, 600)
    settle(qtbot)
    title = win.chat_title
    assert getattr(title, "full_text", title.text)() == LONG_TITLE
    assert title.text().endswith("…") and LONG_TITLE.startswith(title.text()[:-1])
    assert title.fontMetrics().horizontalAdvance(title.text()) <= title.contentsRect().width()
    assert title.toolTip() == LONG_TITLE
    assert inside(title, win)
    # the sidebar elides the same title to its width rather than scrolling sideways
    bar = win.sidebar.list.horizontalScrollBar()
    assert not bar.isVisible() and bar.maximum() == 0
    # wide enough again: the whole title
    win.resize(2400, 800)
    settle(qtbot)
    assert title.text() == LONG_TITLE


@pytest.mark.parametrize("font_size", [11, 16])
def test_rename_editor_is_as_tall_as_its_text(qtbot, data_dir, font_size):
    write_settings(data_dir, font_size=font_size)
    win = make_window(qtbot, data_dir)
    cid = win.new_chat()
    win.rename_conversation(cid, "Holiday plans")
    settle(qtbot)
    win.sidebar.rename(cid)
    settle(qtbot)
    editors = [e for e in win.sidebar.list.findChildren(QLineEdit) if e.isVisible()]
    assert len(editors) == 1
    ed = editors[0]
    assert ed.text() == "Holiday plans"
    # the editor's box holds a line of its font with its padding: nothing clipped
    assert ed.height() >= ed.sizeHint().height(), (ed.height(), ed.sizeHint().height())
    assert ed.height() >= ed.fontMetrics().height()
    row = win.sidebar.list.visualRect(win.sidebar.index_for(cid))
    assert row.contains(ed.geometry())


def _dark_pixels(img, rect, bg) -> int:
    """Pixels clearly darker or lighter than the background inside rect (2 px in from its
    edges, so the button's own border lines do not count)."""
    n = 0
    base = QColor(bg).lightness()
    for x in range(rect.left() + 2, rect.right() - 1):
        for y in range(rect.top() + 2, rect.bottom() - 1):
            if abs(QColor(img.pixel(x, y)).lightness() - base) > 60:
                n += 1
    return n


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_settings_spin_boxes_have_arrows(qtbot, data_dir, theme):
    from ember.ui.settings_dialog import SettingsDialog
    write_settings(data_dir, theme=theme)
    win = make_window(qtbot, data_dir)
    dlg = SettingsDialog(win.settings, win)
    qtbot.addWidget(dlg)
    dlg.show()
    settle(qtbot)
    spins = [s for s in dlg.findChildren(QSpinBox) if s.objectName() == "topK"]
    assert spins
    spin = spins[0]
    img = spin.grab().toImage()
    opt = QStyleOptionSpinBox()
    spin.initStyleOption(opt)
    bg = img.pixel(3, spin.height() // 2)  # the field's own background
    for sub in (QStyle.SC_SpinBoxUp, QStyle.SC_SpinBoxDown):
        r = spin.style().subControlRect(QStyle.CC_SpinBox, opt, sub, spin)
        assert r.width() >= 6 and r.height() >= 4
        assert _dark_pixels(img, r, bg) >= 3, f"no arrow drawn in {r} ({spin.size()})"
