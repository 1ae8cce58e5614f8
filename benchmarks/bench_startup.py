#!/usr/bin/env python3
"""Desktop-app start-up benchmark, measured from outside in fresh processes:

- window: process start -> main window shown and the event loop running (interactive)
- loaded: process start -> model loaded (header, weights, KV cache)
- first_token: process start -> first reply text on screen after sending a message
  (also reported from the moment of sending)

Runs offscreen in a throwaway data folder. Usage:

    python benchmarks/bench_startup.py [--model PATH] [--runs 3] [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

CHILD = textwrap.dedent("""
    import os, sys, time
    from PySide6.QtCore import QTimer
    from ember.ui.app import create_application
    from ember.ui.main_window import MainWindow
    app = create_application()
    win = MainWindow(sys.argv[1], open_model=sys.argv[2] or None, restore_last=False)
    win.show()
    def say(what):
        print(what, time.monotonic(), flush=True)
    QTimer.singleShot(0, lambda: say("WINDOW"))
    sent = []
    def loaded(_path):
        say("LOADED")
        sent.append(True)
        say("SENT")
        win.send("Hello! Who are you?")
    def progress(_id, _text):
        if sent:
            say("FIRST")
            sent.clear()
            win.stop()
    win.model_loaded.connect(loaded)
    win.reply_progress.connect(progress)
    win.generation_finished.connect(lambda _s: app.quit())
    win.model_failed.connect(lambda msg: (print("FAILED", msg, flush=True), app.quit()))
    if not sys.argv[2]:
        QTimer.singleShot(0, app.quit)
    app.exec()
""")


def run_once(model: str | None) -> dict:
    data = tempfile.mkdtemp(prefix="ember-bench-")
    from ember.storage.settings import Settings  # settings for the child: greedy, short
    Settings(temperature=0.0, max_new_tokens=16, n_ctx=2048, theme="light").save(
        Path(data) / "settings.json")
    env = dict(os.environ, EMBER_DATA_DIR=data, QT_QPA_PLATFORM=os.environ.get(
        "QT_QPA_PLATFORM", "offscreen"),
        PYTHONPATH=os.pathsep.join([str(REPO / "app"), str(REPO)]))
    t0 = time.monotonic()
    p = subprocess.Popen([sys.executable, "-c", CHILD, data, model or ""], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    marks = {}
    for line in p.stdout:
        parts = line.split()
        if parts and parts[0] == "FAILED":
            raise SystemExit(line)
        if len(parts) == 2:
            marks[parts[0]] = float(parts[1]) - t0
    p.wait(300)
    out = {"window_s": marks.get("WINDOW")}
    if model:
        out["loaded_s"] = marks.get("LOADED")
        out["first_token_s"] = marks.get("FIRST")
        if "FIRST" in marks and "SENT" in marks:
            out["first_token_after_send_s"] = marks["FIRST"] - marks["SENT"]
    return out


def main() -> int:
    sys.path[:0] = [str(REPO / "app"), str(REPO)]
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="GGUF model (default: the starter model)")
    ap.add_argument("--no-model", action="store_true", help="only time the window")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    model = None
    if not args.no_model:
        model = args.model
        if model is None:
            from tools import fetch_assets
            model = str(fetch_assets.starter_model())
    runs = [run_once(model) for _ in range(args.runs)]
    keys = [k for k in runs[0] if all(r.get(k) is not None for r in runs)]
    summary = {k: {"median": statistics.median(r[k] for r in runs),
                   "min": min(r[k] for r in runs)} for k in keys}
    if args.json:
        print(json.dumps({"model": model, "runs": runs, "summary": summary}))
        return 0
    print(f"model: {model or '(none)'}; {args.runs} runs, fresh process each")
    print("| measure | median s | min s |\n|---|---|---|")
    for k, v in summary.items():
        print(f"| {k} | {v['median']:.3f} | {v['min']:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
