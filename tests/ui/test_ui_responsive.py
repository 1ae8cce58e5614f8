"""The window in small sizes and at large fonts (issue 45, bugs 2, 4 and 8), measured on the
widgets: the chat column keeps room for 40 characters, the model card folds by itself
where it would not leave that room and by its toggle, the status bar's segments never
overlap and are shortened only where the bar is too narrow (whole in their tooltips), no
label is cut where it has room, the system prompt never covers a message, and the delete
toast and the Settings combo boxes show their whole text or elide it with a tooltip."""
from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint, QRect, Qt
from PySide6.QtGui import QAction
from PySide6.QtWidgets import (
    QComboBox,
    QLabel,
    QLineEdit,
    QStyle,
    QStyleOptionFrame,
    QTabWidget,
)

from tests.ui.test_ui_layout import inside, settle
from tests.support.ui import (  # noqa: F401
    LOAD_TIMEOUT_MS,
    data_dir,
    find,
    make_window,
    write_settings,
)

pytestmark = pytest.mark.native

TITLE = "Kael and the dragon"
CHAT_CHARS = 40
SIZES = [(900, 600), (1240, 800), (1440, 900)]
FONTS = [10, 12, 14, 16]


def window_at(qtbot, data_dir, model_path, size, font_size, reply="Kael flew north. " * 40,
              **settings):
    """A chat with a reply whose status says "prompt cached · generation 55.2 t/s", the
    model loaded, the window resized to size."""
    from ember.storage.store import Store
    write_settings(data_dir, font_size=font_size, last_model=str(model_path), **settings)
    store = Store(data_dir / "history.sqlite3")
    cid = store.create_conversation(title=TITLE, model_path=str(model_path))
    store.add_message(cid, "user", "Tell me a story about Kael")
    store.add_message(cid, "assistant", reply,
                      meta={"generated_tokens": 200, "stop_reason": "eog", "prompt_tps": None,
                            "prompt_cached": True, "gen_tps": 55.2, "n_past": 109,
                            "prompt_tokens": 30, "prompt_evaluated": 1})
    store.close()
    win = make_window(qtbot, data_dir)
    with qtbot.waitSignal(win.model_loaded, timeout=LOAD_TIMEOUT_MS):
        pass
    win.resize(*size)
    settle(qtbot)
    assert (win.width(), win.height()) == size
    return win


def rect_in(w, ancestor) -> QRect:
    return QRect(w.mapTo(ancestor, QPoint(0, 0)), w.size())


def full_text(label: QLabel) -> str:
    return getattr(label, "full_text", label.text)()


def elided(label: QLabel) -> bool:
    return label.text() != full_text(label)


def check_status_bar(win) -> None:
    sb = win.statusBar()
    segs = [w for w in sb.findChildren(QLabel) if w.isVisible() and w.text()]
    assert len(segs) >= 4, [w.objectName() for w in segs]
    for i, a in enumerate(segs):
        ra = rect_in(a, sb)
        assert sb.rect().contains(ra), (a.objectName(), ra, sb.rect())
        # what it draws fits its box (shortened with "…", never cut by the next segment)
        assert a.fontMetrics().horizontalAdvance(a.text()) <= a.contentsRect().width(), \
            (a.objectName(), a.text(), a.contentsRect().width())
        for b in segs[i + 1:]:
            assert not ra.intersects(rect_in(b, sb)), (a.objectName(), b.objectName())
        if elided(a):  # the whole text in the tooltip (where it runs: its parts, one a line)
            assert all(part in a.toolTip() for part in full_text(a).split(" — ")), \
                (full_text(a), a.toolTip())
    # shortened only where the bar has no room for the whole texts
    whole = sum(w.sizeHint().width() for w in segs if w is not win.status_msg)
    if whole + 24 * len(segs) <= sb.width():
        assert not [w.objectName() for w in segs if elided(w)]


def check_chat_column(win) -> None:
    msgs = win.chat_view.messages()
    assert msgs
    for m in msgs:
        avg = m.body.fontMetrics().averageCharWidth()
        assert m.body.viewport().width() >= CHAT_CHARS * avg, \
            (m.body.viewport().width(), CHAT_CHARS * avg)
        right = m.mapTo(win.chat_view.viewport(), m.rect().topRight()).x()
        assert right < win.chat_view.viewport().width()


def text_area_width(edit) -> int:
    if isinstance(edit, QLineEdit):
        opt = QStyleOptionFrame()
        edit.initStyleOption(opt)
        r = edit.style().subElementRect(QStyle.SE_LineEditContents, opt, edit)
        return r.width() - edit.textMargins().left() - edit.textMargins().right() - 4
    return edit.viewport().width() - int(2 * edit.document().documentMargin())


