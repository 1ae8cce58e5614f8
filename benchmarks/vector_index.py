#!/usr/bin/env python3
"""The library's vector index (float32 BLOBs in SQLite, searched as one numpy matrix)
against sqlite-vec's vec0 table: insert, first load, and top-10 query time for N random
384-dimensional unit vectors, and whether both return the same ids.

    python benchmarks/vector_index.py [--n 10000 100000] [--queries 50]

sqlite-vec needs a Python whose sqlite3 can load extensions (many builds cannot, pyenv's
default and macOS's among them); without one its rows say why."""
from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

DIM = 384


def _vectors(n: int, rng) -> np.ndarray:
    v = rng.standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def bench_numpy(db_path: Path, vectors: np.ndarray, queries: np.ndarray, k: int):
    db = sqlite3.connect(db_path, isolation_level=None)
    db.execute("CREATE TABLE chunks (id INTEGER PRIMARY KEY, vector BLOB)")
    t0 = time.perf_counter()
    db.execute("BEGIN")
    db.executemany("INSERT INTO chunks(id, vector) VALUES (?, ?)",
                   ((i + 1, v.tobytes()) for i, v in enumerate(vectors)))
    db.execute("COMMIT")
    t_insert = time.perf_counter() - t0
    t0 = time.perf_counter()
    rows = db.execute("SELECT id, vector FROM chunks ORDER BY id").fetchall()
    ids = np.array([r[0] for r in rows])
    matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), -1)
    t_load = time.perf_counter() - t0
    results = []
    t0 = time.perf_counter()
    for q in queries:
        scores = matrix @ q
        top = np.argpartition(-scores, k - 1)[:k]
        results.append(list(ids[top[np.argsort(-scores[top])]]))
    t_query = (time.perf_counter() - t0) / len(queries)
    db.close()
    return t_insert, t_load, t_query, results


def bench_sqlite_vec(db_path: Path, vectors: np.ndarray, queries: np.ndarray, k: int):
    import sqlite_vec

    db = sqlite3.connect(db_path, isolation_level=None)
    if not hasattr(db, "enable_load_extension"):
        raise RuntimeError("this Python's sqlite3 cannot load extensions")
    db.enable_load_extension(True)
    sqlite_vec.load(db)
    db.enable_load_extension(False)
    db.execute(f"CREATE VIRTUAL TABLE v USING vec0(embedding float[{DIM}] distance_metric=cosine)")
    t0 = time.perf_counter()
    db.execute("BEGIN")
    db.executemany("INSERT INTO v(rowid, embedding) VALUES (?, ?)",
                   ((i + 1, v.tobytes()) for i, v in enumerate(vectors)))
    db.execute("COMMIT")
    t_insert = time.perf_counter() - t0
    # a fresh connection: the first query reads the table, as after a restart
    db.close()
    db = sqlite3.connect(db_path, isolation_level=None)
    db.enable_load_extension(True)
    sqlite_vec.load(db)
    results = []
    t0 = time.perf_counter()
    first = None
    for q in queries:
        rows = db.execute("SELECT rowid FROM v WHERE embedding MATCH ? AND k = ? "
                          "ORDER BY distance", (q.tobytes(), k)).fetchall()
        results.append([r[0] for r in rows])
        if first is None:
            first = time.perf_counter() - t0
    t_query = (time.perf_counter() - t0 - first) / max(len(queries) - 1, 1)
    db.close()
    return t_insert, first, t_query, results


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--k", type=int, default=10)
    a = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    print(f"{'index':>12} {'n':>8} {'insert s':>9} {'load/first s':>13} {'query ms':>9} "
          f"{'same top-k':>10}")
    for n in a.n:
        vectors, queries = _vectors(n, rng), _vectors(a.queries, rng)
        with tempfile.TemporaryDirectory() as tmp:
            ins, load, q, ref = bench_numpy(Path(tmp) / "np.sqlite3", vectors, queries, a.k)
            print(f"{'numpy+BLOB':>12} {n:>8} {ins:>9.2f} {load:>13.3f} {q * 1000:>9.2f} "
                  f"{'-':>10}")
            try:
                ins, first, q, got = bench_sqlite_vec(Path(tmp) / "vec.sqlite3", vectors,
                                                      queries, a.k)
            except (ImportError, RuntimeError, sqlite3.OperationalError) as e:
                print(f"{'sqlite-vec':>12} {n:>8} unavailable: {e}")
                continue
            same = sum(set(x) == set(y) for x, y in zip(ref, got)) / len(ref)
            print(f"{'sqlite-vec':>12} {n:>8} {ins:>9.2f} {first:>13.3f} {q * 1000:>9.2f} "
                  f"{same:>10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
