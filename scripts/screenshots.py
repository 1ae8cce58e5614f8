#!/usr/bin/env python3
"""Renders the README screenshots (light and dark chat with code, welcome view) to
docs/screenshots/*.png, offscreen, in a throwaway data folder.

The model card and status bar come from the real starter model (loaded for the
shot); the chat itself is a fixed example conversation so that the pictures do not
change from run to run.

    python scripts/screenshots.py [--model PATH] [--out docs/screenshots]
    python scripts/screenshots.py --check /tmp/shots   # fonts 10-16 at 900x600, to look at
    python scripts/screenshots.py --matrix /tmp/shots  # fonts 10, 13, 16 x 900x600, 1440x900
                                                       # x light, dark: the chat, to look at
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "app"), str(REPO)]
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

QUESTION = "How do I read a large CSV file in Python without loading it all into memory?"
ANSWER = '''Read it **row by row** with the `csv` module: the file is streamed, so memory use stays flat no matter how big it is.

```python
import csv

def total_sales(path: str) -> float:
    """Sum the 'amount' column of a CSV file, one row at a time."""
    total = 0.0
    with open(path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            total += float(row["amount"])  # one row in memory
    return total

print(f"{total_sales('sales.csv'):,.2f}")
```

A few tips:

- Pass `newline=""` so quoted fields with line breaks are read correctly.
- For columnar work, `pandas.read_csv(path, chunksize=100_000)` gives the same
  streaming behaviour with DataFrames.
- Compressed files work too: open them with `gzip.open(path, "rt")`.'''
FOLLOW_UP = "Can I do the same with pandas?"
ANSWER_2 = '''Yes. Give `read_csv` a `chunksize` and it returns an iterator of DataFrames:

```python
import pandas as pd

total = sum(chunk["amount"].sum()
            for chunk in pd.read_csv("sales.csv", chunksize=100_000))
```

Each chunk holds 100,000 rows, so peak memory is set by the chunk size, not the file.'''

OTHER_CHATS = ["Plan a three-day trip to Lisbon", "Explain Rust lifetimes simply",
               "Regex for ISO dates", "Summarise the meeting notes"]

# --matrix: every font size by every window size by both themes
MATRIX_FONTS = (10, 13, 16)
MATRIX_SIZES = ((900, 600), (1440, 900))
MATRIX_THEMES = ("light", "dark")


def write_example(data: Path, model: str) -> int:
    """The example chats in data's history and the model in its models folder; returns the
    shown chat's id."""
    from ember.storage.store import Store
    store = Store(data / "history.sqlite3")
    for i, title in enumerate(OTHER_CHATS):
        c = store.create_conversation(title, created=1_700_000_000 + i)
        store.add_message(c, "user", title, created=1_700_000_000 + i)
    cid = store.create_conversation("Reading a large CSV file", created=1_700_100_000)
    t = 1_700_100_000
    # the conversation is an illustration; no speed figures are invented for it
    meta = {"generated_tokens": 212, "stop_reason": "eog"}
    store.add_message(cid, "user", QUESTION, created=t)
    store.add_message(cid, "assistant", ANSWER, created=t + 6, meta=meta)
    store.add_message(cid, "user", FOLLOW_UP, created=t + 60)
    store.add_message(cid, "assistant", ANSWER_2, created=t + 63,
                      meta=dict(meta, generated_tokens=94))
    store.close()
    models_dir = data / "models"
    models_dir.mkdir(exist_ok=True)
    link = models_dir / Path(model).name
    if not link.exists():
        link.symlink_to(Path(model).resolve())
    return cid


def wait_for(signal, ms=120_000):
    from PySide6.QtCore import QEventLoop, QTimer
    loop = QEventLoop()
    signal.connect(loop.quit)
    QTimer.singleShot(ms, loop.quit)
    loop.exec()


def settle(ms=150):
    from PySide6.QtCore import QEventLoop, QTimer
    loop = QEventLoop()
    QTimer.singleShot(ms, loop.quit)
    loop.exec()


