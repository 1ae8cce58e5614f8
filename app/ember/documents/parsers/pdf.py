"""PDF with pypdf (pure Python: no native library to ship per platform): a section per
page. An encrypted file opens when its user password is empty (owner-only protection,
common for "no copying" PDFs); otherwise it is refused with a message."""
from __future__ import annotations

import logging
from pathlib import Path

from ..errors import CorruptFile, EncryptedFile
from .section import Section


def parse(path: Path, max_pages: int = 20_000) -> list[Section]:
    import pypdf
    from pypdf.errors import DependencyError, FileNotDecryptedError, PdfReadError, PdfStreamError

    # pypdf logs every recoverable oddity of a damaged file as a warning; the library
    # reports one message per file instead
    logging.getLogger("pypdf").setLevel(logging.ERROR)
    try:
        reader = pypdf.PdfReader(str(path), strict=False)
        if reader.is_encrypted:
            try:
                ok = reader.decrypt("")
            except (NotImplementedError, DependencyError) as e:
                raise EncryptedFile(f"{path.name} is encrypted in a way Ember cannot open "
                                    f"({e})") from None
            if not ok:
                raise EncryptedFile(f"{path.name} needs a password to open; remove the "
                                    "password (print it to a new PDF) to add it")
        n = len(reader.pages)
        if n > max_pages:
            raise CorruptFile(f"{path.name} has {n:,} pages; the library reads up to "
                              f"{max_pages:,}")
        out = []
        for i, page in enumerate(reader.pages):
            text = page.extract_text() or ""
            if text.strip():
                out.append(Section(text, page=i + 1))
        return out
    except FileNotDecryptedError:
        raise EncryptedFile(f"{path.name} needs a password to open") from None
    except (PdfReadError, PdfStreamError, ValueError, KeyError, TypeError, AttributeError,
            IndexError, RecursionError, AssertionError, OSError) as e:
        if isinstance(e, FileNotFoundError):
            raise
        raise CorruptFile(f"{path.name} is damaged or not a PDF ({type(e).__name__}: {e})"
                          ) from None

