"""Every dialog in the window's look (issue 45): Settings, the endpoint, presets, Hugging
Face and quantize dialogs and the file dialogs, opened by their menu actions and buttons in light and dark at
font 16, have the window's palette, font and background, their default button drawn as
the window's primary button and the others as its plain ones, and no text cut off."""
from __future__ import annotations

import pytest
from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QAction, QColor, QPalette
from PySide6.QtWidgets import (
    QAbstractButton,
    QApplication,
    QDialog,
    QLabel,
    QLineEdit,
    QPushButton,
    QTabBar,
)

from tests.support.ui import LOAD_TIMEOUT_MS, data_dir, find, make_window, write_settings  # noqa: F401
from tests.ui.test_ui_layout import inside, settle

pytestmark = pytest.mark.native

FONT = 16


def close(a: QColor, b: QColor, tol: int = 12) -> bool:
    return all(abs(x - y) <= tol for x, y in zip(a.getRgb()[:3], b.getRgb()[:3]))


def button_fill(b: QPushButton) -> QColor:
    """The colour a button is filled with: a pixel inside its border, left of its text."""
    img = b.grab().toImage()
    return QColor(img.pixel(4, b.height() // 2))


def check_themed(dlg: QDialog, win) -> None:
    c = win.colors
    for role in (QPalette.Window, QPalette.WindowText, QPalette.Base, QPalette.Text,
                 QPalette.Button, QPalette.ButtonText, QPalette.Highlight):
        assert dlg.palette().color(role) == win.palette().color(role), role
    assert dlg.font().pointSize() == win.font().pointSize() == FONT
    img = dlg.grab().toImage()
    assert close(QColor(img.pixel(2, 2)), QColor(c["bg"])), \
        (QColor(img.pixel(2, 2)).name(), c["bg"])
    buttons = [b for b in dlg.findChildren(QPushButton) if b.isVisible() and b.isEnabled()
               and b.text()]
    default = [b for b in buttons if b.isDefault()]
    assert len(default) == 1, [(b.text(), b.isDefault()) for b in buttons]
    assert close(button_fill(default[0]), QColor(c["accent"])), \
        (default[0].text(), button_fill(default[0]).name(), c["accent"])
    # the others as the window's plain buttons
    others = [b for b in buttons if not b.isDefault()]
    assert others
    for b in others:
        assert close(button_fill(b), QColor(c["surface"])), (b.text(), button_fill(b).name())


def drawn(text: str) -> str:
    """A label's text as drawn: a mnemonic's "&" is not ("&&" is one)."""
    return text.replace("&&", "\0").replace("&", "").replace("\0", "&")


def check_no_text_cut(dlg: QDialog) -> None:
    for label in dlg.findChildren(QLabel):
        if not label.isVisible() or not label.text() or label.textFormat() == Qt.RichText \
                or label.pixmap() is not None and not label.pixmap().isNull():
            continue
        assert inside(label, dlg), label.text()
        room = label.contentsRect().width()
        if label.wordWrap():
            assert label.height() >= label.heightForWidth(label.width()) - 1, label.text()
            for word in label.text().split():
                assert label.fontMetrics().horizontalAdvance(word) <= room, (word, room)
        else:
            assert label.fontMetrics().horizontalAdvance(drawn(label.text())) <= room, \
                (label.text(), room)
    for b in dlg.findChildren(QAbstractButton):
        if b.isVisible() and b.text() and not isinstance(b.parentWidget(), QTabBar):
            assert b.width() >= b.sizeHint().width(), (b.text(), b.width(), b.sizeHint())
            assert inside(b, dlg), b.text()
    for bar in dlg.findChildren(QTabBar):
        for i in range(bar.count()):
            assert bar.fontMetrics().horizontalAdvance(bar.tabText(i)) <= \
                bar.tabRect(i).width(), bar.tabText(i)


def open_modal(qtbot, trigger, inspect) -> list:
    """Triggers what opens a modal dialog; inspect(dlg) runs on it, then it is closed."""
    seen = []

    def handle():
        dlg = QApplication.activeModalWidget()
        if dlg is None:
            QTimer.singleShot(50, handle)
            return
        settle(qtbot, 20)
        try:
            inspect(dlg)
            seen.append(dlg)
        finally:
            dlg.reject()

    QTimer.singleShot(100, handle)
    trigger()  # exec() returns once the dialog is closed; open() (the catalog's) at once
    qtbot.waitUntil(lambda: bool(seen))
    return seen


@pytest.fixture(params=["light", "dark"])
def themed_window(request, qtbot, data_dir):
    write_settings(data_dir, theme=request.param, font_size=FONT)
    win = make_window(qtbot, data_dir, restore_last=False)
    win.resize(1240, 800)
    settle(qtbot)
    assert win.colors["name"] == request.param
    return win


@pytest.mark.parametrize("action,kind", [
    ("actionSettings", "settingsDialog"), ("actionAddEndpoint", "EndpointDialog"),
    ("actionPresets", "presetDialog"), ("actionHub", "hubDialog"),
    ("actionOpenModel", "QFileDialog"), ("actionImport", "QFileDialog")])
def test_a_dialog_opened_by_its_menu_action_has_the_windows_look(qtbot, themed_window,
                                                                   tmp_path, action, kind):
    win = themed_window

    def inspect(dlg):
        assert kind in (dlg.objectName(), type(dlg).__name__), (dlg.objectName(), dlg)
        if kind == "QFileDialog":  # a file chosen: Open is enabled, drawn as it is then
            chosen = tmp_path / ("model.gguf" if action == "actionOpenModel" else "chats.json")
            chosen.write_text("{}")
            qtbot.keyClicks(find(dlg, QLineEdit, "fileNameEdit"), str(chosen))
            settle(qtbot, 10)
        check_themed(dlg, win)
        check_no_text_cut(dlg)
        for bar in dlg.findChildren(QTabBar):  # every page of Settings
            for i in range(1, bar.count()):
                bar.setCurrentIndex(i)
                settle(qtbot, 10)
                check_no_text_cut(dlg)

    win.activateWindow()
    assert open_modal(qtbot, find(win, QAction, action).trigger, inspect)


def test_the_quantize_dialog_has_the_windows_look(qtbot, data_dir, starter_model_path):
    for theme in ("light", "dark"):
        write_settings(data_dir, theme=theme, font_size=FONT, last_model=str(starter_model_path))
        win = make_window(qtbot, data_dir)
        with qtbot.waitSignal(win.model_loaded, timeout=LOAD_TIMEOUT_MS):
            pass
        find(win, QAction, "actionModels").trigger()
        settle(qtbot)
        (row,) = win.models_view.rows
        qtbot.mouseClick(row.findChild(QPushButton, "modelRowQuantize"), Qt.LeftButton)
        dlg = win.findChild(QDialog, "quantizeDialog")
        assert dlg is not None
        qtbot.waitExposed(dlg)
        settle(qtbot)
        check_themed(dlg, win)
        check_no_text_cut(dlg)
        dlg.close()
        win.close()
