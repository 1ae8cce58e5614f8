"""A question answered from the library: the passages found for it put in front of the
question as numbered sources, fitted to a budget, and the [n] citations read back out of
the answer. Knows no Qt and no engine, so the terminal chat can share it."""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from pathlib import Path

from .retrieval import Hit

INSTRUCTIONS = ("Answer the question from the numbered passages of the user's documents "
                "below, and cite the passages you use as [1], [2]. If they do not hold the "
                "answer, say so.")
_CITATION = re.compile(r"\[(\d+(?:\s*,\s*\d+)*)\]")


@dataclass(frozen=True)
class Citation:
    n: int                # the number the answer cites it by
    path: str
    page: int | None
    heading: str | None
    text: str

    @property
    def label(self) -> str:
        return Path(self.path).name + (f", page {self.page}" if self.page else "")

    def as_meta(self) -> dict:
        return asdict(self)


def sources_block(citations: list[Citation]) -> str:
    parts = [INSTRUCTIONS, ""]
    for c in citations:
        parts.append(f"[{c.n}] {c.label}" + (f" ({c.heading})" if c.heading else ""))
        parts.append(c.text.strip())
        parts.append("")
    return "\n".join(parts).rstrip()


def ground(messages: list[dict], hits: list[Hit], budget_chars: int
           ) -> tuple[list[dict], list[Citation]]:
    """The messages with the last user message preceded by the sources, as many passages
    (best first) as fit in budget_chars, and the citations they were numbered with. The
    stored chat is untouched: only what the model reads changes."""
    citations: list[Citation] = []
    used = len(INSTRUCTIONS)
    for hit in hits:
        p = hit.passage
        cost = len(p.text) + len(p.path) + 16
        if citations and used + cost > budget_chars:
            break
        if not citations and cost > budget_chars:  # one passage cut to the budget
            text = p.text[:max(budget_chars - len(p.path) - 16, 0)]
        else:
            text = p.text
        citations.append(Citation(len(citations) + 1, p.path, p.page, p.heading, text))
        used += cost
    last_user = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=None)
    if not citations or last_user is None:
        return list(messages), []
    out = [dict(m) for m in messages]
    question = out[last_user]["content"]
    out[last_user]["content"] = f"{sources_block(citations)}\n\nQuestion: {question}"
    return out, citations


def cited(answer: str, citations: list[Citation]) -> list[Citation]:
    """The citations the answer refers to ([2], [1, 3]), in order of first mention; numbers
    that match no passage are ignored."""
    by_n = {c.n: c for c in citations}
    out: list[Citation] = []
    for m in _CITATION.finditer(answer):
        for n in (int(x) for x in m.group(1).split(",")):
            if n in by_n and by_n[n] not in out:
                out.append(by_n[n])
    return out
