"""A run of a document's text with where it came from."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Section:
    text: str
    page: int | None = None      # 1-based, for paged formats (PDF)
    heading: str | None = None   # the nearest heading above the text, where the format has them
