"""HTML with the standard library's parser: the visible text, a section per heading
(h1-h6); script, style and the like are left out, block elements end a line."""
from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

from .section import Section
from .text import decode

_HIDDEN = {"script", "style", "noscript", "template", "svg", "head"}
_BLOCK = {"p", "div", "br", "li", "tr", "td", "th", "section", "article", "blockquote", "pre",
          "dd", "dt", "table", "ul", "ol", "hr", "header", "footer", "main", "nav", "figure"}
_HEADINGS = {"h1", "h2", "h3", "h4", "h5", "h6"}


class _TextCollector(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.sections: list[Section] = []
        self.heading: str | None = None
        self.parts: list[str] = []
        self.hidden = 0
        self.in_heading: list[str] | None = None

    def _flush(self):
        text = "".join(self.parts)
        text = "\n".join(" ".join(line.split()) for line in text.split("\n"))
        text = "\n".join(line for line in text.split("\n") if line)
        if text:
            self.sections.append(Section(text, heading=self.heading))
        self.parts = []

    def handle_starttag(self, tag, attrs):
        if tag in _HIDDEN:
            self.hidden += 1
        elif tag in _HEADINGS:
            self._flush()
            self.in_heading = []
        elif tag in _BLOCK:
            self.parts.append("\n")

    def handle_endtag(self, tag):
        if tag in _HIDDEN:
            self.hidden = max(0, self.hidden - 1)
        elif tag in _HEADINGS and self.in_heading is not None:
            self.heading = " ".join("".join(self.in_heading).split()) or None
            self.parts.append((self.heading or "") + "\n")
            self.in_heading = None
        elif tag in _BLOCK:
            self.parts.append("\n")

    def handle_data(self, data):
        if self.hidden:
            return
        if self.in_heading is not None:
            self.in_heading.append(data)
        else:
            self.parts.append(data)


def sections(markup: str) -> list[Section]:
    p = _TextCollector()
    p.feed(markup)
    p.close()
    p._flush()
    return p.sections


def parse(path: Path) -> list[Section]:
    return sections(decode(path.read_bytes(), path.name))