def render_matrix(data: Path, model: str, cid: int, out: Path, check=None) -> list[Path]:
    """The example chat at every font, window size and theme of the matrix, one PNG each
    (chat-<theme>-<font>pt-<w>x<h>.png) into out; check(window, name), where given, runs on
    each render before it is saved."""
    from ember.storage.settings import Settings
    from ember.ui.main_window import MainWindow
    out.mkdir(parents=True, exist_ok=True)
    saved = []
    for theme in MATRIX_THEMES:
        for font in MATRIX_FONTS:
            Settings(theme=theme, n_ctx=4096, font_size=font).save(data / "settings.json")
            w = MainWindow(data, open_model=model)
            w.show()
            if w.model is None:
                wait_for(w.model_loaded)
            w.select_conversation(cid)
            w.composer.input.setPlainText("")
            for width, height in MATRIX_SIZES:
                w.resize(width, height)
                settle(300)
                w.chat_view.verticalScrollBar().setValue(0)
                settle(100)
                name = f"chat-{theme}-{font}pt-{width}x{height}.png"
                if check is not None:
                    check(w, name)
                w.grab().save(str(out / name))
                saved.append(out / name)
            w.close()
            w.deleteLater()
    return saved


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="model for the card (default: starter)")
    ap.add_argument("--out", default=str(REPO / "docs" / "screenshots"))
    ap.add_argument("--check", metavar="DIR", default=None,
                    help="instead: every view at font sizes 10-16 in a 900x600 window, into DIR")
    ap.add_argument("--matrix", metavar="DIR", default=None,
                    help="instead: the chat at fonts 10, 13, 16, 900x600 and 1440x900, light "
                         "and dark, into DIR")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    model = args.model
    if model is None:
        from tools import fetch_assets
        model = str(fetch_assets.starter_model())

    data = Path(tempfile.mkdtemp(prefix="ember-shots-"))
    os.environ["EMBER_DATA_DIR"] = str(data)
    from ember.storage.settings import Settings
    from ember.ui.app import create_application
    from ember.ui.main_window import MainWindow
    from PySide6.QtWidgets import QApplication

    create_application()
    cid = write_example(data, model)
    shots = []

    if args.matrix:
        for path in render_matrix(data, model, cid, Path(args.matrix)):
            print(path)
        QApplication.processEvents()
        return 0

    if args.check:
        check = Path(args.check)
        check.mkdir(parents=True, exist_ok=True)
        for font in (10, 12, 14, 16):
            first_run = data / f"welcome-{font}"  # no models, no chats: the Download offer
            first_run.mkdir(exist_ok=True)
            Settings(theme="light", font_size=font).save(first_run / "settings.json")
            w = MainWindow(first_run, restore_last=False)
            w.resize(900, 600)
            w.show()
            settle(300)
            w.grab().save(str(check / f"welcome-{font}.png"))
            w.close()
            Settings(theme="light", n_ctx=4096, font_size=font).save(data / "settings.json")
            w = MainWindow(data, open_model=model)
            w.resize(900, 600)
            w.show()
            if w.model is None:
                wait_for(w.model_loaded)
            w.select_conversation(cid)
            settle(400)
            w.chat_view.verticalScrollBar().setValue(0)
            settle(150)
            w.grab().save(str(check / f"chat-{font}.png"))
            w.show_models()
            settle(300)
            w.grab().save(str(check / f"models-{font}.png"))
            w.close()
        print(check)
        QApplication.processEvents()
        return 0

    # welcome view (first run)
    Settings(theme="light").save(data / "settings.json")
    w = MainWindow(data / "welcome-run", restore_last=False)
    w.resize(1280, 800)
    w.welcome.set_starter_available(True)
    w.show()
    settle(300)
    shots.append(("welcome.png", w.grab()))
    w.close()

    for theme in ("light", "dark"):
        s = Settings(theme=theme, n_ctx=4096, temperature=0.7)
        s.save(data / "settings.json")
        w = MainWindow(data, open_model=model)
        w.resize(1280, 800)
        w.show()
        if w.model is None:
            wait_for(w.model_loaded)
        w.select_conversation(cid)
        w.composer.input.setPlainText("")
        settle(400)
        w.chat_view.verticalScrollBar().setValue(0)
        settle(150)
        shots.append((f"chat-{theme}.png", w.grab()))
        if theme == "light":
            w.show_models()
            settle(300)
            shots.append(("models.png", w.grab()))
        w.close()

    for name, pm in shots:
        pm.save(str(out / name))
        print(out / name)
    QApplication.processEvents()
    return 0


if __name__ == "__main__":
    sys.exit(main())
