"""Plain text and source code: decoded as UTF-8 (else Latin-1, which never fails); code
keeps its lines, so a chunk boundary falls between lines, not inside one."""
from __future__ import annotations

from pathlib import Path

from ..errors import CorruptFile
from .section import Section


def decode(raw: bytes, name: str) -> str:
    if b"\x00" in raw[:8192]:
        raise CorruptFile(f"{name} looks like a binary file, not text")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def parse(path: Path, code: bool = False) -> list[Section]:
    text = decode(path.read_bytes(), path.name).replace("\r\n", "\n")
    return [Section(text, heading=path.name if code else None)] if text.strip() else []
