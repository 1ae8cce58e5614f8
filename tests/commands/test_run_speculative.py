"""`ember run` / `ember chat` with speculative decoding: the printed greedy text is the
plain one, the drafts' acceptance goes to stderr, a draft model with another vocabulary and
bad draft lengths are refused with the reason."""
from __future__ import annotations

import io

import pytest
from ember.commands import cli

from tools import make_arch_models

pytestmark = pytest.mark.native

PROMPT = "def add(a, b):\n    return a + b\n\n# the same again:\ndef add(a, b):\n"


def run(capsys, *args: str) -> tuple[str, str]:
    assert cli.main(list(args)) == 0
    return capsys.readouterr()


def test_lookup_and_draft_model_print_the_plain_greedy_text(model_variants, capsys):
    target, draft = str(model_variants["Q4_1"]), str(model_variants["Q4_0"])
    base = ["run", "-m", target, "-p", PROMPT, "-n", "32", "--temp", "0", "-t", "2"]
    plain, err = run(capsys, *base)
    assert "speculative" not in err
    looked, err = run(capsys, *base, "--lookup", "--draft-max", "6")
    assert looked == plain
    assert "[speculative: prompt lookup (1-3-grams), up to 6 tokens;" in err
    drafted, err = run(capsys, *base, "-md", draft, "--draft-min", "2")
    assert drafted == plain
    assert "draft model SmolLM2-135M-Instruct.Q4_0.gguf" in err and "accepted (" in err


def test_a_draft_model_with_another_vocabulary_is_refused(starter_model_path, capsys):
    other = str(make_arch_models.build("qwen3"))
    assert cli.main(["run", "-m", str(starter_model_path), "-p", "Hi", "-n", "4", "-md", other]) == 1
    err = capsys.readouterr().err
    assert "cannot draft for" in err and "vocabulary sizes differ: 49152" in err


def test_bad_draft_lengths_are_refused(starter_model_path, capsys):
    assert cli.main(["run", "-m", str(starter_model_path), "-p", "Hi", "--lookup",
                     "--draft-min", "5", "--draft-max", "3"]) == 1
    assert "--draft-min between 0 and it" in capsys.readouterr().err


def test_terminal_chat_drafts_and_says_what_it_accepted(starter_model_path, capsys):
    from ember.commands.terminal import chat_loop
    from ember.engine import SamplingParams, SpeculativeParams
    out_plain, out_fast = io.StringIO(), io.StringIO()
    line = "Repeat after me: the quick brown fox jumps over the lazy dog.\n\n"
    greedy = SamplingParams(temperature=0.0)
    assert chat_loop(starter_model_path, n_ctx=512, params=greedy, max_tokens=24,
                     stdin=io.StringIO(line), stdout=out_plain) == 0
    assert chat_loop(starter_model_path, n_ctx=512, params=greedy, max_tokens=24,
                     stdin=io.StringIO(line), stdout=out_fast,
                     speculative=SpeculativeParams(lookup=True)) == 0
    assert out_fast.getvalue() == out_plain.getvalue()
