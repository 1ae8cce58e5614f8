"""`ember --self-test [MODEL]`: proves an installed or packaged Ember works end to end.

With the desktop UI (PySide6 and ember.ui importable) it starts the real app the way a user
does (ember.ui.app.create_application + MainWindow), in a throwaway data folder, loads the
model through the window, sends a message and waits for streamed reply text; without a
display it runs offscreen. Without the UI it runs the engine alone (load, greedy tokens).
Prints one line "ember self-test: PASS ..." or "ember self-test: FAIL ..." and returns 0 / 1.

The model: MODEL, else $EMBER_SELFTEST_MODEL, else a starter model bundled into a packaged
build (packaging/build.py --with-starter), else the installed starter model, else the
test-asset cache ($EMBER_ASSET_DIR or ~/.cache/ember-assets).
"""
from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

PROMPT = "Hello! Say something short."
N_TOKENS = 8
TIMEOUT_S = float(os.environ.get("EMBER_SELFTEST_TIMEOUT", "300"))
# past this, every thread's Python stack is written out and the process ends with status 1,
# so a self test that hangs outside Qt's event loop (where the reply timer cannot fire)
# still fails, and says where
WATCHDOG_S = TIMEOUT_S + 60


def _say(ok: bool, msg: str) -> int:
    line = f"ember self-test: {'PASS' if ok else 'FAIL'}: {msg}"
    for stream in (sys.stdout, sys.stderr):  # a windowed Windows build has neither
        if stream is not None:
            try:
                print(line, file=stream, flush=True)
                break
            except (OSError, ValueError):
                continue
    return 0 if ok else 1


def _note(msg: str) -> None:
    if sys.stderr is not None:
        try:
            print(f"  {msg}", file=sys.stderr, flush=True)
        except (OSError, ValueError):
            pass


def find_model(explicit: str | None = None) -> Path | None:
    from .. import starter
    candidates: list[Path] = []
    if explicit:
        return Path(explicit)
    if os.environ.get("EMBER_SELFTEST_MODEL"):
        return Path(os.environ["EMBER_SELFTEST_MODEL"])
    bundle = getattr(sys, "_MEIPASS", None)
    if bundle:
        candidates.append(Path(bundle) / "models" / starter.FILENAME)
    try:
        p = starter.installed()
        if p:
            candidates.append(p)
    except OSError:
        pass
    assets = os.environ.get("EMBER_ASSET_DIR") or str(Path.home() / ".cache" / "ember-assets")
    candidates.append(Path(assets) / "starter" / starter.FILENAME)
    return next((c for c in candidates if c.is_file()), None)


def engine_self_test(model_path: Path) -> int:
    """Engine only: load, greedy-generate a few tokens of a plain prompt."""
    from ..engine import GenerationStats, Model, SamplingParams, system_info
    info = system_info()
    t0 = time.perf_counter()
    model = Model(model_path, n_ctx=256)
    load_s = time.perf_counter() - t0
    stats = GenerationStats()
    text = "".join(model.generate("The capital of France is", N_TOKENS,
                                  SamplingParams(temperature=0.0), stats=stats))
    model.close()
    if stats.generated_tokens < 1:
        return _say(False, f"engine generated no tokens (stop: {stats.stop_reason})")
    return _say(True, f"engine only ({info}): loaded {model_path.name} in {load_s:.2f} s, "
                      f"{stats.generated_tokens} greedy tokens: {text!r}")


def _ensure_platform() -> None:
    """Offscreen where there is no screen (CI, ssh), so Qt does not abort on xcb."""
    if os.environ.get("QT_QPA_PLATFORM"):
        return
    if sys.platform.startswith("linux") and not (os.environ.get("DISPLAY")
                                                 or os.environ.get("WAYLAND_DISPLAY")):
        os.environ["QT_QPA_PLATFORM"] = "offscreen"


def _platform_name() -> str | None:
    """The Qt platform plugin QApplication will start: QT_QPA_PLATFORM's first choice, else
    the system's own (None on Linux, where Qt picks between xcb and wayland itself)."""
    chosen = os.environ.get("QT_QPA_PLATFORM", "").split(";")[0].split(":")[0].strip()
    return chosen or {"win32": "windows", "darwin": "cocoa"}.get(sys.platform)


def missing_platform_plugin(name: str | None, library_paths: list[str]) -> str | None:
    """Why QApplication could not start platform `name`, when no such plugin file is in any
    of Qt's library paths; None when one is there (or the name is not known). Checked before
    QApplication exists: without its plugin a windowed Windows program stops in Qt's "no Qt
    platform plugin could be initialized" message box, which nobody sees in a test run
    (under wine's null display driver it hangs the self test for good)."""
    if not name:
        return None
    stem = f"q{name}"
    for folder in library_paths:
        try:
            names = os.listdir(Path(folder) / "platforms")
        except OSError:
            continue
        if any(n.split(".")[0].removeprefix("lib") == stem for n in names):
            return None
    return (f"no Qt platform plugin '{name}' (platforms/{stem}.*) in Qt's library paths "
            f"{library_paths}: the app could not open a window")


