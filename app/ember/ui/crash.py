"""Logging to a rotating file in the data folder, and a last-resort handler for
unhandled exceptions (UI thread and worker threads) and native crashes."""
from __future__ import annotations

import faulthandler
import logging
import sys
import threading
import traceback
from collections.abc import Callable
from logging.handlers import RotatingFileHandler
from pathlib import Path

log = logging.getLogger("ember")
_fault_file = None


def log_dir(data_dir: Path) -> Path:
    d = Path(data_dir) / "logs"
    d.mkdir(parents=True, exist_ok=True)
    return d


def setup_logging(data_dir: Path) -> Path:
    """Sends the 'ember' logger to logs/ember.log (1 MB, 3 backups); native crashes
    (segfaults) go to logs/crash.log through faulthandler. Returns the log path."""
    global _fault_file
    path = log_dir(data_dir) / "ember.log"
    for h in list(log.handlers):
        if isinstance(h, RotatingFileHandler):
            if Path(h.baseFilename) == path:
                return path
            log.removeHandler(h)
            h.close()
    handler = RotatingFileHandler(path, maxBytes=1_000_000, backupCount=3, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    try:
        if _fault_file is not None:
            _fault_file.close()
        _fault_file = open(log_dir(data_dir) / "crash.log", "a", encoding="utf-8")  # noqa: SIM115
        faulthandler.enable(_fault_file)
    except (OSError, RuntimeError):
        pass
    return path


def close_logging() -> None:
    """Closes the files setup_logging opened, so their folder can be deleted (Windows
    deletes no open file: the self test's throwaway data folder)."""
    global _fault_file
    for h in list(log.handlers):
        if isinstance(h, RotatingFileHandler):
            log.removeHandler(h)
            h.close()
    if _fault_file is not None:
        faulthandler.disable()
        _fault_file.close()
        _fault_file = None


def install(on_error: Callable[[str], None] | None = None) -> None:
    """Logs every unhandled exception with its traceback, tells the user through
    on_error (a summary), then calls the previous hook."""
    prev_hook = sys.excepthook
    prev_thread_hook = threading.excepthook

    def hook(etype, value, tb):
        log.critical("unhandled exception\n%s", "".join(traceback.format_exception(etype, value, tb)))
        _flush()
        if on_error is not None:
            try:
                on_error(f"{etype.__name__}: {value}")
            except Exception:
                pass
        if prev_hook not in (None, sys.__excepthook__):
            prev_hook(etype, value, tb)

    def thread_hook(args):
        log.critical("unhandled exception in thread %s\n%s", getattr(args.thread, "name", "?"),
                     "".join(traceback.format_exception(args.exc_type, args.exc_value,
                                                        args.exc_traceback)))
        _flush()
        prev_thread_hook(args)

    sys.excepthook = hook
    threading.excepthook = thread_hook


def _flush() -> None:
    for h in log.handlers:
        try:
            h.flush()
        except Exception:
            pass
