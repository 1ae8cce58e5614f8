"""The app under stress: killed mid-answer (the partial reply survives in the
database), never touching the network, and logging unhandled errors to a file."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from PySide6.QtWidgets import QLabel, QWidget

from tests.support.ui import (  # noqa: F401
    data_dir,
    find,
    load_by_drop,
    make_window,
    type_and_send,
    write_settings,
)

pytestmark = pytest.mark.native
REPO = Path(__file__).resolve().parents[2]

CHILD = textwrap.dedent("""
    import os, sys
    os.environ["QT_QPA_PLATFORM"] = "offscreen"
    from PySide6.QtCore import QTimer
    from ember.ui.app import create_application
    from ember.ui.main_window import MainWindow
    app = create_application()
    win = MainWindow(sys.argv[1], open_model=sys.argv[2])
    win.show()
    def progress(msg_id, text):
        if len(text) >= 12:  # committed to the database: tell the parent, keep generating
            print("PARTIAL", msg_id, repr(text), flush=True)
    win.reply_progress.connect(progress)
    win.model_loaded.connect(lambda _p: win.send("Tell me a long story about a dragon."))
    app.exec()
""")


def test_killed_mid_answer_keeps_the_partial_reply(qtbot, data_dir, starter_model_path):
    write_settings(data_dir, max_new_tokens=400)
    env = dict(os.environ, EMBER_DATA_DIR=str(data_dir),
               PYTHONPATH=os.pathsep.join([str(REPO / "app"), str(REPO)]))
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(data_dir), str(starter_model_path)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = ""
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            line = child.stdout.readline()
            if line.startswith("PARTIAL") or not line:
                break
        assert line.startswith("PARTIAL"), child.stderr.read() if child.poll() else line
        _, msg_id, seen = line.split(" ", 2)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == -signal.SIGKILL
    seen = eval(seen)  # the repr the child printed

    from ember.storage.store import Store
    store = Store(data_dir / "history.sqlite3")
    msg = store.message(int(msg_id))
    assert msg.role == "assistant" and not msg.complete
    assert msg.content.startswith(seen)
    store.close()

    # restarting shows it, marked as interrupted, and the app works on
    win = make_window(qtbot, data_dir, restore_last=False)
    last = win.chat_view.messages()[-1]
    assert last.msg_id == int(msg_id) and last.content == msg.content
    assert "interrupted" in last.body.toPlainText()


def test_no_network_during_a_full_chat(qtbot, data_dir, starter_model_path, monkeypatch):
    attempts = []

    def refuse(*args, **kwargs):
        attempts.append(args)
        raise OSError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    win = make_window(qtbot, data_dir)
    load_by_drop(qtbot, win, starter_model_path)
    stats = type_and_send(qtbot, win, "Hello!")
    assert stats["generated_tokens"] > 0
    win.close()
    assert attempts == []


@pytest.mark.qt_no_exception_capture  # the hook under test chains to the previous one
def test_unhandled_errors_are_logged_and_shown(qtbot, data_dir):
    from ember.ui import crash
    win = make_window(qtbot, data_dir, restore_last=False)
    old_hook = sys.excepthook
    try:
        crash.install(on_error=win.show_crash)
        try:
            raise RuntimeError("boom in a slot")
        except RuntimeError:
            sys.excepthook(*sys.exc_info())
    finally:
        sys.excepthook = old_hook
    log = (data_dir / "logs" / "ember.log").read_text()
    assert "boom in a slot" in log and "Traceback" in log
    assert find(win, QWidget, "errorBanner").isVisible()
    text = find(win, QLabel, "errorText").text()
    assert "boom in a slot" in text and str(data_dir / "logs" / "ember.log") in text
