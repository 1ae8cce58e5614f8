"""Bringing the library up to date with files and folders on disk: new and changed files
read, chunked, embedded and stored (each in one transaction), unchanged ones skipped
(mtime and size, then the sha256), vanished ones forgotten. Progress is reported and a
CancelToken is honoured between files and between embedding batches."""
from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..chat.streaming import CancelToken
from .chunking import chunk
from .embedder import Embedder
from .errors import CorruptFile, DocumentError, FileVanished
from .library import Library
from .parsers import DEFAULT_LIMITS, SUFFIXES, Limits, kind_of, parse

EMBED_BATCH = 32
log = logging.getLogger(__name__)


@dataclass
class Progress:
    files_done: int
    files_total: int
    path: str             # the file being read now ("" when done)
    chunks_done: int = 0  # of this file's passages, embedded so far
    chunks_total: int = 0


@dataclass
class IndexReport:
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)  # (path, message)
    cancelled: bool = False


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def walk(root: Path) -> Iterator[Path]:
    """Readable files under root in a stable order; hidden files and folders (".git") and
    symlinked folders are left out, as is what the library cannot read."""
    if root.is_file():
        yield root
        return
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            continue
        sub = []
        for e in entries:
            if e.name.startswith("."):
                continue
            try:
                if e.is_dir(follow_symlinks=False):
                    sub.append(Path(e.path))
                elif e.is_file() and Path(e.name).suffix.lower() in SUFFIXES:
                    yield Path(e.path)
            except OSError:
                continue
        stack.extend(reversed(sub))


def _embed_text(c) -> str:
    # a passage deep in a section no longer shows its heading; give the model both
    if c.heading and not c.text.startswith(c.heading):
        return f"{c.heading}\n{c.text}"
    return c.text


def index_paths(library: Library, paths: list[str | Path], embedder: Embedder | None,
                progress: Callable[[Progress], None] | None = None,
                cancel: CancelToken | None = None, limits: Limits = DEFAULT_LIMITS,
                max_chars: int = 1000, overlap_chars: int = 200) -> IndexReport:
    """Adds `paths` (files and folders) as sources and indexes what changed under them.
    Without an embedder only words are indexed."""
    report = IndexReport()
    roots = [Path(p).resolve() for p in paths]
    for root in roots:
        library.add_source(root)
    found: list[Path] = []
    for root in roots:
        found.extend(walk(root))
    seen = {str(p) for p in found}
    # files the library has under these roots that are no longer there
    for root in roots:
        for f in library.files(under=root):
            if f.path not in seen:
                library.forget_file(f.path)
                report.removed.append(f.path)
    emb_name = embedder.name if embedder is not None else None

    def tell(done, path, cd=0, ct=0):
        if progress is not None:
            progress(Progress(done, len(found), path, cd, ct))

    for done, path in enumerate(found):
        if cancel is not None and cancel.cancelled:
            report.cancelled = True
            break
        key = str(path)
        tell(done, key)
        try:
            st = path.stat()
        except FileNotFoundError:
            _forget(library, key, report, f"{path.name} was removed before it was read")
            continue
        known = library.file(key)
        if known and known.mtime_ns == st.st_mtime_ns and known.size == st.st_size and \
                (known.status == "failed" or known.embedder == emb_name):
            report.unchanged.append(key)
            continue
        try:
            digest = sha256_of(path)
        except FileNotFoundError:
            _forget(library, key, report, f"{path.name} was removed while it was being read")
            continue
        except OSError as e:
            report.failed.append((key, f"{path.name} could not be read ({e.strerror})"))
            continue
        if known and known.sha256 == digest and known.size == st.st_size and \
                (known.status == "failed" or known.embedder == emb_name):
            library.touch(key, st.st_mtime_ns)
            report.unchanged.append(key)
            continue
        try:
            sections = _read(path, limits)
            chunks = chunk(sections, max_chars, overlap_chars, code=kind_of(path) == "code")
            vectors = None
            if embedder is not None and chunks:
                parts = []
                for start in range(0, len(chunks), EMBED_BATCH):
                    if cancel is not None and cancel.cancelled:
                        report.cancelled = True
                        break
                    tell(done, key, start, len(chunks))
                    batch = chunks[start:start + EMBED_BATCH]
                    parts.append(embedder.embed([_embed_text(c) for c in batch]))
                if report.cancelled:
                    break  # this file is left as it was: nothing of it is written
                vectors = np.concatenate(parts).astype(np.float32)
            if not path.exists():
                raise FileVanished(f"{path.name} was removed while it was being indexed")
        except FileVanished as e:
            _forget(library, key, report, str(e))
            continue
        except _Unreadable as e:  # a permission, an I/O error: tried again next time
            report.failed.append((key, str(e)))
            continue
        except DocumentError as e:
            library.mark_failed(key, st.st_mtime_ns, st.st_size, digest, str(e))
            report.failed.append((key, str(e)))
            continue
        library.replace_file(key, st.st_mtime_ns, st.st_size, digest, chunks, vectors, emb_name)
        (report.updated if known else report.added).append(key)
    tell(len(found) if not report.cancelled else done, "")
    return report


class _Unreadable(Exception):
    pass


def _read(path: Path, limits: Limits):
    """parse(), with what a parser was not written for turned into a refusal of this one
    file: one odd file never stops a folder's indexing."""
    try:
        return parse(path, limits)
    except (DocumentError, FileNotFoundError):
        raise
    except OSError as e:
        raise _Unreadable(f"{path.name} could not be read ({e.strerror or e})") from None
    except Exception as e:  # a parser's bug on a strange file
        log.warning("reading %s failed", path, exc_info=True)
        raise CorruptFile(f"Ember could not read {path.name} ({type(e).__name__}: {e})") from None


def _forget(library: Library, key: str, report: IndexReport, message: str) -> None:
    if library.forget_file(key):
        report.removed.append(key)
    report.failed.append((key, message))
