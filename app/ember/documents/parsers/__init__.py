"""Text out of a file, as sections (a page, or the text under a heading), by the file's
kind; one module per format. `parse` is the door; `SUFFIXES` what the library reads."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import FileTooLarge, FileVanished, UnsupportedFile
from . import docx, html, markdown, pdf, text
from .section import Section

__all__ = ["SUFFIXES", "Limits", "Section", "kind_of", "parse"]

# suffix -> the module that reads it; source code is read as plain text, by lines
_BY_SUFFIX = {".pdf": pdf, ".docx": docx, ".md": markdown, ".markdown": markdown,
              ".html": html, ".htm": html, ".txt": text, ".text": text, ".rst": text}
CODE_SUFFIXES = frozenset(
    [".py", ".pyi", ".c", ".h", ".cc", ".cpp", ".hpp", ".cxx", ".cu", ".m", ".mm", ".rs", ".go", ".java", ".kt", ".kts", ".scala", ".swift", ".js", ".mjs", ".ts", ".tsx", ".jsx", ".rb", ".php", ".pl", ".lua", ".r", ".jl", ".cs", ".fs", ".sh", ".bash", ".zsh", ".ps1", ".sql", ".toml", ".yaml", ".yml", ".ini", ".cfg", ".json", ".xml", ".css", ".scss", ".cmake", ".mk", ".zig", ".dart", ".hs", ".ml", ".ex", ".exs", ".erl", ".clj", ".vue"])
SUFFIXES = frozenset(_BY_SUFFIX) | CODE_SUFFIXES


@dataclass(frozen=True)
class Limits:
    """What the library refuses to read: files past these sizes (bytes). A PDF's text is a
    small part of its bytes (images, fonts), so it may be larger than a text file."""
    max_text_bytes: int = 64 << 20
    max_pdf_bytes: int = 512 << 20
    max_docx_bytes: int = 256 << 20
    max_pages: int = 20_000


DEFAULT_LIMITS = Limits()


def kind_of(path: Path) -> str | None:
    s = path.suffix.lower()
    if s in CODE_SUFFIXES:
        return "code"
    mod = _BY_SUFFIX.get(s)
    return mod.__name__.rsplit(".", 1)[1] if mod else None


def parse(path: str | Path, limits: Limits = DEFAULT_LIMITS) -> list[Section]:
    """The file's sections, or a DocumentError saying why not."""
    path = Path(path)
    kind = kind_of(path)
    if kind is None:
        raise UnsupportedFile(f"{path.name}: Ember does not read {path.suffix or 'extensionless'} "
                              "files (PDF, Word, Markdown, HTML, text and source code)")
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise FileVanished(f"{path.name} was removed before it could be read") from None
    cap = {"pdf": limits.max_pdf_bytes, "docx": limits.max_docx_bytes}.get(kind,
                                                                          limits.max_text_bytes)
    if size > cap:
        raise FileTooLarge(f"{path.name} is {size / 2**20:,.0f} MB; the library reads "
                           f"{kind.upper() if kind == 'pdf' else kind} files up to "
                           f"{cap / 2**20:,.0f} MB")
    try:
        if kind == "code":
            return text.parse(path, code=True)
        if kind == "pdf":
            return pdf.parse(path, max_pages=limits.max_pages)
        return _BY_SUFFIX[path.suffix.lower()].parse(path)
    except FileNotFoundError:
        raise FileVanished(f"{path.name} was removed while it was being read") from None
