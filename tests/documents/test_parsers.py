"""Each format's text and where it came from (page, heading), and the files the library
refuses, each with a message that says why."""
from __future__ import annotations

import os

import pypdf
import pytest
from ember.documents.errors import (
    CorruptFile,
    EncryptedFile,
    FileTooLarge,
    FileVanished,
    UnsupportedFile,
)
from ember.documents.parsers import Limits, parse

from tests.support.documents import make_docx, make_pdf


def test_pdf_gives_a_section_per_page(tmp_path):
    p = make_pdf(tmp_path / "lease.pdf", ["Tenancy agreement.\nRent is due monthly.",
                                          "", "Pets (cats only) are allowed."])
    s = parse(p)
    assert [x.page for x in s] == [1, 3]  # the empty page gives nothing
    assert "Rent is due monthly." in s[0].text and "Pets (cats only)" in s[1].text


def test_pdf_with_an_owner_password_only_opens(tmp_path):
    make_pdf(tmp_path / "plain.pdf", ["Readable without a password."])
    w = pypdf.PdfWriter(clone_from=tmp_path / "plain.pdf")
    w.encrypt("", owner_password="owner", algorithm="RC4-128")
    w.write(tmp_path / "owner.pdf")
    assert "Readable without a password." in parse(tmp_path / "owner.pdf")[0].text


def test_pdf_needing_a_password_is_refused(tmp_path):
    make_pdf(tmp_path / "plain.pdf", ["Secret."])
    w = pypdf.PdfWriter(clone_from=tmp_path / "plain.pdf")
    w.encrypt("user-secret", algorithm="RC4-128")
    w.write(tmp_path / "locked.pdf")
    with pytest.raises(EncryptedFile, match="locked.pdf needs a password"):
        parse(tmp_path / "locked.pdf")


@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty"])
def test_damaged_pdf_is_refused(tmp_path, damage):
    good = make_pdf(tmp_path / "good.pdf", ["Some text."]).read_bytes()
    bad = {"truncated": good[:200], "garbage": b"%PDF-1.4\n" + os.urandom(2000),
           "empty": b""}[damage]
    (tmp_path / "bad.pdf").write_bytes(bad)
    with pytest.raises(CorruptFile, match="bad.pdf is damaged or not a PDF"):
        parse(tmp_path / "bad.pdf")


def test_docx_sections_follow_headings(tmp_path):
    p = make_docx(tmp_path / "notes.docx", [
        ("Title", "House rules"), (None, "Be kind."),
        ("Heading1", "Pets"), (None, "Cats are fine."), (None, "Dogs need consent."),
        ("Heading2", "Rent"), (None, "Due on the first.")])
    s = parse(p)
    assert [x.heading for x in s] == ["House rules", "Pets", "Rent"]
    assert s[1].text == "Pets\nCats are fine.\nDogs need consent."


def test_docx_damaged_or_encrypted(tmp_path):
    (tmp_path / "broken.docx").write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(CorruptFile, match="broken.docx is damaged"):
        parse(tmp_path / "broken.docx")
    # Word saves a password-protected .docx as an OLE compound file
    (tmp_path / "locked.docx").write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(4096))
    with pytest.raises(EncryptedFile, match="password-protected"):
        parse(tmp_path / "locked.docx")


def test_markdown_headings_outside_code_fences(tmp_path):
    (tmp_path / "a.md").write_text("Intro line.\n\n# Setup\nInstall it.\n```sh\n# not a heading"
                                   "\nmake\n```\n## Use\nRun it.\n")
    s = parse(tmp_path / "a.md")
    assert [x.heading for x in s] == [None, "Setup", "Use"]
    assert "# not a heading" in s[1].text


def test_html_visible_text_by_heading(tmp_path):
    (tmp_path / "a.html").write_text(
        "<html><head><title>t</title><style>p{color:red}</style></head><body>"
        "<h1>Pets</h1><p>Cats &amp; dogs.</p><script>var x = 'hidden';</script>"
        "<h2>Rent</h2><ul><li>Monthly</li><li>In advance</li></ul></body></html>")
    s = parse(tmp_path / "a.html")
    assert [(x.heading, x.text) for x in s] == [("Pets", "Pets\nCats & dogs."),
                                                ("Rent", "Rent\nMonthly\nIn advance")]


def test_source_code_and_text(tmp_path):
    (tmp_path / "m.py").write_text("def f():\n    return 1\n")
    (tmp_path / "n.txt").write_bytes("caf\xe9 latin-1".encode("latin-1"))
    assert parse(tmp_path / "m.py")[0].text == "def f():\n    return 1\n"
    assert parse(tmp_path / "m.py")[0].heading == "m.py"
    assert parse(tmp_path / "n.txt")[0].text == "café latin-1"


def test_refusals_say_why(tmp_path):
    (tmp_path / "x.bin").write_bytes(b"\x00")
    with pytest.raises(UnsupportedFile, match="does not read .bin files"):
        parse(tmp_path / "x.bin")
    (tmp_path / "y.txt").write_bytes(b"\x7fELF\x00\x00binary")
    with pytest.raises(CorruptFile, match="binary file"):
        parse(tmp_path / "y.txt")
    with pytest.raises(FileVanished, match="gone.txt was removed"):
        parse(tmp_path / "gone.txt")


def test_a_2_gb_file_is_refused_before_it_is_read(tmp_path):
    huge = tmp_path / "huge.txt"
    with open(huge, "wb") as f:
        f.truncate(2 << 30)  # sparse: no disk used
    with pytest.raises(FileTooLarge, match=r"huge.txt is 2,048 MB; .* up to 64 MB"):
        parse(huge)
    with open(tmp_path / "huge.pdf", "wb") as f:
        f.truncate(2 << 30)
    with pytest.raises(FileTooLarge, match="PDF files up to 512 MB"):
        parse(tmp_path / "huge.pdf", Limits())
