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


def test_terminal_chat_shows_harmony_analysis_as_thoughts(templates_dir, tmp_path, capsys):
    """gpt-oss's format in the terminal: the analysis channel is printed as thoughts (each
    line marked where there are no colours), the final channel as the answer, and the
    second turn's prompt renders (the template refuses channel tags in a message)."""
    from ember.commands.terminal import THOUGHT_PREFIX, chat_loop
    from ember.engine import SamplingParams
    from tests.support.chain_models import harmony_app_model
    source = (templates_dir / "openai-gpt-oss-120b.jinja").read_text(encoding="utf-8")
    path = harmony_app_model(source).write(tmp_path / "harmony.gguf")
    out = io.StringIO()
    rc = chat_loop(path, n_ctx=1024, params=SamplingParams(temperature=0.0), max_tokens=32,
                   stdin=io.StringIO("Hello\nAgain\n\n"), stdout=out)
    err = capsys.readouterr().err
    assert rc == 0 and "ember:" not in err
    turn = f"{THOUGHT_PREFIX}Hmm, a greeting.\n\nHi there\n"
    assert out.getvalue() == f"\n> {turn}\n> {turn}\n> "
    assert "<|" not in out.getvalue()
