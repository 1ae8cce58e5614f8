"""`ember` where Qt cannot open a window (DISPLAY set but no X server, or the xcb plugin's
system libraries missing) says why and falls back to the terminal chat, instead of Qt
aborting the process with a message about xcb-cursor0."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ember import display_check
from tests.support.server_process import APP

DEAD_DISPLAY = ":99"

LDD = """\
\tlinux-vdso.so.1 (0x00007ffd)
\tlibQt6XcbQpa.so.6 => /opt/Qt/lib/libQt6XcbQpa.so.6 (0x00007f3e)
\tlibxcb-icccm.so.4 => not found
\tlibxcb-cursor.so.0 => /lib/x86_64-linux-gnu/libxcb-cursor.so.0 (0x00007f3e)
\tlibxcb-keysyms.so.1 => not found
\tlibxcb-icccm.so.4 => not found
"""


def test_ldd_not_found_lines_are_the_missing_libraries():
    assert display_check.unresolved_libraries(LDD) == ["libxcb-icccm.so.4",
                                                        "libxcb-keysyms.so.1"]


@pytest.mark.parametrize("soname, package", [
    ("libxcb-icccm.so.4", "libxcb-icccm4"), ("libxcb-keysyms.so.1", "libxcb-keysyms1"),
    ("libxcb-cursor.so.0", "libxcb-cursor0"), ("libxkbcommon-x11.so.0", "libxkbcommon-x11-0"),
    ("libX11-xcb.so.1", "libx11-xcb1"), ("libxcb-render-util.so.0", "libxcb-render-util0")])
def test_a_missing_library_is_named_by_its_debian_package(soname, package):
    assert display_check.debian_package(soname) == package


@pytest.fixture
def dead_display():
    if not sys.platform.startswith("linux"):
        pytest.skip("X11 only")
    if display_check.display_reachable(DEAD_DISPLAY):
        pytest.skip(f"an X server answers on {DEAD_DISPLAY}")
    return DEAD_DISPLAY


def test_missing_libraries_are_named_with_the_command_that_installs_them(monkeypatch):
    monkeypatch.setattr(display_check, "missing_xcb_libraries",
                        lambda plugin: ["libxcb-icccm.so.4", "libxcb-keysyms.so.1"])
    why = display_check.why_no_window({"DISPLAY": ":0"})
    assert why is not None and "sudo apt install libxcb-icccm4 libxcb-keysyms1" in why
    assert "cursor" not in why


def test_a_display_nobody_answers_on_is_named(monkeypatch, dead_display):
    monkeypatch.setattr(display_check, "missing_xcb_libraries", lambda plugin: [])
    assert display_check.why_no_window({"DISPLAY": dead_display}) == (
        "cannot open the display ':99' (no X server answers there, or it refused the "
        "connection)")
    assert display_check.why_no_window({"DISPLAY": dead_display,
                                        "QT_QPA_PLATFORM": "offscreen"}) is None


def _unusable_display_env(tmp_path, display: str) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("QT_QPA_PLATFORM", "WAYLAND_DISPLAY")}
    env.update(DISPLAY=display, HOME=str(tmp_path), XDG_DATA_HOME=str(tmp_path / "data"),
               XDG_CONFIG_HOME=str(tmp_path / "config"),
               PYTHONPATH=os.pathsep.join([APP, env.get("PYTHONPATH", "")]))
    return env


@pytest.mark.native
def test_the_self_test_on_an_unusable_display_fails_with_the_reason(tmp_path, dead_display,
                                                                   starter_model_path):
    r = subprocess.run([sys.executable, "-m", "ember", "--self-test", str(starter_model_path)],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       env=_unusable_display_env(tmp_path, dead_display))
    assert r.returncode == 1, r.stderr  # not Qt's abort (-6)
    assert "ember self-test: FAIL: the app cannot open a window: " in r.stdout
    assert "xcb-cursor0" not in r.stderr


@pytest.mark.native
def test_ember_on_an_unusable_display_falls_back_to_the_terminal_chat(tmp_path, dead_display,
                                                                     starter_model_path):
    r = subprocess.run([sys.executable, "-m", "ember", str(starter_model_path)],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       env=_unusable_display_env(tmp_path, dead_display))
    assert r.returncode == 0, r.stderr  # Qt's abort was -6 (exit 134 from a shell)
    assert "xcb-cursor0" not in r.stderr
    lines = r.stderr.splitlines()
    why = lines[0]
    assert why.startswith("ember: the desktop app cannot open a window: ")
    missing = display_check.missing_xcb_libraries(display_check.xcb_plugin())
    if missing:  # this machine lacks the plugin's libraries: they are named, with packages
        assert all(m in why for m in missing)
        assert "sudo apt install " + display_check.debian_package(missing[0]) in why
    else:
        assert "cannot open the display ':99'" in why
    assert lines[1] == "ember: starting a terminal chat instead"
    assert any(line.startswith("llama model, ") for line in lines)  # the chat loaded it
    assert r.stdout == "\n> "  # its prompt, then EOF on stdin ends it
