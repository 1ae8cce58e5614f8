"""The app's engine thread: loads and replies all run on one long-lived thread, each
request has its own cancel token (a Stop does not leak into the next reply), and a
closed window leaves no timer that could touch its closed store."""
from __future__ import annotations

import threading

import pytest
from PySide6.QtCore import QThread

from tests.support.ui import (  # noqa: F401
    GEN_TIMEOUT_MS,
    data_dir,
    load_by_drop,
    make_window,
    type_and_send,
)

pytestmark = pytest.mark.native


def test_loads_and_replies_run_on_one_engine_thread(qtbot, data_dir, starter_model_path,
                                                    monkeypatch):
    from ember.chat import ChatTemplate
    from ember.engine import Session
    threads = []
    real_template = ChatTemplate.from_metadata.__func__
    monkeypatch.setattr(ChatTemplate, "from_metadata", classmethod(
        lambda cls, *a, **k: threads.append(("load", QThread.currentThread()))
        or real_template(cls, *a, **k)))
    real_generate = Session.generate

    def generate(self, *a, **k):
        threads.append(("reply", QThread.currentThread()))
        return real_generate(self, *a, **k)

    monkeypatch.setattr(Session, "generate", generate)
    win = make_window(qtbot, data_dir)
    load_by_drop(qtbot, win, starter_model_path)
    type_and_send(qtbot, win, "Hi")
    type_and_send(qtbot, win, "And again")
    load_by_drop(qtbot, win, starter_model_path, target=win)
    assert [k for k, _ in threads] == ["load", "reply", "reply", "load"]
    assert all(t is win.engine.thread for _, t in threads)
    assert win.engine.thread is not QThread.currentThread()
    assert win.engine.thread.isRunning()


def test_a_stop_does_not_leak_into_the_next_reply(qtbot, data_dir, starter_model_path):
    win = make_window(qtbot, data_dir)
    load_by_drop(qtbot, win, starter_model_path)
    gate = threading.Event()
    real = win.session.generate

    def held(*a, **kw):
        it = real(*a, **kw)
        try:
            for i, piece in enumerate(it):
                yield piece
                if i == 0:
                    gate.wait(120)  # a safety net for a broken test, not a time limit
        finally:
            it.close()

    win.session.generate = held
    a = win.new_chat()
    win.send("Hello")
    qtbot.waitUntil(lambda: win.chat.reply is not None and win.chat.reply.first is not None,
                    timeout=GEN_TIMEOUT_MS)
    first_job = win.gen_job
    b = win.new_chat()
    win.send("Hi")  # queued behind a
    win.select_conversation(a)
    with qtbot.waitSignal(win.generation_finished, timeout=GEN_TIMEOUT_MS) as stopped:
        win.stop_current()
        gate.set()
    assert stopped.args[0]["conv_id"] == a and stopped.args[0]["stop_reason"] == "cancelled"
    assert first_job.token.cancelled
    with qtbot.waitSignal(win.generation_finished, timeout=GEN_TIMEOUT_MS) as second:
        pass
    assert second.args[0]["conv_id"] == b
    assert second.args[0]["stop_reason"] in ("eog", "length", "stop_string")
    assert second.args[0]["generated_tokens"] >= 1
    assert not win.gen_job or not win.gen_job.token.cancelled


def test_closing_with_an_undo_pending_purges_and_stops_its_timers(qtbot, data_dir):
    from ember.storage.store import Store
    win = make_window(qtbot, data_dir, restore_last=False)
    keep = win.store.create_conversation("keep")
    gone = win.store.create_conversation("gone")
    win.refresh_conversations()
    win.delete_conversation(gone)
    assert win._undo_timer.isActive()
    win.close()
    assert not any(t.isActive() for t in (win._undo_timer, win._status_timer,
                                          win.chat.flush_timer, win._system_timer))
    assert not win.engine.thread.isRunning()
    s = Store(data_dir / "history.sqlite3")
    try:
        assert [c.id for c in s.conversations()] == [keep]
        assert s.conversation(gone) is None
    finally:
        s.close()


def test_an_app_that_quits_without_closing_the_window_ends_the_engine_thread(tmp_path):
    """app.quit() with the window still open: the engine thread ends at aboutToQuit (Qt
    otherwise destroys a running QThread: a warning, and a crash at worst)."""
    import os
    import subprocess
    import sys
    from pathlib import Path
    script = tmp_path / "quit.py"
    script.write_text(
        "import sys\n"
        "from PySide6.QtCore import QTimer\n"
        "from ember.ui.app import create_application\n"
        "from ember.ui.main_window import MainWindow\n"
        "app = create_application()\n"
        "w = MainWindow(sys.argv[1], restore_last=False)\n"
        "w.show()\n"
        "QTimer.singleShot(0, app.quit)\n"
        "app.exec()\n"
        "print('running' if w.engine.thread.isRunning() else 'ended', flush=True)\n")
    app_dir = Path(__file__).resolve().parents[2] / "app"
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(app_dir))
    r = subprocess.run([sys.executable, str(script), str(tmp_path / "data")], env=env,
                       capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ended"
    assert "Destroyed while thread" not in r.stderr
