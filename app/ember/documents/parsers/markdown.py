"""Markdown: a section per heading (ATX `#` headings, outside fenced code)."""
from __future__ import annotations

import re
from pathlib import Path

from .section import Section
from .text import decode

_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")


def sections(text: str) -> list[Section]:
    out: list[Section] = []
    heading, lines, in_fence = None, [], False
    for line in text.replace("\r\n", "\n").split("\n"):
        if _FENCE.match(line):
            in_fence = not in_fence
        m = None if in_fence else _HEADING.match(line)
        if m:
            if "".join(lines).strip():
                out.append(Section("\n".join(lines).strip(), heading=heading))
            heading, lines = m.group(2), [m.group(2)]
        else:
            lines.append(line)
    if "".join(lines).strip():
        out.append(Section("\n".join(lines).strip(), heading=heading))
    return out


def parse(path: Path) -> list[Section]:
    return sections(decode(path.read_bytes(), path.name))
