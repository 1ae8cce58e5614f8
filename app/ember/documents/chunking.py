"""Sections cut into passages for retrieval: whole sentences (lines, for code) packed up to
a size, each passage starting with the last sentences of the one before (the overlap), and
never across a section's edge, so a passage has one page and one heading."""
from __future__ import annotations

import re
from dataclasses import dataclass

from .parsers.section import Section

# a sentence ends at . ! ? (with closing quotes or brackets) before white space; the
# capital-letter look-ahead keeps "e.g. this" and "3.14" whole
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")
_PARAGRAPH = re.compile(r"\n\s*\n")
_SHORT = 80  # characters: one line this short alone in a section is a title, not a passage


@dataclass(frozen=True)
class Chunk:
    text: str
    page: int | None
    heading: str | None
    ordinal: int  # position in the file, from 0


def units(text: str, code: bool = False) -> list[str]:
    """Sentences (code: lines) with paragraph breaks kept as a trailing newline."""
    if code:
        return [line + "\n" for line in text.split("\n")]
    out = []
    for para in _PARAGRAPH.split(text):
        para = " ".join(para.split())
        if not para:
            continue
        sentences = _SENTENCE_END.split(para)
        out.extend(s + " " for s in sentences[:-1])
        out.append(sentences[-1] + "\n\n")
    return out


def _hard_split(unit: str, max_chars: int) -> list[str]:
    """A unit longer than a chunk (a run-on line, a table) cut at white space."""
    pieces, rest = [], unit
    while len(rest) > max_chars:
        cut = rest.rfind(" ", max_chars // 2, max_chars)
        cut = cut + 1 if cut > 0 else max_chars
        pieces.append(rest[:cut])
        rest = rest[cut:]
    if rest:
        pieces.append(rest)
    return pieces


def chunk_section(section: Section, max_chars: int = 1000, overlap_chars: int = 200,
                  code: bool = False) -> list[str]:
    parts = []
    for u in units(section.text, code):
        parts.extend(_hard_split(u, max_chars) if len(u) > max_chars else [u])
    chunks: list[str] = []
    current: list[str] = []
    size = 0
    fresh = 0  # units in `current` not already in the previous chunk
    for part in parts:
        if current and size + len(part) > max_chars and fresh:
            chunks.append("".join(current).strip())
            # carry the tail of this chunk over, whole units only, at most overlap_chars
            tail, tail_size = [], 0
            for u in reversed(current):
                if tail_size + len(u) > overlap_chars:
                    break
                tail.insert(0, u)
                tail_size += len(u)
            if tail_size + len(part) > max_chars:
                tail, tail_size = [], 0
            current, size, fresh = tail, tail_size, 0
        current.append(part)
        size += len(part)
        fresh += 1
    if fresh and "".join(current).strip():
        chunks.append("".join(current).strip())
    return [c for c in chunks if c]


def chunk(sections: list[Section], max_chars: int = 1000, overlap_chars: int = 200,
          code: bool = False) -> list[Chunk]:
    out: list[Chunk] = []
    pending = ""  # a section that is only a title line joins the next one
    for i, s in enumerate(sections):
        text = f"{pending}\n\n{s.text}" if pending else s.text
        pending = ""
        following = sections[i + 1] if i + 1 < len(sections) else None
        title_only = "\n" not in text.strip() and len(text.strip()) < _SHORT
        if title_only and following is not None and following.page == s.page:
            pending = text.strip()
            continue
        for piece in chunk_section(Section(text, s.page, s.heading), max_chars, overlap_chars,
                                   code):
            out.append(Chunk(piece, s.page, s.heading, len(out)))
    return out
