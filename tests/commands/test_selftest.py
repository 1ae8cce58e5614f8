"""`ember --self-test` ends with a verdict on a first run and when Qt cannot start: it never
waits forever (a frozen Windows build that lacks its Qt platform plugin stopped in Qt's
message box before the check; a hang anywhere else ends with every thread's stack)."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ember.commands import selftest

REPO = Path(__file__).resolve().parents[2]


def _ember(args: list[str], env: dict, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ember", *args], capture_output=True,
                          text=True, timeout=timeout, env=env, check=False)


def _env(tmp_path: Path, native_lib: Path, **extra: str) -> dict:
    """A user who never ran Ember: home, data and config folders that do not exist yet."""
    home = tmp_path / "home-not-created"
    env = dict(os.environ, PYTHONPATH=str(REPO / "app"), EMBER_LIB=str(native_lib),
               HOME=str(home), XDG_DATA_HOME=str(home / ".local" / "share"),
               XDG_CONFIG_HOME=str(home / ".config"), XDG_CACHE_HOME=str(home / ".cache"),
               LOCALAPPDATA=str(home / "AppData" / "Local"), EMBER_SELFTEST_TIMEOUT="120")
    env.pop("EMBER_DATA_DIR", None)
    env.update(extra)
    return env


def test_plugin_found_by_its_file_name_on_each_system(tmp_path):
    for i, name in enumerate(("qwindows.dll", "libqxcb.so", "libqcocoa.dylib")):
        folder = tmp_path / f"plugins{i}"
        (folder / "platforms").mkdir(parents=True)
        (folder / "platforms" / name).write_bytes(b"")
        platform = name.split(".")[0].removeprefix("lib")[1:]
        assert selftest.missing_platform_plugin(platform, [str(tmp_path / "none"),
                                                           str(folder)]) is None
        why = selftest.missing_platform_plugin("offscreen", [str(folder)])
        assert why is not None and "'offscreen'" in why and str(folder) in why
    assert selftest.missing_platform_plugin(None, []) is None  # Linux: Qt chooses


def test_platform_name_is_the_first_choice_without_its_options(monkeypatch):
    monkeypatch.setenv("QT_QPA_PLATFORM", "windows:darkmode=1;offscreen")
    assert selftest._platform_name() == "windows"


@pytest.mark.native
def test_missing_platform_plugin_fails_at_once_instead_of_in_qt(tmp_path, native_lib,
                                                                starter_model_path):
    # Qt itself aborts here on Linux (and shows a message box nobody sees on Windows)
    t0 = time.perf_counter()
    r = _ember(["--self-test", str(starter_model_path)],
               _env(tmp_path, native_lib, QT_QPA_PLATFORM="nosuchplatform"))
    assert r.returncode == 1, r.stderr
    assert "ember self-test: FAIL: no Qt platform plugin 'nosuchplatform'" in r.stdout
    assert time.perf_counter() - t0 < 60


@pytest.mark.native
def test_first_run_self_test_passes_and_leaves_no_data_folder(tmp_path, native_lib,
                                                             starter_model_path):
    env = _env(tmp_path, native_lib, QT_QPA_PLATFORM="offscreen")
    r = _ember(["--self-test", str(starter_model_path)], env)
    assert r.returncode == 0, r.stdout + r.stderr
    line = next(ln for ln in r.stdout.splitlines() if "self-test:" in ln)
    assert line.startswith("ember self-test: PASS: window on Qt 'offscreen'")
    assert "8 tokens streamed" in line
    # a throwaway data folder: the user's own is not created by the self test
    assert not (Path(env["XDG_DATA_HOME"]) / "ember").exists()


def test_watchdog_prints_every_stack_and_ends_the_process():
    code = ("import threading, time\n"
            "from ember.commands import selftest\n"
            "selftest.WATCHDOG_S = 1\n"
            "selftest._arm_watchdog()\n"
            "def stuck_worker(): time.sleep(60)\n"
            "threading.Thread(target=stuck_worker, daemon=True).start()\n"
            "time.sleep(60)\n")
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=50, env=dict(os.environ, PYTHONPATH=str(REPO / "app")),
                       check=False)
    assert r.returncode == 1
    assert "Timeout (0:00:01)!" in r.stderr
    assert "in stuck_worker" in r.stderr and 'File "<string>", line 7' in r.stderr
    assert time.perf_counter() - t0 < 30
