"""Quitting the real app process after a long reply exits with code 0.

PySide6-Essentials 6.12.0 aborts at interpreter exit once a process has handled many
events ("Fatal Python error: bool_dealloc", exit code 134): a few hundred streamed tokens
are enough. The dependency declarations exclude that release; this test runs the app as a
user does (`ember MODEL.gguf`, offscreen), streams a reply of a few hundred tokens, quits
by Ctrl+Q, by File > Quit and by closing the window, and asserts the exit code."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support.ui import write_settings

pytestmark = pytest.mark.native

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DRIVER = os.path.join(REPO, "tests", "support", "ui_quit_driver.py")
N_TOKENS = 300


@pytest.mark.parametrize("how", ["shortcut", "action", "close"])
def test_quit_after_a_long_reply_exits_0(tmp_path, starter_model_path, how):
    data = tmp_path / "data"
    data.mkdir()
    # greedy, no repeat penalty: SmolLM2 writes past N_TOKENS, so the reply is that long
    write_settings(data, max_new_tokens=N_TOKENS, n_ctx=1024)
    env = dict(os.environ, EMBER_DATA_DIR=str(data), QT_QPA_PLATFORM="offscreen",
               PYTHONPATH=os.pathsep.join([os.path.join(REPO, "app"), REPO,
                                           os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, DRIVER, str(starter_model_path),
                           "Write a story about a dog in 5 sentences.", how],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert f"reply: {N_TOKENS} tokens" in proc.stdout, out
    assert proc.returncode == 0, f"exit code {proc.returncode}:\n{out[-3000:]}"
    # the quit went through the window's own close: settings saved, history closed cleanly
    assert "window closed" in (data / "logs" / "ember.log").read_text(encoding="utf-8")
