"""Passages: whole sentences up to a size, the overlap with the passage before, and never
across a page or a heading."""
from __future__ import annotations

import itertools

from ember.documents.chunking import chunk, units
from ember.documents.parsers.section import Section

TEXT = " ".join(f"Sentence {i} is about topic {i % 7}." for i in range(80))


def test_passages_are_whole_sentences_within_the_size():
    cs = chunk([Section(TEXT)], max_chars=300, overlap_chars=80)
    assert len(cs) > 5
    for c in cs:
        assert len(c.text) <= 300
        assert c.text.startswith("Sentence ") and c.text.endswith(".")


def test_each_passage_starts_with_the_last_sentences_of_the_one_before():
    cs = chunk([Section(TEXT)], max_chars=300, overlap_chars=80)
    for a, b in itertools.pairwise(cs):
        first = b.text.split(". ", 1)[0] + "."
        overlap = a.text[a.text.index(first):]
        assert b.text.startswith(overlap) and 25 < len(overlap) <= 80
    # every sentence is in some passage
    joined = " ".join(c.text for c in cs)
    assert all(f"Sentence {i} " in joined for i in range(80))


def test_no_passage_crosses_a_section():
    secs = [Section("Page one. " * 5, page=1), Section("Page two. " * 5, page=2, heading="H")]
    cs = chunk(secs, max_chars=1000)
    assert [(c.page, c.heading, c.ordinal) for c in cs] == [(1, None, 0), (2, "H", 1)]
    assert "two" not in cs[0].text and "one" not in cs[1].text


def test_abbreviations_and_numbers_stay_in_their_sentence():
    assert units("Pay e.g. by card. It costs 3.14 dollars. Done") == [
        "Pay e.g. by card. ", "It costs 3.14 dollars. ", "Done\n\n"]


def test_a_run_on_line_is_cut_at_spaces():
    cs = chunk([Section("word " * 1000)], max_chars=200, overlap_chars=0)
    assert all(len(c.text) <= 200 for c in cs)
    assert sum(c.text.count("word") for c in cs) == 1000


def test_code_is_cut_between_lines():
    code = "".join(f"line_{i} = {i}\n" for i in range(200))
    cs = chunk([Section(code)], max_chars=250, overlap_chars=0, code=True)
    for c in cs:
        assert all(line.startswith("line_") for line in c.text.split("\n"))
    assert sum(len(c.text.split("\n")) for c in cs) == 200


def test_a_title_alone_joins_the_next_section():
    secs = [Section("House rules", heading="House rules"), Section("Pets\nCats only.", heading="Pets"),
            Section("Rent\nMonthly.", heading="Rent")]
    cs = chunk(secs)
    assert [(c.heading, c.text) for c in cs] == [("Pets", "House rules\n\nPets Cats only."),
                                                 ("Rent", "Rent Monthly.")]
