"""Where the app runs a model: Settings' Run on and GPU layers, the load that uses them and
the status bar that says where the model runs. The engine reads its backend registry once
per process, so the scenarios with the test backend (libember-test.so) run the window in a
process of their own (tests/support/ui_backend_driver.py); the choices and the status line are
also checked here on device rows made up for the purpose."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from ember.engine import BackendDevice
from ember.placement import resolve, run_on_choices, status_line, unavailable_text
from ember.storage.settings import Settings
from PySide6.QtWidgets import QComboBox, QLabel, QSpinBox

from tests.conftest import REPO_ROOT, require_native_lib
from tests.engine.test_backends import TEST_ENV_KEYS, test_backend_library
from tests.support.ui import data_dir, write_settings  # noqa: F401

DRIVER = REPO_ROOT / "tests" / "support" / "ui_backend_driver.py"
NO_CUDA = ("this Ember has no CUDA backend (libember-cuda.so is not installed next to the "
           "engine)")


def row(backend, device, usable=True, name="", total=0, free=0, reason="", label=None):
    return BackendDevice(backend, label or backend.upper(), device, usable, 0, name, total, free,
                         reason, "")


ROWS = [row("cpu", 0, name="AMD EPYC (AVX2)", label="CPU"),
        row("cuda", 0, name="NVIDIA H200", total=140 << 30, free=138 << 30, label="CUDA"),
        row("cuda", 1, name="NVIDIA L4", total=24 << 30, free=12 << 30, label="CUDA"),
        row("metal", -1, usable=False, reason="Metal runs on macOS only", label="Metal")]


def test_choices_list_auto_cpu_each_device_then_the_unusable_with_their_reason():
    got = [(c.selector, c.label, c.usable) for c in run_on_choices(ROWS)]
    assert got == [("auto", "Auto (the best GPU, else the CPU)", True),
                   ("cpu", "CPU", True),
                   ("cuda:0", "CUDA 0: NVIDIA H200 (138.0 GB free)", True),
                   ("cuda:1", "CUDA 1: NVIDIA L4 (12.0 GB free)", True),
                   ("metal", "Metal: unavailable", False)]
    assert run_on_choices(ROWS)[-1].tooltip == "Metal runs on macOS only"
    assert unavailable_text(ROWS) == "Metal is unavailable: Metal runs on macOS only."
    # one device of a backend is named without its index
    assert run_on_choices(ROWS[:2])[2].label == "CUDA: NVIDIA H200 (138.0 GB free)"


def test_a_saved_device_that_is_gone_stays_a_choice():
    choices = run_on_choices(ROWS, saved="cuda:2")
    assert [c.selector for c in choices] == ["auto", "cpu", "cuda:0", "cuda:1", "cuda:2", "metal"]
    assert choices[4].label == "cuda:2 (not found now)" and choices[4].usable


def test_a_backend_this_install_lacks_runs_as_auto_with_a_note():
    assert resolve("cuda:1", ROWS) == ("cuda:1", "")
    assert resolve("cpu", ROWS) == ("cpu", "")
    assert resolve("test:0", ROWS) == ("auto", "no backend 'test' in this Ember (Run on: Auto used)")


def test_status_line_shortens_the_note_and_keeps_it_whole_in_the_tooltip():
    assert status_line("CUDA: NVIDIA H200, 31/31 layers", "") == \
        ("CUDA: NVIDIA H200, 31/31 layers", "Where the model runs: CUDA: NVIDIA H200, 31/31 layers")
    assert status_line("CPU (AVX2)", "CUDA: no driver")[0] == "CPU (AVX2) — CUDA: no driver"
    text, tip = status_line("CPU (AVX2)", f"CUDA: {NO_CUDA}")
    assert text == "CPU (AVX2) — CUDA: this Ember has no CUDA backend"
    assert tip == f"Where the model runs: CPU (AVX2)\nCUDA: {NO_CUDA}"
    note = (f"CUDA: {NO_CUDA}; Test: too little memory on Ember test device 0 (12 MiB needed "
            "for one layer and the buffers, plus a 32 MiB margin; 1 MiB free)")
    text, tip = status_line("CPU (AVX2)", note)
    assert text == "CPU (AVX2) — CUDA: this Ember has no CUDA backend; Test: too little memory…"
    assert tip.endswith(note)
    # a note short enough is shown whole, its parentheses too
    assert status_line("Test: Ember test device 0, 1/31 layers",
                       "30 layers kept on the CPU (Test has no mul_mat of Q4_1)")[0] == \
        "Test: Ember test device 0, 1/31 layers — 30 layers kept on the CPU (Test has no " \
        "mul_mat of Q4_1)"


def test_dialog_offers_the_devices_and_gpu_layers_follow_the_choice(qtbot):
    from ember.ui.settings_dialog import SettingsDialog
    dlg = SettingsDialog(Settings(backend="cuda:1", gpu_layers=12), devices=ROWS, max_layers=31)
    qtbot.addWidget(dlg)
    combo = dlg.findChild(QComboBox, "backend")
    layers = dlg.findChild(QSpinBox, "gpuLayers")
    assert combo.currentData() == "cuda:1" and layers.value() == 12 and layers.isEnabled()
    metal = combo.model().item(combo.findData("metal"))
    assert not metal.isEnabled() and metal.toolTip() == "Metal runs on macOS only"
    assert dlg.findChild(QLabel, "backendNote").text() == \
        "Metal is unavailable: Metal runs on macOS only."
    assert (layers.minimum(), layers.maximum(), layers.specialValueText()) == \
        (-1, 31, "Auto (as many as fit)")
    combo.setCurrentIndex(combo.findData("cpu"))
    assert not layers.isEnabled()
    combo.setCurrentIndex(combo.findData("cuda:0"))
    layers.setValue(-1)
    s = dlg.result_settings()
    assert (s.backend, s.gpu_layers) == ("cuda:0", -1)
    dlg.restore_defaults()
    assert (dlg.result_settings().backend, dlg.result_settings().gpu_layers) == ("auto", -1)


def test_changing_gpu_layers_on_the_cpu_does_not_reload(qtbot, data_dir):  # noqa: F811
    from ember.ui.chat_controller import ChatController
    from ember.storage.store import Store
    ctl = ChatController(Store(data_dir / "h.sqlite3"), Settings(backend="cpu"),
                         data_dir / "settings.json")
    ctl.model_info = {"path": "/nowhere.gguf", "remote": False}
    opened = []
    ctl.open_model = opened.append
    ctl.apply_settings(Settings(backend="cpu", gpu_layers=5))
    assert opened == []
    ctl.apply_settings(Settings(backend="cuda:0", gpu_layers=5))
    assert opened == ["/nowhere.gguf"]
    ctl.apply_settings(Settings(backend="cuda:0", gpu_layers=7))
    assert opened == ["/nowhere.gguf"] * 2
    assert Settings.load(data_dir / "settings.json").gpu_layers == 7
    ctl.engine.shutdown()


# ---- the window in a process of its own, on the test backend ----------------------------

def drive(tmp_path, model, steps, env=None, backend_path=True, **settings):
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    write_settings(data, **settings)
    e = {k: v for k, v in os.environ.items() if k not in TEST_ENV_KEYS + ("EMBER_BACKEND_PATH",)}
    e.update(EMBER_LIB=str(require_native_lib()), EMBER_DATA_DIR=str(data),
             QT_QPA_PLATFORM="offscreen",
             PYTHONPATH=os.pathsep.join([str(REPO_ROOT / "app"), str(REPO_ROOT),
                                         os.environ.get("PYTHONPATH", "")]))
    if backend_path:
        e["EMBER_BACKEND_PATH"] = str(test_backend_library())
    e.update(env or {})
    spec = {"model": str(model), "data": str(data), "steps": steps}
    r = subprocess.run([sys.executable, str(DRIVER), json.dumps(spec)], env=e, cwd=tmp_path,
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    records = json.loads(r.stdout.strip().splitlines()[-1])
    for rec in records:
        assert rec.get("failed") is None, rec["failed"]
    return records


def choice(record, selector):
    return next(c for c in record["choices"] if c["selector"] == selector)


CPU_STATUS = re.compile(r"CPU \((scalar|AVX2|AVX-512|AVX512|NEON)\)", re.I)


@pytest.mark.native
def test_cpu_then_three_layers_on_the_test_device(tmp_path, starter_model_path):
    first, second = drive(tmp_path, starter_model_path,
                          [{"run_on": "cpu", "gpu_layers": -1},
                           {"run_on": "test:0", "gpu_layers": 3}])
    # the settings list the test device and the CUDA backend this build lacks, greyed out
    test = choice(first, "test:0")
    assert test["enabled"] and test["label"] == "Test: Ember test device 0 (64.0 GB free)"
    cuda = choice(first, "cuda")
    if not cuda["enabled"]:  # a build with libember-cuda.so beside it may have a usable one
        assert cuda["label"] == "CUDA: unavailable" and cuda["tooltip"]
        assert f"CUDA is unavailable: {cuda['tooltip']}." in first["note_line"]
    assert [c["selector"] for c in first["choices"][:3]] == ["auto", "cpu", "test:0"]
    # CPU: GPU layers off, nothing to say beside the CPU's summary
    assert not first["layers_enabled"] and first["saved"] == ["cpu", -1]
    assert CPU_STATUS.fullmatch(first["status"]), first["status"]
    assert first["status_tooltip"] == f"Where the model runs: {first['status']}"
    # the change reloads the model on the test device, 3 of its 31 layers (the head counted)
    assert second["layers_enabled"] and second["layers_max"] == 31
    assert second["saved"] == ["test:0", 3]
    assert second["status"] == "Test: Ember test device 0, 3/31 layers"


@pytest.mark.native
def test_a_backend_that_cannot_start_is_greyed_out_and_the_status_says_why(
        tmp_path, starter_model_path):
    [rec] = drive(tmp_path, starter_model_path, [{"run_on": "auto", "gpu_layers": -1}],
                  env={"EMBER_TEST_BACKEND_FAIL_INIT": "no driver"})
    test = choice(rec, "test")
    assert not test["enabled"] and test["label"] == "Test: unavailable"
    assert test["tooltip"] == "no driver"
    assert "Test is unavailable: no driver." in rec["note_line"]
    summary, _, note = rec["status"].partition(" — ")
    assert CPU_STATUS.fullmatch(summary), rec["status"]
    assert note, "the status line gives the reason after the summary"
    # the whole note is in the tooltip (the line is shortened: an unusable CUDA library's
    # reason may come first, where the build has one)
    assert rec["status_tooltip"].startswith(f"Where the model runs: {summary}\n")
    assert "Test: no driver" in rec["status_tooltip"]


@pytest.mark.native
def test_auto_on_a_small_device_says_how_many_layers_fit(tmp_path, starter_model_path):
    [rec] = drive(tmp_path, starter_model_path, [{"run_on": "auto", "gpu_layers": -1}],
                  env={"EMBER_TEST_BACKEND_MEMORY": str(100 << 20)})
    m = re.fullmatch(r"Test: Ember test device 0, (\d+)/31 layers — \1 of 31 layers fit in "
                     r"the [\d.]+ MiB free on Ember test device 0", rec["status"])
    assert m and 1 < int(m[1]) < 31, rec["status"]
    assert rec["status_tooltip"] == f"Where the model runs: {rec['status'].replace(' — ', chr(10))}"


@pytest.mark.native
def test_a_saved_backend_this_install_lacks_loads_as_auto(tmp_path, starter_model_path):
    [rec] = drive(tmp_path, starter_model_path, [{"run_on": "test:0", "gpu_layers": 3}],
                  backend_path=False, backend="test:0", gpu_layers=3)
    assert choice(rec, "test:0")["label"] == "test:0 (not found now)"
    assert rec["saved"] == ["test:0", 3]  # kept: the device may come back
    assert "no backend 'test' in this Ember" in rec["status"]
    assert "no backend 'test' in this Ember (Run on: Auto used)" in rec["status_tooltip"]