def check_labels(win) -> None:
    # the chat's title is shortened only when the header has no room left for it
    title = win.chat_title
    header = title.parentWidget()
    if elided(title):
        lay = header.layout()
        used = sum(lay.itemAt(i).widget().width() for i in range(lay.count())
                   if lay.itemAt(i).widget() and lay.itemAt(i).widget().isVisible())
        m = lay.contentsMargins()
        assert used + m.left() + m.right() + lay.spacing() * (lay.count() - 1) \
            >= header.width() - 2, "the title is cut with room to spare"
        assert title.width() < title.sizeHint().width()
    for w in (win.system_button, getattr(win, "card_button", None), win.composer.send_button,
              win.sidebar.new_button, win.sidebar.models_button):
        if w is not None and w.isVisible():
            assert w.width() >= w.sizeHint().width(), w.objectName()
            assert inside(w, win), w.objectName()
    # the sidebar's rows have room for a title, not only "…"
    s = win.sidebar
    assert s.list.viewport().width() >= 14 * s.list.fontMetrics().averageCharWidth()
    # placeholders fit their boxes
    for box in (s.search, win.composer.input):
        text = box.placeholderText()
        assert text and box.fontMetrics().horizontalAdvance(text) <= text_area_width(box), \
            (box.objectName(), text, text_area_width(box))
    assert win.composer.input.placeholderText() in ("Message Ember…", "Message…")