def gui_self_test(model_path: Path) -> int:
    """The desktop app: window, model load through it, a streamed reply."""
    _ensure_platform()
    from PySide6.QtCore import QCoreApplication
    why = missing_platform_plugin(_platform_name(), QCoreApplication.libraryPaths())
    if why:
        return _say(False, why)
    from ..display_check import why_no_window
    why = why_no_window()  # Qt would abort the process instead (SIGABRT)
    if why:
        return _say(False, f"the app cannot open a window: {why}")
    from ..ui import app as ui_app
    hook = getattr(ui_app, "self_test", None)
    if callable(hook):  # the UI's own self test, when it has one
        return int(hook(str(model_path)))

    from PySide6.QtCore import QTimer

    from ..storage.settings import Settings
    from ..ui.main_window import MainWindow

    app = ui_app.create_application()
    platform = app.platformName()
    with tempfile.TemporaryDirectory(prefix="ember-selftest-") as data:
        # a throwaway data folder: the user's chats and settings are never touched
        s = Settings()
        s.temperature, s.max_new_tokens, s.n_ctx, s.seed = 0.0, N_TOKENS, 512, 0
        s.save(Path(data) / "settings.json")
        result: dict = {"ok": False, "msg": "timed out", "chunks": 0}
        t0 = time.perf_counter()
        win = MainWindow(data, open_model=str(model_path), restore_last=False)
        win.show()

        def finish(ok: bool, msg: str) -> None:
            if "done" not in result:
                result.update(done=True, ok=ok, msg=msg)
                QTimer.singleShot(0, app.quit)

        def on_loaded(_path) -> None:
            result["load_s"] = time.perf_counter() - t0
            _note(f"model loaded through the window in {result['load_s']:.2f} s")
            result["t_send"] = time.perf_counter()
            if not win.send(PROMPT):
                finish(False, "the window refused to send a message")
                return
            worker = getattr(win, "gen_worker", None)
            if worker is not None and hasattr(worker, "chunk"):
                worker.chunk.connect(on_chunk)

        def on_chunk(*_args) -> None:
            result["chunks"] += 1
            result.setdefault("first_s", time.perf_counter() - result["t_send"])

        def on_finished(stats: dict) -> None:
            n = int(stats.get("generated_tokens") or 0)
            text = stats.get("text", "")
            if n < 1 or stats.get("stop_reason") == "error":
                finish(False, f"no reply tokens (stop: {stats.get('stop_reason')})")
            else:
                first = result.get("first_s")
                finish(True, f"window on Qt '{platform}', {model_path.name} loaded in "
                             f"{result.get('load_s', 0):.2f} s, {n} tokens streamed"
                             + (f" (first after {first:.2f} s)" if first is not None else "")
                             + f": {text!r}")

        win.model_loaded.connect(on_loaded)
        win.model_failed.connect(lambda msg: finish(False, f"model load failed: {msg}"))
        win.generation_finished.connect(on_finished)
        QTimer.singleShot(int(TIMEOUT_S * 1000),
                          lambda: finish(False, f"no reply within {TIMEOUT_S:.0f} s"))
        app.exec()
        win.close()  # stops workers, closes the store and the model
        app.processEvents()
        win.deleteLater()
        app.processEvents()
        from ..ui import crash
        crash.close_logging()  # its log files are in the folder that goes now
    return _say(result["ok"], result["msg"])


def _arm_watchdog() -> None:
    """faulthandler's own thread dumps the stacks at WATCHDOG_S and exits: to stderr, or where
    there is none (a windowed Windows build) to ember-selftest-stacks.txt in the temp folder."""
    import faulthandler
    try:
        out = sys.stderr
        out.fileno()
    except (AttributeError, OSError, ValueError):
        out = open(Path(tempfile.gettempdir()) / "ember-selftest-stacks.txt", "w",  # noqa: SIM115
                   encoding="utf-8")
    faulthandler.dump_traceback_later(WATCHDOG_S, exit=True, file=out)


def main(model: str | None = None) -> int:
    from .. import __version__
    _arm_watchdog()
    path = find_model(model)
    if path is None or not path.is_file():
        what = f"{path} does not exist" if path else "no model found"
        return _say(False, f"{what}; pass one: ember --self-test MODEL.gguf")
    _note(f"ember {__version__}, python {sys.version.split()[0]}, "
          f"{'frozen' if getattr(sys, 'frozen', False) else 'source'}, model {path}")
    try:
        import PySide6  # noqa: F401

        from ..ui import app as _  # noqa: F401
        gui = True
    except ImportError as e:
        _note(f"desktop UI not available ({e}): engine-only self test")
        gui = False
    try:
        return gui_self_test(path) if gui else engine_self_test(path)
    except Exception as e:  # noqa: BLE001 (the self test reports, it does not crash)
        import traceback
        traceback.print_exc()
        return _say(False, f"{type(e).__name__}: {e}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else None))
