"""`ember path/to/model.gguf` opens the desktop app with that model loaded; the app
remembers it and reopens it on the next start."""
from __future__ import annotations

import pytest
from PySide6.QtWidgets import QApplication

from tests.support.ui import data_dir  # noqa: F401

pytestmark = pytest.mark.native


def test_ember_model_path_opens_the_app_with_it(qtbot, data_dir, starter_model_path,
                                                monkeypatch):
    from ember.commands import cli
    from ember.storage.settings import Settings
    from ember.ui.main_window import MainWindow
    monkeypatch.setattr(cli, "_has_display", lambda: True)
    seen = {}

    def fake_exec(self=None):
        wins = [w for w in QApplication.topLevelWidgets() if isinstance(w, MainWindow)
                and w.isVisible()]
        assert len(wins) == 1
        win = wins[0]
        qtbot.waitUntil(lambda: win.model is not None, timeout=120_000)
        seen["path"] = win.model_info["path"]
        seen["data"] = win.data_dir
        win.close()
        return 0

    monkeypatch.setattr(QApplication, "exec", fake_exec)
    assert cli.main([str(starter_model_path)]) == 0
    assert seen["path"] == str(starter_model_path)
    assert seen["data"] == data_dir
    assert Settings.load(data_dir / "settings.json").last_model == str(starter_model_path)


def test_welcome_offers_the_starter_model(qtbot, data_dir, starter_model_path):
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QPushButton

    from ember import starter
    from tests.support.ui import make_window
    (data_dir / "models").mkdir(exist_ok=True)
    (data_dir / "models" / starter.FILENAME).symlink_to(starter_model_path)
    win = make_window(qtbot, data_dir)
    button = win.findChild(QPushButton, "starterModelButton")
    assert win.stack.currentWidget() is win.welcome and button.isVisible()
    with qtbot.waitSignal(win.model_loaded, timeout=120_000):
        qtbot.mouseClick(button, Qt.LeftButton)
    assert win.model_info["file_name"] == starter.FILENAME