@pytest.mark.parametrize("font_size", FONTS)
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_window_fits_its_size_and_font(qtbot, data_dir, starter_model_path, size,
                                       font_size):
    win = window_at(qtbot, data_dir, starter_model_path, size, font_size)
    check_chat_column(win)
    check_status_bar(win)
    check_labels(win)
    # the card is beside the chat where both fit, folded where the chat would be squeezed
    fits = (win.width() - win.sidebar.minimumWidth() - win.card.minimumWidth()
            >= max(win.chat_min_width(), win.width() // 2))
    assert win.card.isVisible() == fits
    assert win.card_button.isVisible() and win.card_button.isChecked() == fits
    if fits:
        assert inside(win.card, win) and inside(win.card.change_button, win)
        assert not rect_in(win.card, win).intersects(rect_in(win.chat_view, win))


@pytest.mark.parametrize("font_size", FONTS)
def test_model_panel_folds_and_opens_by_its_toggle(qtbot, data_dir, starter_model_path,
                                                   font_size):
    from ember.storage.settings import Settings
    win = window_at(qtbot, data_dir, starter_model_path, (1440, 900), font_size)
    assert win.card.isVisible()
    chat_w = win.chat_view.width()
    qtbot.mouseClick(win.card_button, Qt.LeftButton)
    settle(qtbot)
    assert not win.card.isVisible() and not win.card_button.isChecked()
    assert win.chat_view.width() > chat_w  # the chat takes the card's room
    assert Settings.load(data_dir / "settings.json").model_panel is False
    check_chat_column(win)
    # remembered: a relaunch starts with it folded
    win.close()
    win = make_window(qtbot, data_dir)
    with qtbot.waitSignal(win.model_loaded, timeout=LOAD_TIMEOUT_MS):
        pass
    win.resize(1440, 900)
    settle(qtbot)
    assert not win.card.isVisible()
    # View > Model panel opens it again
    action = find(win, QAction, "actionModelPanel")
    assert not action.isChecked()
    action.trigger()
    settle(qtbot)
    assert win.card.isVisible() and action.isChecked() and win.card_button.isChecked()
    assert Settings.load(data_dir / "settings.json").model_panel is True
    check_status_bar(win)


@pytest.mark.parametrize("font_size", [10, 13, 16])
def test_a_900x600_window_keeps_half_its_width_for_the_chat(qtbot, data_dir,
                                                             starter_model_path, font_size):
    from PySide6.QtGui import QKeySequence
    win = window_at(qtbot, data_dir, starter_model_path, (900, 600), font_size)
    # the card beside the chat never leaves it under half the window (it folds instead)
    assert win.chat_page.width() >= win.width() // 2, (win.chat_page.width(), font_size)
    if win.card.isVisible():
        assert not rect_in(win.card, win).intersects(rect_in(win.chat_view, win))
    check_status_bar(win)
    check_chat_column(win)
    # the panel opens and hides by a click on its toggle, and by View > Model panel's keys
    if not win.card.isVisible():
        qtbot.mouseClick(win.card_button, Qt.LeftButton)
        settle(qtbot)
        assert win.card.isVisible()
    qtbot.mouseClick(win.card_button, Qt.LeftButton)
    settle(qtbot)
    assert not win.card.isVisible() and not win.card_button.isChecked()
    action = find(win, QAction, "actionModelPanel")
    assert action.shortcut() == QKeySequence("Ctrl+Shift+I")
    win.activateWindow()
    qtbot.keyClick(win.chat_view, Qt.Key_I, Qt.ControlModifier | Qt.ShiftModifier)
    settle(qtbot)
    assert win.card.isVisible() and action.isChecked()


def test_narrow_window_folds_the_card_and_opens_it_over_the_chat(qtbot, data_dir,
                                                                   starter_model_path):
    win = window_at(qtbot, data_dir, starter_model_path, (1440, 900), 16)
    assert win.card.isVisible()
    win.resize(900, 600)
    settle(qtbot)
    assert win.width() == 900  # the card did not hold the window wide
    assert not win.card.isVisible() and not win.card_button.isChecked()
    check_chat_column(win)
    # the user opens it anyway: over the chat's right side, the chat not squeezed
    chat_w = win.chat_view.width()
    qtbot.mouseClick(win.card_button, Qt.LeftButton)
    settle(qtbot)
    assert win.card.isVisible() and win.card_button.isChecked()
    assert inside(win.card, win) and win.chat_view.width() == chat_w
    qtbot.mouseClick(win.card_button, Qt.LeftButton)
    settle(qtbot)
    assert not win.card.isVisible()
    # wide again: back beside the chat by itself (the setting still says shown)
    win.resize(1440, 900)
    settle(qtbot)
    assert win.card.isVisible()
    assert not rect_in(win.card, win).intersects(rect_in(win.chat_view, win))


# ---- bug 4: the system prompt box -------------------------------------------------------

@pytest.mark.parametrize("font_size", [11, 16])
def test_system_prompt_never_covers_the_first_message(qtbot, data_dir, starter_model_path,
                                                      font_size):
    from ember.storage.store import Store
    write_settings(data_dir, font_size=font_size, last_model=str(starter_model_path))
    store = Store(data_dir / "history.sqlite3")
    cid = store.create_conversation(title="Pirates", model_path=str(starter_model_path),
                                    system_prompt="You are a pirate. " * 10)
    for i in range(6):
        store.add_message(cid, "user", f"Question {i}: " + "tell me more " * 30)
        store.add_message(cid, "assistant", f"Answer {i}: " + "arr matey " * 50)
    store.close()
    win = make_window(qtbot, data_dir)
    with qtbot.waitSignal(win.model_loaded, timeout=LOAD_TIMEOUT_MS):
        pass
    win.resize(900, 600)
    # a context notice and an error above the chat leave it little height
    win.notice_banner.show_message("Context window", "Two earlier messages were left out "
                                   "to fit the context window of this model.")
    win.show_error("Something went wrong inside Ember", "A detail\non two lines")
    settle(qtbot)
    assert win.system_edit.isVisible() and win.system_button.isChecked()
    bar = win.chat_view.verticalScrollBar()
    for value in (bar.maximum(), bar.maximum() // 2, 0):  # scrolled up to the top
        bar.setValue(value)
        settle(qtbot, 20)
        box = rect_in(win.system_edit, win)
        for m in win.chat_view.messages():
            assert not rect_in(m, win).intersects(box), (value, rect_in(m, win), box)
    # at the top the box is in the view, the first message below it
    view = rect_in(win.chat_view.viewport(), win)
    box = rect_in(win.system_edit, win)
    first = rect_in(win.chat_view.messages()[0], win)
    assert view.contains(box) and first.top() >= box.bottom()
    # the button brings it into view from the bottom of a long chat
    qtbot.mouseClick(win.system_button, Qt.LeftButton)
    settle(qtbot)
    assert not win.system_edit.isVisible()
    bar.setValue(bar.maximum())
    settle(qtbot)
    qtbot.mouseClick(win.system_button, Qt.LeftButton)
    settle(qtbot)
    assert rect_in(win.chat_view.viewport(), win).contains(rect_in(win.system_edit, win))


# ---- bug 8: clipped texts -------------------------------------------------------------

@pytest.mark.parametrize("font_size", [10, 16])
def test_delete_toast_shows_the_whole_title(qtbot, data_dir, font_size):
    write_settings(data_dir, font_size=font_size)
    win = make_window(qtbot, data_dir, restore_last=False)
    win.resize(900, 600)
    cid = win.new_chat()
    win.rename_conversation(cid, "Write a Python function that reverses a list")
    win.new_chat()
    settle(qtbot)
    win.sidebar.select(cid)
    win.select_conversation(cid)
    qtbot.keyClick(win.sidebar.list, Qt.Key_Delete)
    settle(qtbot)
    bar, text = win.sidebar.undo_bar, win.sidebar.undo_text
    assert bar.isVisible()
    assert text.text() == "Deleted “Write a Python function that reverses a list”"
    # every line of it in its box: as tall as the wrapped text needs, and beside Undo
    room = text.contentsRect().width()
    if text.wordWrap():
        assert text.height() >= text.heightForWidth(text.width())
        for word in text.text().split():
            assert text.fontMetrics().horizontalAdvance(word) <= room
    else:
        assert text.fontMetrics().horizontalAdvance(text.text()) <= room, (text.text(), room)
    assert inside(text, bar) and inside(win.sidebar.undo_button, bar)
    assert not rect_in(text, bar).intersects(rect_in(win.sidebar.undo_button, bar))
    assert inside(bar, win.sidebar)


@pytest.mark.parametrize("font_size", [10, 16])
def test_settings_combos_show_their_choice_or_elide_it(qtbot, data_dir, starter_model_path,
                                                       font_size):
    from ember.ui.settings_dialog import SettingsDialog
    win = window_at(qtbot, data_dir, starter_model_path, (1240, 800), font_size)
    card_format = win.card.values["modelTemplate"].text()
    dlg = SettingsDialog(win.settings, win, prompt_format=win._prompt_format(win.model_info))
    qtbot.addWidget(dlg)
    dlg.show()
    dlg.findChild(QTabWidget).setCurrentIndex(1)
    settle(qtbot)
    mode = find(dlg, QComboBox, "promptMode")
    # Auto says what the card says the model gets
    assert mode.itemText(0) == f"Auto: {card_format}"
    combos = [c for c in dlg.findChildren(QComboBox) if c.isVisible()]
    assert len(combos) >= 3
    for c in combos:
        shown = c.shown_text()
        assert c.fontMetrics().horizontalAdvance(shown) <= c._field_width(), c.objectName()
        if shown != c.currentText():  # shortened: "…" at the end, the whole in the tip
            assert shown.endswith("…") and c.currentText().startswith(shown[:-1])
            assert c.toolTip() == c.currentText()
        assert inside(c, dlg)


# ---- bug 16: a long reply's actions ----------------------------------------------------

def test_a_long_reply_has_its_actions_at_its_end_too(qtbot, data_dir, starter_model_path):
    from PySide6.QtGui import QGuiApplication
    win = window_at(qtbot, data_dir, starter_model_path, (900, 600), 11,
                    reply="Kael flew north, over the hills and the sea. " * 80)
    view = win.chat_view
    reply = view.messages()[-1]
    assert reply.role == "assistant" and reply.height() > view.viewport().height()
    bar = view.verticalScrollBar()
    bar.setValue(bar.maximum())  # read to its end
    settle(qtbot)

    def on_screen(b) -> bool:
        return b.isVisible() and view.viewport().rect().contains(
            QRect(b.mapTo(view.viewport(), QPoint(0, 0)), b.size()))
    # the header's actions scrolled away; the same ones are under the reply
    assert not on_screen(reply.copy_button)
    bottom = {b.text(): b for b in reply.findChildren(type(reply.copy_button)) if on_screen(b)}
    assert sorted(bottom) == ["Continue", "Copy", "Regenerate"]
    for b in bottom.values():
        assert b.mapTo(reply, QPoint(0, 0)).y() > reply.body.geometry().bottom()
    QGuiApplication.clipboard().clear()
    qtbot.mouseClick(bottom["Copy"], Qt.LeftButton)
    assert QGuiApplication.clipboard().text() == reply.answer_text
    with qtbot.waitSignal(win.generation_finished, timeout=LOAD_TIMEOUT_MS):
        qtbot.mouseClick(bottom["Regenerate"], Qt.LeftButton)
    settle(qtbot)
    new = view.messages()[-1]
    assert new.version_label.text() == "2/2"
    # a short reply (six tokens) has them only at its top
    assert new.height() < view.viewport().height()
    assert [b.text() for b in new.findChildren(type(new.copy_button))
            if b.isVisible() and b.text() == "Copy"] == ["Copy"]


@pytest.mark.parametrize("size,font_size", [((900, 600), 10), ((900, 600), 13),
                                            ((900, 600), 16), ((1240, 800), 13)])
def test_the_last_replys_actions_stay_on_its_first_row(qtbot, data_dir, starter_model_path,
                                                       size, font_size):
    win = window_at(qtbot, data_dir, starter_model_path, size, font_size)
    reply = win.chat_view.messages()[-1]
    assert reply.role == "assistant"
    name = reply.role_label
    buttons = [reply.regenerate_button, reply.continue_button, reply.copy_button]
    assert all(b.isVisible() for b in buttons)
    row = rect_in(name, reply)
    for b in buttons:
        r = rect_in(b, reply)
        # on the name's row (a long name shortened for them), inside the message
        assert r.top() < row.bottom() and r.bottom() > row.top(), (b.objectName(), r, row)
        assert reply.rect().contains(r) and not r.intersects(row)
        assert r.width() >= b.sizeHint().width()
    if name.elided():
        assert name.toolTip() == name.full_text() == "SmolLM2-135M-Instruct"
