"""kill -9 while indexing: on reopening, every file is either fully stored or absent, the
word index agrees with the passages, and indexing again completes the library."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from ember.documents.indexer import index_paths
from ember.documents.library import Library

from tests.support.documents import HashEmbedder

DRIVER = Path(__file__).resolve().parents[1] / "support" / "library_kill_driver.py"
N_FILES = 8


@pytest.fixture
def folder(tmp_path):
    root = tmp_path / "docs"
    root.mkdir()
    for i in range(N_FILES):
        (root / f"f{i}.txt").write_text(" ".join(f"File {i} sentence {j} mentions word{j}."
                                                 for j in range(120)))
    return root


def _start(db, folder, *options):
    args = [sys.executable, str(DRIVER), str(db), str(folder), *options]
    return subprocess.Popen(args, stdout=subprocess.PIPE, text=True)


def _assert_consistent(db: Path) -> dict[str, int]:
    lib = Library(db)
    try:
        assert lib.check() == []
        counts = dict(lib.db.execute(
            "SELECT f.path, count(c.id) FROM files f LEFT JOIN chunks c ON c.file_id = f.id "
            "GROUP BY f.id"))
        for f in lib.files():
            assert f.status == "indexed" and counts[f.path] == f.n_chunks > 0, f.path
        fts = lib.db.execute("SELECT count(*) FROM chunks_fts").fetchone()[0]
        assert fts == lib.count_chunks()
        return {Path(p).name: n for p, n in counts.items()}
    finally:
        lib.close()


def test_kill_inside_a_files_embedding_leaves_it_out_and_the_rest_whole(tmp_path, folder):
    db = tmp_path / "library.sqlite3"
    proc = _start(db, folder, "--stall", "f3.txt")
    lines = []
    for line in proc.stdout:
        lines.append(line.strip())
        if line.strip() == "embed f3.txt 1":
            break
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert "done 3" in lines
    stored = _assert_consistent(db)
    assert sorted(stored) == ["f0.txt", "f1.txt", "f2.txt"]
    # the rows of a finished file: every passage, in order
    lib = Library(db)
    ordinals = [r[0] for r in lib.db.execute(
        "SELECT c.ordinal FROM chunks c JOIN files f ON f.id = c.file_id "
        "WHERE f.path LIKE '%f1.txt' ORDER BY c.id")]
    assert ordinals == list(range(stored["f1.txt"]))
    r = index_paths(lib, [folder], HashEmbedder(), max_chars=200)
    assert len(r.unchanged) == 3 and len(r.added) == N_FILES - 3
    lib.close()
    assert sorted(_assert_consistent(db)) == [f"f{i}.txt" for i in range(N_FILES)]


@pytest.mark.parametrize("after_lines", [3, 14, 27])  # 4 lines a file: done, 3 batches
def test_kill_at_other_moments(tmp_path, folder, after_lines):
    db = tmp_path / "library.sqlite3"
    proc = _start(db, folder, "--sleep", "0.02")  # the kill lands with work left
    for n, _ in enumerate(proc.stdout, 1):
        if n == after_lines:
            break
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    stored = _assert_consistent(db)
    assert len(stored) < N_FILES
    lib = Library(db)
    index_paths(lib, [folder], HashEmbedder(), max_chars=200)
    lib.close()
    assert len(_assert_consistent(db)) == N_FILES
