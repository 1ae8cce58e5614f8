"""Settings: persisted, validated, edited in the dialog (Ctrl+,), applied live."""
from __future__ import annotations

import json

import pytest
from ember.storage.settings import Settings
from PySide6.QtCore import QTimer
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QApplication, QComboBox, QDialog

from tests.support.ui import data_dir, find, make_window  # noqa: F401


def test_settings_round_trip_and_validation(tmp_path):
    p = tmp_path / "s.json"
    Settings(temperature=0.2, seed=7, theme="dark").save(p)
    s = Settings.load(p)
    assert (s.temperature, s.seed, s.theme) == (0.2, 7, "dark")
    p.write_text(json.dumps({"temperature": "hot", "top_p": 9, "theme": "neon", "seed": -3,
                             "backend": "CUDA please", "gpu_layers": -5, "n_ctx": 10,
                             "unknown": 1}))
    s = Settings.load(p)
    assert s.temperature == Settings().temperature and s.top_p == 1.0
    assert s.theme == "system" and s.seed is None and s.backend == "auto" and s.n_ctx == 128
    assert s.gpu_layers == -1
    p.write_text(json.dumps({"backend": "cuda:1", "gpu_layers": "12"}))
    assert (Settings.load(p).backend, Settings.load(p).gpu_layers) == ("cuda:1", 12)
    p.write_text("{broken")
    assert Settings.load(p) == Settings()


def test_dialog_edits_and_persists(qtbot, data_dir):
    from ember.engine import backend_devices
    from ember.ui.settings_dialog import SettingsDialog
    win = make_window(qtbot, data_dir, restore_last=False)
    seen = []

    def handle():
        dlg = QApplication.activeModalWidget()
        seen.append(dlg)
        assert dlg is not None and dlg.objectName() == "settingsDialog"
        backend = dlg.findChild(QComboBox, "backend")
        model = backend.model()
        # whatever this process's engine has: each backend that cannot run is greyed out
        for d in backend_devices():
            if not d.usable:
                item = model.item(backend.findData(d.backend))
                assert not item.isEnabled() and item.toolTip() == d.reason
        dlg.temperature.setValue(1.3)
        dlg.random_seed.setChecked(False)
        dlg.seed.setValue(42)
        dlg.theme.setCurrentIndex(dlg.theme.findData("dark"))
        dlg.font_size.setValue(13)
        dlg.context_policy.setCurrentIndex(dlg.context_policy.findData("stop"))
        dlg.prompt_lookup.setChecked(True)
        dlg.accept()

    QTimer.singleShot(200, handle)
    win.activateWindow()
    win.findChild(type(win.menuBar().actions()[0]), "actionSettings").trigger()  # Ctrl+,
    assert seen and isinstance(seen[0], SettingsDialog)
    s = Settings.load(data_dir / "settings.json")
    assert (s.temperature, s.seed, s.theme, s.font_size, s.context_policy) == \
        (1.3, 42, "dark", 13, "stop")
    assert s.prompt_lookup is True
    assert win.chat._speculative().lookup  # the sessions of the replies that follow draft
    assert win.colors["name"] == "dark"
    assert QApplication.instance().font().pointSize() == 13
    assert win.findChild(type(win.menuBar().actions()[0]), "actionSettings").shortcut() \
        .toString() == "Ctrl+,"


def test_dialog_cancel_changes_nothing(qtbot, data_dir):
    win = make_window(qtbot, data_dir, restore_last=False)
    before = (data_dir / "settings.json").read_text()

    def handle():
        dlg = QApplication.activeModalWidget()
        dlg.temperature.setValue(2.0)
        dlg.reject()

    QTimer.singleShot(200, handle)
    win.open_settings()
    assert win.settings.temperature == 0.0
    assert json.loads((data_dir / "settings.json").read_text())["temperature"] == \
        json.loads(before)["temperature"]
    assert isinstance(QDialog, type)


def _text_colour(img, rect) -> QColor:
    """The colour of the row's text: its pixel farthest from the row's background."""
    bg = QColor(img.pixel(rect.left() + 1, rect.center().y()))
    best, far = bg, -1
    for x in range(max(rect.left(), 0), min(rect.right(), img.width() - 1)):
        for y in range(max(rect.top(), 0), min(rect.bottom(), img.height() - 1)):
            c = QColor(img.pixel(x, y))
            d = abs(c.lightness() - bg.lightness())
            if d > far:
                best, far = c, d
    return best


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_a_backend_that_cannot_run_looks_disabled_in_the_list(qtbot, data_dir, theme):
    """Issue 45, bug 16: the greyed-out Run on entry was drawn like the others."""
    from ember.engine import BackendDevice
    from ember.ui.settings_dialog import SettingsDialog
    from ember.ui.theme import DARK, LIGHT
    s = Settings.load(data_dir / "settings.json")
    s.theme = theme
    s.save(data_dir / "settings.json")
    win = make_window(qtbot, data_dir, restore_last=False)
    cpu = BackendDevice("cpu", "CPU", 0, True, 1, "a CPU", 0, 0, "", "")
    cuda = BackendDevice("cuda", "CUDA", -1, False, 0, "", 0, 0, "no driver", "libcuda")
    dlg = SettingsDialog(win.settings, win, devices=[cpu, cuda])
    qtbot.addWidget(dlg)
    dlg.show()
    combo = find(dlg, QComboBox, "backend")
    combo.showPopup()
    qtbot.wait(50)
    view, model = combo.view(), combo.model()
    rows = {combo.itemText(i): i for i in range(combo.count())}
    off = next(i for i in range(combo.count()) if not model.item(i).isEnabled())
    on = rows["CPU"]
    img = view.viewport().grab().toImage()
    ratio = img.devicePixelRatio()
    def rect(i):
        r = view.visualRect(model.index(i, 0))
        return type(r)(int(r.x() * ratio), int(r.y() * ratio), int(r.width() * ratio),
                       int(r.height() * ratio))
    c = DARK if theme == "dark" else LIGHT
    enabled, disabled = _text_colour(img, rect(on)), _text_colour(img, rect(off))
    bg = QColor(c["surface"])
    # the disabled entry's text is much closer to the background than an enabled one's
    assert abs(enabled.lightness() - bg.lightness()) - abs(disabled.lightness()
                                                           - bg.lightness()) >= 40, \
        (enabled.name(), disabled.name(), bg.name())
    combo.hidePopup()
