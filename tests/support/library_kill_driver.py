"""Indexes a folder into a library, saying on stdout what it does, for a test to kill -9.

    python library_kill_driver.py DB FOLDER [--stall NAME] [--sleep SECONDS]

Prints "done N" as each file is committed and "embed NAME BATCH" before each embedding
batch; --stall sleeps inside that file's second batch, so a kill lands there; --sleep
slows every batch, so a kill lands while work remains."""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "app"), str(ROOT)]

from ember.documents import indexer
from ember.documents.indexer import index_paths
from ember.documents.library import Library

from tests.support.documents import HashEmbedder


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("db")
    ap.add_argument("folder")
    ap.add_argument("--stall")
    ap.add_argument("--sleep", type=float, default=0.0)
    a = ap.parse_args()
    indexer.EMBED_BATCH = 8
    state = {"file": "", "batch": 0}

    def progress(p):
        if p.path != state["file"]:
            print(f"done {p.files_done}", flush=True)
            state["file"], state["batch"] = p.path, 0

    def on_batch(texts):
        name = Path(state["file"]).name
        print(f"embed {name} {state['batch']}", flush=True)
        if name == a.stall and state["batch"] == 1:
            time.sleep(60)
        time.sleep(a.sleep)
        state["batch"] += 1
    index_paths(Library(a.db), [a.folder], HashEmbedder(on_batch=on_batch), progress=progress,
                max_chars=200)
    print("finished", flush=True)


if __name__ == "__main__":
    main()
