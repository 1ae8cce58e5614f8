#!/usr/bin/env python3
"""Builds benchmarks/retrieval_corpus/docs/ from its source/ texts: some stay Markdown,
text or code, others are written as PDF (a page per `---`), Word and HTML, so the retrieval
benchmark reads every format the library does.

    python tools/make_retrieval_corpus.py

The texts were written for Ember and are dedicated to the public domain (CC0)."""
from __future__ import annotations

import html
import re
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tools.make_documents import make_docx, make_pdf

CORPUS = ROOT / "benchmarks" / "retrieval_corpus"
AS_PDF = {"boiler_manual.md", "medicine_leaflet.md"}
AS_DOCX = {"car_insurance.md", "bike_maintenance.md"}
AS_HTML = {"washing_machine.md", "router_setup.md", "first_aid.md"}
_HEADING = re.compile(r"^(#{1,6})\s+(.*)$")


def _blocks(markdown: str) -> list[tuple[int, str]]:
    """(heading level or 0, text) per paragraph."""
    out = []
    for para in re.split(r"\n\s*\n", markdown.strip()):
        m = _HEADING.match(para.strip())
        out.append((len(m.group(1)), m.group(2)) if m else (0, " ".join(para.split())))
    return out


def to_pdf(src: str, out: Path) -> None:
    pages = []
    for page in src.split("\n---\n"):
        pages.append("\n\n".join(text for _, text in _blocks(page)))
    make_pdf(out, pages)


def to_docx(src: str, out: Path) -> None:
    make_docx(out, [(f"Heading{level}" if level else None, html.escape(text))
                    for level, text in _blocks(src)])


def to_html(src: str, out: Path) -> None:
    body = [f"<h{level}>{html.escape(text)}</h{level}>" if level else
            f"<p>{html.escape(text)}</p>" for level, text in _blocks(src)]
    title = html.escape(_blocks(src)[0][1])
    out.write_text(f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{title}</title>"
                   "<style>body{font-family:sans-serif}</style></head>\n<body>\n"
                   + "\n".join(body) + "\n<script>window.analytics = []</script>\n</body></html>\n",
                   encoding="utf-8")


def main() -> int:
    docs = CORPUS / "docs"
    shutil.rmtree(docs, ignore_errors=True)
    docs.mkdir(parents=True)
    for src in sorted((CORPUS / "source").iterdir()):
        text = src.read_text(encoding="utf-8")
        if src.name in AS_PDF:
            to_pdf(text, docs / (src.stem + ".pdf"))
        elif src.name in AS_DOCX:
            to_docx(text, docs / (src.stem + ".docx"))
        elif src.name in AS_HTML:
            to_html(text, docs / (src.stem + ".html"))
        else:
            shutil.copy(src, docs / src.name)
    total = sum(p.stat().st_size for p in docs.iterdir())
    print(f"{docs}: {len(list(docs.iterdir()))} files, {total:,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
