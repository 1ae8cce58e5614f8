"""The models the Models page lists: the .gguf files in the models folder, then the models
opened from elsewhere (drop, File > Open, the command line) that still exist, and what
deleting one means (the file inside the folder; only the list entry outside it)."""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class LibraryEntry:
    path: Path
    in_folder: bool  # Delete removes the file; outside the folder it leaves the list only


class DeleteRefused(Exception):
    """A delete the library will not do (the sentence says why)."""


def _same(a: str | Path, b: str | Path) -> bool:
    try:
        return Path(a).resolve() == Path(b).resolve()
    except OSError:
        return str(a) == str(b)


def in_folder(path: str | Path, folder: str | Path) -> bool:
    """Whether path is a file directly in the models folder (as the page lists them)."""
    p = Path(path)
    try:
        return p.resolve().parent == Path(folder).resolve()
    except OSError:
        return False


def library(folder: str | Path, recent: Iterable[str]) -> list[LibraryEntry]:
    """The folder's models by name, then the recent models elsewhere, newest first. A recent
    model whose file is gone is left out; endpoints ("url#model") are listed apart."""
    folder = Path(folder)
    try:
        files = sorted((p for p in folder.glob("*.gguf") if p.is_file()),
                       key=lambda p: p.name.lower())
    except OSError:
        files = []
    out = [LibraryEntry(p, True) for p in files]
    for r in recent:
        if "#" in r or not r:
            continue
        p = Path(r)
        if not p.is_file() or any(_same(p, e.path) for e in out):
            continue
        out.append(LibraryEntry(p, in_folder(p, folder)))
    return out


def delete_model(path: str | Path, folder: str | Path, loaded: str | None) -> None:
    """Deletes a model file of the models folder; raises DeleteRefused (check_deletable) or
    OSError if the file system refuses."""
    check_deletable(path, folder, loaded)
    Path(path).unlink()


def check_deletable(path: str | Path, folder: str | Path, loaded: str | None) -> None:
    """Raises DeleteRefused for the loaded model or a file outside the models folder (which
    the app only forgets)."""
    if loaded and "#" not in loaded and _same(path, loaded):
        raise DeleteRefused("It is the model in use: open another model first, then delete "
                            "this one.")
    if not in_folder(path, folder):
        raise DeleteRefused("Ember deletes only models in its models folder; this one is "
                            "only removed from the list.")
