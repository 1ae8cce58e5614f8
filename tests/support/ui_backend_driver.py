"""Drives the app's window in a process of its own for tests/ui/test_ui_placement.py (not a
test module): the engine reads its backend registry once per process, from
EMBER_BACKEND_PATH and the EMBER_TEST_BACKEND_* settings, so each situation needs a fresh one.

    python tests/support/ui_backend_driver.py SPEC_JSON

SPEC: {"model": path, "data": data folder, "steps": [{"run_on": "cpu", "gpu_layers": -1}, ...]}
Each step opens Settings as the menu does, records what the Run on and GPU layers controls
offer, picks the step's choice and presses OK; the first step then opens the model, later
ones wait for the reload the change starts. After each load it records the status bar's
backend label. Prints one JSON line with a record per step; exit 3: a wait never ended."""
from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

WAIT_MS = 300_000  # a guard against a hang, not a time limit on the app


def main() -> int:
    spec = json.loads(sys.argv[1])
    from PySide6.QtCore import QEventLoop, QTimer
    from PySide6.QtWidgets import QApplication, QComboBox, QLabel, QSpinBox

    from ember.storage.settings import Settings
    from ember.ui.app import create_application
    from ember.ui.main_window import MainWindow

    create_application()
    win = MainWindow(spec["data"], restore_last=False)
    win.show()

    def wait_load() -> str | None:
        """None once the model has loaded, the error text when it failed."""
        loop, got = QEventLoop(), []
        def loaded(_path):
            got.append(None)
            loop.quit()

        def failed(text):
            got.append(text)
            loop.quit()

        win.model_loaded.connect(loaded)
        win.model_failed.connect(failed)
        QTimer.singleShot(WAIT_MS, loop.quit)
        loop.exec()
        win.model_loaded.disconnect(loaded)
        win.model_failed.disconnect(failed)
        if not got:
            print("a wait never ended", flush=True)
            os._exit(3)
        return got[0]

    def settings_step(step: dict, record: dict) -> None:
        dlg = QApplication.activeModalWidget()
        if dlg is None or dlg.objectName() != "settingsDialog":
            QTimer.singleShot(20, lambda: settings_step(step, record))
            return
        combo = dlg.findChild(QComboBox, "backend")
        layers = dlg.findChild(QSpinBox, "gpuLayers")
        items = combo.model()
        record["choices"] = [{"label": combo.itemText(i), "selector": combo.itemData(i),
                              "enabled": items.item(i).isEnabled(),
                              "tooltip": items.item(i).toolTip()} for i in range(combo.count())]
        note = dlg.findChild(QLabel, "backendNote")
        record["note_line"] = note.text() if note is not None else None
        record["layers_max"] = layers.maximum()
        combo.setCurrentIndex(combo.findData(step["run_on"]))
        layers.setValue(step["gpu_layers"])
        record["layers_enabled"] = layers.isEnabled()
        dlg.accept()

    records = []
    for step in spec["steps"]:
        record: dict = {}
        QTimer.singleShot(0, lambda step=step, record=record: settings_step(step, record))
        win.open_settings()
        saved = Settings.load(os.path.join(spec["data"], "settings.json"))
        record["saved"] = [saved.backend, saved.gpu_layers]
        if win.model_info is None:
            win.open_model_path(spec["model"])
        if win.loading:
            record["failed"] = wait_load()
        label = win.findChild(QLabel, "statusBackend")  # an ElidedLabel: its whole text
        record["status"] = label.full_text()
        record["status_tooltip"] = label.toolTip()
        records.append(record)
    print(json.dumps(records), flush=True)
    win.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
