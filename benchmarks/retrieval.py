#!/usr/bin/env python3
"""Retrieval quality of the document library on benchmarks/retrieval_corpus: recall@5 of
hybrid (reciprocal rank fusion) against words only (FTS5, BM25) and vectors only
(MiniLM, cosine), with the indexing time, the embedder's speed and the peak memory.

    python benchmarks/retrieval.py [--model MINILM.gguf] [--embedder engine|numpy] [--markdown]

A question counts as answered at k when one of the top k passages comes from the
expected file and holds the answer phrase. Without --model the fetched MiniLM is
converted to F16 first (tools/fetch_assets.py minilm, tools/convert_minilm.py)."""
from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "app"), str(ROOT)]

from ember.documents.indexer import index_paths
from ember.documents.library import Library
from ember.documents.embedder import EngineEmbedder
from ember.documents.minilm import MiniLMEmbedder
from ember.documents.retrieval import search

CORPUS = ROOT / "benchmarks" / "retrieval_corpus"
MODES = ("words", "vectors", "hybrid")


def _norm(s: str) -> str:
    return " ".join(s.lower().split())


def answered(hits, question: dict) -> list[bool]:
    """For each rank, whether the passage there answers the question."""
    return [Path(h.passage.path).name == question["file"]
            and _norm(question["answer"]) in _norm(h.passage.text) for h in hits]


def file_hit(hits, question: dict) -> list[bool]:
    return [Path(h.passage.path).name == question["file"] for h in hits]


def model_path(arg: str | None, workdir: Path) -> Path:
    if arg:
        return Path(arg)
    from tools.convert_minilm import convert
    from tools.fetch_assets import minilm_dir
    return convert(minilm_dir(), workdir / "all-MiniLM-L6-v2.F16.gguf", "f16")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", help="a GGUF bert file (default: the converted MiniLM)")
    ap.add_argument("--embedder", choices=("engine", "numpy"), default="engine",
                    help="the engine's bert family (default) or the numpy reference pass")
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    ap.add_argument("--misses", action="store_true", help="list the questions each mode misses")
    a = ap.parse_args(argv)
    questions = json.loads((CORPUS / "questions.json").read_text())

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        path = model_path(a.model, tmp)
        embedder = EngineEmbedder(path) if a.embedder == "engine" else MiniLMEmbedder.from_gguf(path)
        library = Library(tmp / "library.sqlite3")
        t0 = time.perf_counter()
        report = index_paths(library, [CORPUS / "docs"], embedder)
        t_index = time.perf_counter() - t0
        if report.failed:
            print("failed:", report.failed, file=sys.stderr)
        n_chunks = library.count_chunks()
        texts = [r[0] for r in library.db.execute("SELECT text FROM chunks")]
        t0 = time.perf_counter()
        embedder.embed(texts)
        t_embed = time.perf_counter() - t0

        results = {}
        for mode in MODES:
            rows = []
            t0 = time.perf_counter()
            for q in questions:
                hits = search(library, q["q"], embedder, k=a.k, mode=mode)
                rows.append((q, answered(hits, q), file_hit(hits, q)))
            elapsed = time.perf_counter() - t0
            results[mode] = (rows, elapsed / len(questions))
        library.close()

    n = len(questions)
    sizes = sum(p.stat().st_size for p in (CORPUS / "docs").iterdir())
    print(f"corpus: {len(report.added)} files, {sizes / 1024:.0f} KiB, {n_chunks} passages; "
          f"{n} questions; embedder {embedder.name} ({a.embedder})")
    print(f"indexing: {t_index:.2f} s; embedding {n_chunks / t_embed:.1f} passages/s; "
          f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
    header = ["mode", "recall@1", f"recall@{a.k}", "MRR", f"file recall@{a.k}", "ms/query"]
    table = []
    for mode in MODES:
        rows, per_query = results[mode]
        r1 = sum(ans[:1] == [True] for _, ans, _ in rows) / n
        rk = sum(any(ans) for _, ans, _ in rows) / n
        mrr = sum(1 / (ans.index(True) + 1) if any(ans) else 0 for _, ans, _ in rows) / n
        fk = sum(any(f) for _, _, f in rows) / n
        table.append([mode, f"{r1:.3f}", f"{rk:.3f}", f"{mrr:.3f}", f"{fk:.3f}",
                      f"{per_query * 1000:.1f}"])
    if a.markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for row in table:
            print("| " + " | ".join(row) + " |")
    else:
        print("  ".join(f"{h:>16}" for h in header))
        for row in table:
            print("  ".join(f"{c:>16}" for c in row))
    if a.misses:
        for mode in MODES:
            missed = [q["q"] for q, ans, _ in results[mode][0] if not any(ans)]
            print(f"{mode} misses {len(missed)}: " + "; ".join(missed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
