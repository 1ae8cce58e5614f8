"""Word (.docx) read as what it is, a zip of XML: paragraphs of word/document.xml in
order, a section per Heading-styled paragraph. No dependency: python-docx would add lxml
for the same walk."""
from __future__ import annotations

import zipfile
from pathlib import Path
from xml.etree import ElementTree

from ..errors import CorruptFile, EncryptedFile
from .section import Section

_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_MAX_XML_BYTES = 512 << 20  # a zip bomb stops here, not in the parser


def _paragraph_text(p) -> str:
    out = []
    for node in p.iter():
        if node.tag == _W + "t" and node.text:
            out.append(node.text)
        elif node.tag == _W + "tab":
            out.append("\t")
        elif node.tag in (_W + "br", _W + "cr"):
            out.append("\n")
    return "".join(out)


def _is_heading(p) -> bool:
    style = p.find(f"{_W}pPr/{_W}pStyle")
    val = style.get(_W + "val", "") if style is not None else ""
    return val.lower().startswith(("heading", "title"))


def parse(path: Path) -> list[Section]:
    with open(path, "rb") as f:
        if f.read(8) == b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1":
            # an OLE container: a password-protected .docx (or an old .doc renamed)
            raise EncryptedFile(f"{path.name} is password-protected (or an old .doc file); "
                                "save it without a password as .docx to add it")
    try:
        with zipfile.ZipFile(path) as z:
            info = z.getinfo("word/document.xml")
            if info.file_size > _MAX_XML_BYTES:
                raise CorruptFile(f"{path.name}: its text part unpacks to "
                                  f"{info.file_size / 2**20:,.0f} MB, past the library's limit")
            root = ElementTree.fromstring(z.read(info))
    except (zipfile.BadZipFile, KeyError, ElementTree.ParseError, EOFError) as e:
        raise CorruptFile(f"{path.name} is damaged or not a Word document ({e})") from None
    out: list[Section] = []
    heading, lines = None, []
    for p in root.iter(_W + "p"):
        text = _paragraph_text(p).strip()
        if not text:
            continue
        if _is_heading(p):
            if lines:
                out.append(Section("\n".join(lines), heading=heading))
            heading, lines = text, [text]
        else:
            lines.append(text)
    if lines:
        out.append(Section("\n".join(lines), heading=heading))
    return out
