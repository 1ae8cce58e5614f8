"""The document library's database (library.sqlite3 beside the chats' history): files,
their passages, an FTS5 index of the passages' words and each passage's vector.

A file's passages are replaced in one transaction, so a crash (or kill -9) leaves every
file either as it was before or fully indexed; WAL and `PRAGMA user_version` migrations as
in storage/store.py. Vectors are float32 BLOBs beside their passage; searches multiply a
matrix of them, read once and read again only after a write (docs/DOCUMENTS.md says why
not sqlite-vec)."""
from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .chunking import Chunk

MIGRATIONS: list[list[str]] = [
    # 1: sources (what the user added), files, passages, words
    [
        """CREATE TABLE sources (
            path  TEXT PRIMARY KEY,
            added REAL NOT NULL
        )""",
        """CREATE TABLE files (
            id         INTEGER PRIMARY KEY AUTOINCREMENT,
            path       TEXT NOT NULL UNIQUE,
            mtime_ns   INTEGER NOT NULL,
            size       INTEGER NOT NULL,
            sha256     TEXT NOT NULL,
            status     TEXT NOT NULL CHECK (status IN ('indexed', 'failed')),
            error      TEXT,
            embedder   TEXT,
            n_chunks   INTEGER NOT NULL DEFAULT 0,
            indexed_at REAL NOT NULL
        )""",
        """CREATE TABLE chunks (
            id      INTEGER PRIMARY KEY AUTOINCREMENT,
            file_id INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
            ordinal INTEGER NOT NULL,
            page    INTEGER,
            heading TEXT,
            text    TEXT NOT NULL,
            vector  BLOB
        )""",
        "CREATE INDEX chunks_file ON chunks(file_id, ordinal)",
        """CREATE VIRTUAL TABLE chunks_fts USING fts5(
            text, heading, content='chunks', content_rowid='id',
            tokenize='porter unicode61 remove_diacritics 2'
        )""",
        """CREATE TRIGGER chunks_ai AFTER INSERT ON chunks BEGIN
            INSERT INTO chunks_fts(rowid, text, heading) VALUES (new.id, new.text, new.heading);
        END""",
        """CREATE TRIGGER chunks_ad AFTER DELETE ON chunks BEGIN
            INSERT INTO chunks_fts(chunks_fts, rowid, text, heading)
                VALUES ('delete', old.id, old.text, old.heading);
        END""",
    ],
    # 2: chats that answer from the library (kept here, not in the chats' history, so the
    # two databases migrate apart); scope: a JSON list of files and folders, NULL for all
    [
        """CREATE TABLE chat_attachments (
            conv_id  INTEGER PRIMARY KEY,
            scope    TEXT,
            attached REAL NOT NULL
        )""",
    ],
]
SCHEMA_VERSION = len(MIGRATIONS)
_WORD = re.compile(r"\w+", re.UNICODE)
# words a question is made of but that say nothing about which passage answers it; BM25
# weighs them little in a large library, but in a small one "the" can outrank "boiler"
STOPWORDS = frozenset(["a", "about", "after", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be", "been", "before", "being", "but", "by", "can", "could", "did", "do", "does", "doing", "for", "from", "had", "has", "have", "having", "he", "her", "here", "him", "his", "how", "i", "if", "in", "into", "is", "it", "its", "me", "more", "most", "my", "no", "not", "of", "on", "or", "our", "out", "so", "some", "than", "that", "the", "their", "them", "then", "there", "these", "they", "this", "those", "to", "too", "up", "us", "was", "we", "were", "what", "when", "where", "which", "while", "who", "whom", "why", "will", "with", "would", "you", "your", "yours"])


class LibraryError(Exception):
    pass


@dataclass(frozen=True)
class FileRecord:
    id: int
    path: str
    mtime_ns: int
    size: int
    sha256: str
    status: str          # 'indexed' or 'failed'
    error: str | None    # why it failed, in words
    embedder: str | None
    n_chunks: int


@dataclass(frozen=True)
class Passage:
    id: int
    path: str
    page: int | None
    heading: str | None
    text: str
    ordinal: int


def default_path() -> Path:
    from ..storage.paths import data_dir
    return data_dir() / "library.sqlite3"


def fts_query(text: str) -> str | None:
    """A user's question as an FTS5 query: any of its words but the stopwords (quoted, so
    AND, NEAR and punctuation are words, not syntax); BM25 ranks passages with more and
    rarer ones first. A question of stopwords alone keeps them."""
    words = list(dict.fromkeys(w.lower() for w in _WORD.findall(text)))
    content = [w for w in words if w not in STOPWORDS]
    words = content or words
    return " OR ".join(f'"{w}"' for w in words) if words else None


class Library:
    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path else default_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(str(self.path), isolation_level=None, timeout=10.0,
                                  check_same_thread=False)
        self.db.row_factory = sqlite3.Row
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute("PRAGMA foreign_keys=ON")
        self._vectors: tuple | None = None  # (write stamp, embedder, ids, file ids, matrix)
        self._writes = 0
        self._migrate()

    # ---- schema -------------------------------------------------------------------
    def _migrate(self) -> None:
        version = int(self.db.execute("PRAGMA user_version").fetchone()[0])
        if version > SCHEMA_VERSION:
            raise LibraryError(f"{self.path} was written by a newer Ember (schema {version}, "
                               f"this version knows {SCHEMA_VERSION})")
        for v in range(version, SCHEMA_VERSION):
            with self._transaction():
                for stmt in MIGRATIONS[v]:
                    self.db.execute(stmt)
                self.db.execute(f"PRAGMA user_version = {v + 1}")

    @contextlib.contextmanager
    def _transaction(self):
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            # SQLite may have rolled back already (SQLITE_FULL); a second ROLLBACK would
            # hide the error that matters
            if self.db.in_transaction:
                self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")
        self._writes += 1

    def close(self) -> None:
        if self.db is not None:
            self.db.close()
            self.db = None

    # ---- sources --------------------------------------------------------------------
    def add_source(self, path: str | Path) -> None:
        with self._transaction():
            self.db.execute("INSERT OR IGNORE INTO sources(path, added) VALUES (?, ?)",
                            (str(Path(path).resolve()), time.time()))

    def sources(self) -> list[str]:
        return [r[0] for r in self.db.execute("SELECT path FROM sources ORDER BY path")]

    # ---- chats that answer from the library --------------------------------------------
    def attach(self, conv_id: int, scope: list[str | Path] | None = None) -> None:
        value = None if scope is None else json.dumps([str(p) for p in scope])
        with self._transaction():
            self.db.execute("INSERT OR REPLACE INTO chat_attachments(conv_id, scope, attached) "
                            "VALUES (?, ?, ?)", (conv_id, value, time.time()))

    def detach(self, conv_id: int) -> None:
        with self._transaction():
            self.db.execute("DELETE FROM chat_attachments WHERE conv_id = ?", (conv_id,))

    def attachment(self, conv_id: int) -> tuple[bool, list[str] | None]:
        """(attached, its scope: None for the whole library)."""
        row = self.db.execute("SELECT scope FROM chat_attachments WHERE conv_id = ?",
                              (conv_id,)).fetchone()
        if row is None:
            return False, None
        return True, (json.loads(row[0]) if row[0] is not None else None)

    # ---- files ----------------------------------------------------------------------
    def file(self, path: str | Path) -> FileRecord | None:
        row = self.db.execute("SELECT * FROM files WHERE path = ?", (str(path),)).fetchone()
        return _file(row) if row else None

    def files(self, under: str | Path | None = None) -> list[FileRecord]:
        rows = self.db.execute("SELECT * FROM files ORDER BY path").fetchall()
        out = [_file(r) for r in rows]
        return [f for f in out if _is_under(f.path, under)] if under is not None else out

    def replace_file(self, path: str | Path, mtime_ns: int, size: int, sha256: str,
                     chunks: list[Chunk], vectors: np.ndarray | None, embedder: str | None
                     ) -> FileRecord:
        """The file's passages, all of them or none: one transaction."""
        if vectors is not None and len(vectors) != len(chunks):
            raise ValueError(f"{len(chunks)} passages but {len(vectors)} vectors")
        with self._transaction():
            file_id = self._upsert_file(str(path), mtime_ns, size, sha256, "indexed", None,
                                        embedder, len(chunks))
            self.db.executemany(
                "INSERT INTO chunks(file_id, ordinal, page, heading, text, vector) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [(file_id, c.ordinal, c.page, c.heading, c.text,
                  None if vectors is None else np.ascontiguousarray(vectors[i], np.float32)
                  .tobytes()) for i, c in enumerate(chunks)])
        return self.file(path)

    def mark_failed(self, path: str | Path, mtime_ns: int, size: int, sha256: str,
                    message: str) -> None:
        """Kept so the file is not read again until it changes, and so its reason shows."""
        with self._transaction():
            self._upsert_file(str(path), mtime_ns, size, sha256, "failed", message, None, 0)

    def touch(self, path: str | Path, mtime_ns: int) -> None:
        """The file was saved again with the same bytes: nothing to index."""
        with self._transaction():
            self.db.execute("UPDATE files SET mtime_ns = ? WHERE path = ?", (mtime_ns, str(path)))

    def _upsert_file(self, path, mtime_ns, size, sha256, status, error, embedder, n_chunks) -> int:
        row = self.db.execute("SELECT id FROM files WHERE path = ?", (path,)).fetchone()
        if row:
            self.db.execute("DELETE FROM chunks WHERE file_id = ?", (row[0],))
            self.db.execute(
                "UPDATE files SET mtime_ns=?, size=?, sha256=?, status=?, error=?, embedder=?, "
                "n_chunks=?, indexed_at=? WHERE id=?",
                (mtime_ns, size, sha256, status, error, embedder, n_chunks, time.time(), row[0]))
            return row[0]
        cur = self.db.execute(
            "INSERT INTO files(path, mtime_ns, size, sha256, status, error, embedder, n_chunks, "
            "indexed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (path, mtime_ns, size, sha256, status, error, embedder, n_chunks, time.time()))
        return cur.lastrowid

    def forget_file(self, path: str | Path) -> bool:
        """Forgets one file (by its exact path); False when it was not in the library."""
        with self._transaction():
            row = self.db.execute("SELECT id FROM files WHERE path = ?", (str(path),)).fetchone()
            if row is None:
                return False
            self.db.execute("DELETE FROM chunks WHERE file_id = ?", (row[0],))
            self.db.execute("DELETE FROM files WHERE id = ?", (row[0],))
        return True

    def remove(self, path: str | Path) -> int:
        """Forgets a file, or a folder's files and the folder as a source; returns how many
        files went."""
        path = str(path)
        ids = [f.id for f in self.files(under=path)]
        with self._transaction():
            for file_id in ids:
                self.db.execute("DELETE FROM chunks WHERE file_id = ?", (file_id,))
                self.db.execute("DELETE FROM files WHERE id = ?", (file_id,))
            self.db.execute("DELETE FROM sources WHERE path = ?", (path,))
        return len(ids)

    # ---- reading --------------------------------------------------------------------
    def passage(self, chunk_id: int) -> Passage:
        row = self.db.execute(
            "SELECT c.id, f.path, c.page, c.heading, c.text, c.ordinal FROM chunks c "
            "JOIN files f ON f.id = c.file_id WHERE c.id = ?", (chunk_id,)).fetchone()
        if row is None:
            raise LibraryError(f"passage {chunk_id} is not in the library")
        return Passage(*row)

    def count_chunks(self) -> int:
        return int(self.db.execute("SELECT count(*) FROM chunks").fetchone()[0])

    def file_ids(self, scope: list[str | Path] | None) -> set[int] | None:
        """Ids of the files under any of `scope`'s files and folders (None: all)."""
        if scope is None:
            return None
        return {f.id for f in self.files() if any(_is_under(f.path, s) for s in scope)}

    def search_words(self, query: str, k: int = 20, scope=None) -> list[tuple[int, float]]:
        """(passage id, BM25 score, higher is better), best first."""
        q = fts_query(query)
        if q is None:
            return []
        ids = self.file_ids(scope)
        if ids is not None and not ids:
            return []
        where = "" if ids is None else f" AND c.file_id IN ({','.join('?' * len(ids))})"
        # bm25() is lower for better matches; heading words count double
        rows = self.db.execute(
            "SELECT c.id, -bm25(chunks_fts, 1.0, 2.0) FROM chunks_fts "
            "JOIN chunks c ON c.id = chunks_fts.rowid WHERE chunks_fts MATCH ?" + where +
            " ORDER BY bm25(chunks_fts, 1.0, 2.0) LIMIT ?",
            (q, *sorted(ids or ()), k)).fetchall()
        return [(r[0], r[1]) for r in rows]

    def vector_matrix(self, embedder: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(passage ids, their file ids, vectors [n, dim]) of passages embedded by
        `embedder`, cached until the next write."""
        stamp = (self._writes, self.db.execute("PRAGMA data_version").fetchone()[0])
        cached = self._vectors
        if cached is not None and cached[0] == stamp and cached[1] == embedder:
            return cached[2], cached[3], cached[4]
        rows = self.db.execute(
            "SELECT c.id, c.file_id, c.vector FROM chunks c JOIN files f ON f.id = c.file_id "
            "WHERE f.embedder = ? AND c.vector IS NOT NULL ORDER BY c.id", (embedder,)).fetchall()
        ids = np.array([r[0] for r in rows], dtype=np.int64)
        file_ids = np.array([r[1] for r in rows], dtype=np.int64)
        if rows:
            matrix = np.frombuffer(b"".join(r[2] for r in rows), dtype=np.float32)
            matrix = matrix.reshape(len(rows), -1)
        else:
            matrix = np.zeros((0, 0), dtype=np.float32)
        self._vectors = (stamp, embedder, ids, file_ids, matrix)
        return ids, file_ids, matrix

    def search_vectors(self, query_vector: np.ndarray, embedder: str, k: int = 20,
                       scope=None) -> list[tuple[int, float]]:
        """(passage id, cosine), best first."""
        ids, file_ids, matrix = self.vector_matrix(embedder)
        if len(ids) == 0:
            return []
        scores = matrix @ np.asarray(query_vector, dtype=np.float32)
        allowed = self.file_ids(scope)
        if allowed is not None:
            keep = np.isin(file_ids, np.fromiter(allowed, dtype=np.int64, count=len(allowed)))
            scores = np.where(keep, scores, -np.inf)
        k = min(k, len(ids))
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(int(ids[i]), float(scores[i])) for i in top if np.isfinite(scores[i])]

    # ---- health ---------------------------------------------------------------------
    def check(self) -> list[str]:
        """What is inconsistent (an empty list: nothing). Run after a crash by the tests."""
        problems = []
        if self.db.execute("PRAGMA integrity_check").fetchone()[0] != "ok":
            problems.append("sqlite integrity_check failed")
        try:
            self.db.execute("INSERT INTO chunks_fts(chunks_fts, rank) VALUES ('integrity-check', 1)")
        except sqlite3.DatabaseError as e:
            problems.append(f"word index: {e}")
        for r in self.db.execute(
                "SELECT f.path, f.n_chunks, count(c.id) FROM files f "
                "LEFT JOIN chunks c ON c.file_id = f.id GROUP BY f.id "
                "HAVING f.n_chunks != count(c.id)"):
            problems.append(f"{r[0]}: {r[2]} passages stored, {r[1]} expected")
        n = self.db.execute("SELECT count(*) FROM chunks WHERE file_id NOT IN "
                            "(SELECT id FROM files)").fetchone()[0]
        if n:
            problems.append(f"{n} passages belong to no file")
        return problems


def _file(row) -> FileRecord:
    return FileRecord(row["id"], row["path"], row["mtime_ns"], row["size"], row["sha256"],
                      row["status"], row["error"], row["embedder"], row["n_chunks"])


def _is_under(path: str, root: str | Path | None) -> bool:
    if root is None:
        return True
    root = str(root).rstrip(os.sep) or os.sep
    return path == root or path.startswith(root if root.endswith(os.sep) else root + os.sep)
