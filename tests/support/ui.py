"""Helpers for the desktop-app tests (no tests here): an isolated data folder with
fast, deterministic settings, real drag-and-drop events, and waiting on the window."""
from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest

pytest.importorskip("PySide6", reason="the desktop app needs PySide6")
pytest.importorskip("pytestqt", reason="the desktop-app tests need pytest-qt")

from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QApplication

LOAD_TIMEOUT_MS = 120_000
GEN_TIMEOUT_MS = 180_000


def write_settings(data_dir, **overrides):
    from ember.storage.settings import Settings
    s = Settings(temperature=0.0, top_k=1, max_new_tokens=6, n_ctx=512, theme="light",
                 repeat_penalty=1.0)
    for k, v in overrides.items():
        setattr(s, k, v)
    s.save(data_dir / "settings.json")
    return s


def make_window(qtbot, data_dir, **kw):
    from ember.ui.app import create_application
    from ember.ui.main_window import MainWindow
    create_application()
    win = MainWindow(data_dir, **kw)
    qtbot.addWidget(win)
    win.show()
    return win


def drop_file(target, path) -> bool:
    """A real drag enter + drop of a file URL onto target, as the window system sends."""
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(path))])
    pos = target.rect().center()
    enter = QDragEnterEvent(QPoint(pos), Qt.CopyAction, mime, Qt.LeftButton, Qt.NoModifier)
    QApplication.sendEvent(target, enter)
    drop = QDropEvent(QPointF(pos), Qt.CopyAction, mime, Qt.LeftButton, Qt.NoModifier)
    QApplication.sendEvent(target, drop)
    return enter.isAccepted() and drop.isAccepted()


def load_by_drop(qtbot, win, path, target=None):
    with qtbot.waitSignal(win.model_loaded, timeout=LOAD_TIMEOUT_MS):
        assert drop_file(target or win.welcome, path)
    assert win.model is not None


def type_and_send(qtbot, win, text):
    """Types into the composer and presses Enter; returns the finished reply's stats."""
    inp = win.composer.input
    inp.setFocus()
    inp.clear()
    qtbot.keyClicks(inp, text)
    with qtbot.waitSignal(win.generation_finished, timeout=GEN_TIMEOUT_MS) as blocker:
        qtbot.keyClick(inp, Qt.Key_Return)
    return blocker.args[0]


def find(win, cls, name):
    w = win.findChild(cls, name)
    assert w is not None, f"no {cls.__name__} named {name}"
    return w


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    d = tmp_path / "data"
    d.mkdir()
    monkeypatch.setenv("EMBER_DATA_DIR", str(d))
    write_settings(d)
    return d
