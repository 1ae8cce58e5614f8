"""The terminal chat fits a long chat into the context the way the app does: the oldest
turns are left out (and it says so) instead of the engine running out of room."""
from __future__ import annotations

import io

import pytest

pytestmark = pytest.mark.native


def test_terminal_chat_drops_the_oldest_turns_and_says_so(starter_model_path, capsys):
    from ember.engine import SamplingParams
    from ember.commands.terminal import chat_loop
    long_line = "Please remember these words: " + "apple banana cherry " * 15
    out = io.StringIO()
    rc = chat_loop(starter_model_path, n_ctx=160, params=SamplingParams(temperature=0.0),
                   max_tokens=8, stdin=io.StringIO((long_line + "\n") * 4 + "\n"), stdout=out)
    err = capsys.readouterr().err
    assert rc == 0
    assert out.getvalue().count("\n> ") == 5  # four turns answered, then the quit prompt
    assert "did not fit in the 160-token context" in err
    assert "ember:" not in err  # nothing refused: every turn fit once the oldest went
    assert err.count("tokens, ") == 4  # a reply's statistics line per turn


def test_terminal_chat_refuses_under_the_stop_policy(starter_model_path, capsys):
    from ember.engine import SamplingParams
    from ember.commands.terminal import chat_loop
    long_line = "apple banana cherry " * 15
    rc = chat_loop(starter_model_path, n_ctx=160, params=SamplingParams(temperature=0.0),
                   max_tokens=8, stdin=io.StringIO((long_line + "\n") * 3 + "\n"),
                   stdout=io.StringIO(), policy="stop")
    err = capsys.readouterr().err
    assert rc == 0
    assert "ember: The conversation fills the context window" in err
