"""Drives the real app process for tests/ui/test_ui_quit.py (not a test module itself).

    python tests/support/ui_quit_driver.py MODEL.gguf PROMPT HOW

Starts Ember the way `ember MODEL.gguf` does (ember.commands.cli.main, so ember.ui.app.run_app and
QApplication.exec), sends PROMPT once the model has loaded, and when the reply has finished
quits the way a user does: HOW is "shortcut" (Ctrl+Q pressed on the window), "action" (the
File > Quit menu action) or "close" (the window's close button: a close event). Prints a
line "reply: N tokens, M chunks" and exits with whatever the app's process exits with,
which must be 0. Exit code 3 means the quit never happened (the driver gave up)."""
from __future__ import annotations

import os
import sys

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


def main() -> int:
    model, prompt, how = sys.argv[1], sys.argv[2], sys.argv[3]
    from PySide6.QtCore import Qt, QTimer
    from PySide6.QtGui import QAction
    from PySide6.QtTest import QTest
    from PySide6.QtWidgets import QApplication

    from ember.commands import cli
    from ember.ui.app import create_application
    from ember.ui.main_window import MainWindow

    app = create_application()
    seen = {"chunks": 0}

    def window() -> MainWindow:
        return next(w for w in QApplication.topLevelWidgets() if isinstance(w, MainWindow))

    def quit_now() -> None:
        win = window()
        print(f"reply: {seen.get('tokens')} tokens, {seen['chunks']} chunks", flush=True)
        if how == "shortcut":
            win.activateWindow()
            QTest.keyClick(win, Qt.Key_Q, Qt.ControlModifier)
        elif how == "action":
            win.findChild(QAction, "actionQuit").trigger()
        else:
            win.close()

    def on_finished(stats: dict) -> None:
        seen["tokens"] = stats["generated_tokens"]
        QTimer.singleShot(50, quit_now)

    def on_loaded(_path: str) -> None:
        win = window()
        win.reply_progress.connect(lambda *_: seen.__setitem__("chunks", seen["chunks"] + 1))
        win.generation_finished.connect(on_finished)
        if not win.send(prompt):
            print("the window refused to send", flush=True)
            os._exit(4)

    def start() -> None:
        win = window()
        win.model_failed.connect(lambda msg: (print(msg, flush=True), os._exit(5)))
        if win.model is not None:
            on_loaded("")
        else:
            win.model_loaded.connect(on_loaded)

    def give_up() -> None:
        print("the app did not quit", flush=True)
        os._exit(3)

    QTimer.singleShot(0, start)
    QTimer.singleShot(int(os.environ.get("EMBER_DRIVER_TIMEOUT_S", "240")) * 1000, give_up)
    return cli.main([model])


if __name__ == "__main__":
    sys.exit(main())
