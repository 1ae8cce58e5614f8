#!/usr/bin/env python3
"""Indexing time and peak memory for a long PDF: N pages (default 1,000) of the retrieval
corpus's sentences, shuffled, in one file, indexed with a progress line; or with --files N,
a folder of N one-page text files (a re-index of the unchanged folder is timed too).

    python benchmarks/index_pages.py [--pages 1000 | --files 10000] [--words-only]
                                     [--model MINILM.gguf]"""
from __future__ import annotations

import argparse
import random
import re
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "app"), str(ROOT)]

from ember.documents.indexer import index_paths  # noqa: E402
from ember.documents.library import Library  # noqa: E402
from tools.make_documents import make_pdf  # noqa: E402

SOURCE = ROOT / "benchmarks" / "retrieval_corpus" / "source"


def pages(n: int, seed: int = 0) -> list[str]:
    text = " ".join(p.read_text() for p in sorted(SOURCE.iterdir()) if p.suffix != ".py")
    sentences = [s for s in re.split(r"(?<=[.!?])\s+", " ".join(text.split())) if len(s) > 20]
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        rng.shuffle(sentences)
        body, size = [], 0
        for s in sentences:  # about 2,500 characters: a printed page of prose
            body.append(s)
            size += len(s) + 1
            if size > 2500:
                break
        out.append(" ".join(body))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pages", type=int, default=1000)
    ap.add_argument("--files", type=int, help="a folder of this many one-page .txt files")
    ap.add_argument("--words-only", action="store_true", help="no embedder: FTS5 only")
    ap.add_argument("--model", help="a GGUF bert file (default: the converted MiniLM)")
    ap.add_argument("--embedder", choices=("engine", "numpy"), default="engine",
                    help="the engine's bert family (default) or the numpy reference pass")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        embedder = None
        if not a.words_only:
            from benchmarks.retrieval import model_path
            from ember.documents.embedder import EngineEmbedder
            from ember.documents.minilm import MiniLMEmbedder
            path = model_path(a.model, tmp)
            embedder = EngineEmbedder(path) if a.embedder == "engine" else MiniLMEmbedder.from_gguf(path)
        if a.files:
            target = tmp / "folder"
            for i, text in enumerate(pages(a.files)):
                sub = target / f"{i // 1000:02}"
                sub.mkdir(parents=True, exist_ok=True)
                (sub / f"note{i:05}.txt").write_text(text)
        else:
            target = make_pdf(tmp / "long.pdf", pages(a.pages))
        library = Library(tmp / "library.sqlite3")
        last = [0.0]

        def progress(p):
            now = time.perf_counter()
            if now - last[0] > 1.0 and p.chunks_total:
                last[0] = now
                print(f"\r  passages {p.chunks_done}/{p.chunks_total}", end="", file=sys.stderr,
                      flush=True)
        t0 = time.perf_counter()
        report = index_paths(library, [target], embedder, progress=progress)
        elapsed = time.perf_counter() - t0
        t0 = time.perf_counter()
        again = index_paths(library, [target], embedder)
        t_again = time.perf_counter() - t0
        print(file=sys.stderr)
        n = library.count_chunks()
        files = [target] if target.is_file() else list(target.rglob("*.txt"))
        size = sum(f.stat().st_size for f in files)
        db_size = sum(p.stat().st_size for p in tmp.glob("library.sqlite3*"))
        library.close()
    assert not report.failed, report.failed
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    n_pages = a.files or a.pages
    what = f"{a.files} files" if a.files else "one PDF"
    print(f"{n_pages} pages in {what} ({size / 2**20:.1f} MB) -> {n} passages in {elapsed:.1f} s "
          f"({n_pages / elapsed:.1f} pages/s), {'words only' if a.words_only else embedder.name}; "
          f"unchanged re-index {t_again:.2f} s ({len(again.unchanged)} unchanged); "
          f"library {db_size / 2**20:.1f} MB; peak RSS {rss:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
