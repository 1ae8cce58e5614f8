"""Passages put in front of a question as numbered sources within a budget, and the
citations read back from an answer."""
from __future__ import annotations

from ember.documents.grounding import INSTRUCTIONS, Citation, cited, ground
from ember.documents.library import Passage
from ember.documents.retrieval import Hit


def _hit(i, path, text, page=None):
    return Hit(Passage(i, path, page, None, text, 0), 1.0 / i, i, i)


HITS = [_hit(1, "/d/lease.pdf", "Cats are allowed.", page=3),
        _hit(2, "/d/notes.md", "Dogs need consent."),
        _hit(3, "/d/long.txt", "x" * 5000)]
CHAT = [{"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Earlier question"},
        {"role": "assistant", "content": "Earlier answer"},
        {"role": "user", "content": "Can I keep a cat?"}]


def test_sources_go_before_the_last_question_only():
    msgs, cites = ground(CHAT, HITS, budget_chars=1000)
    assert [c.n for c in cites] == [1, 2]  # the 5,000-character passage does not fit
    assert msgs[:3] == CHAT[:3] and CHAT[3]["content"] == "Can I keep a cat?"
    assert msgs[3]["content"] == (f"{INSTRUCTIONS}\n\n[1] lease.pdf, page 3\nCats are allowed."
                                  "\n\n[2] notes.md\nDogs need consent.\n\n"
                                  "Question: Can I keep a cat?")


def test_a_first_passage_past_the_budget_is_cut_not_dropped():
    msgs, cites = ground(CHAT, HITS[2:], budget_chars=500)
    assert msgs[-1]["content"].endswith("Question: Can I keep a cat?")
    assert len(cites) == 1 and len(cites[0].text) <= 500


def test_no_hits_leave_the_chat_as_it_is():
    assert ground(CHAT, [], 1000) == (CHAT, [])


def test_cited_reads_numbers_in_order_and_ignores_unknown_ones():
    cites = [Citation(n, f"/d/{n}.txt", None, None, "t") for n in (1, 2, 3)]
    answer = "Cats are fine [2]. Dogs too [1, 3], see [2] and [7]."
    assert [c.n for c in cited(answer, cites)] == [2, 1, 3]
    assert cited("No sources.", cites) == []
