"""The `ember` command explains itself: --help says that `ember MODEL.gguf` opens the app,
every `run` option has help text with its default, and `ember notes.md` (no model) says
what is wrong instead of argparse's "invalid choice"."""
from __future__ import annotations

import argparse
import re

import pytest

from ember.commands import cli


def test_help_says_a_model_file_opens_the_app(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert re.search(r"ember MODEL\.gguf\s+open the app with that model", out), out
    assert "ember COMMAND --help" in out


def _run_parser() -> argparse.ArgumentParser:
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["run"]


def test_every_run_option_has_help_and_its_default():
    run = _run_parser()
    help_text = run.format_help()
    assert help_text.startswith("usage: ember run ")
    options = [a for a in run._actions if a.option_strings and a.dest != "help"]
    assert {a.dest for a in options} >= {"model", "ctx_size", "threads", "prompt", "n_predict",
                                         "temp", "seed", "top_k", "top_p", "min_p",
                                         "repeat_penalty", "repeat_last_n"}
    formatter = run._get_formatter()
    for a in options:
        assert a.help, f"{a.option_strings} has no help"
        shown = formatter._expand_help(a)
        if a.required:
            continue  # -m and -p: nothing to default to
        assert "default" in shown, f"{a.option_strings}: {shown!r} does not give its default"
        if a.default is not None:
            assert f"(default: {a.default})" in shown, (a.option_strings, shown)
    # and what --help prints has them (argparse wraps lines: compare without the breaks)
    flat = " ".join(help_text.split())
    for value in ("(default: 128)", "(default: 0.8)", "(default: 40)", "(default: 0.95)",
                  "(default: 0.05)", "(default: 1.0)", "(default: 64)"):
        assert value in flat


def test_a_file_that_is_not_a_model_gets_a_clear_message(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.md").write_text("# my notes\n")
    assert cli.main(["notes.md"]) == 2
    err = capsys.readouterr().err
    assert "notes.md is not a GGUF model" in err and "ember MODEL.gguf" in err
    assert "invalid choice" not in err
    assert cli.main(["missing.txt"]) == 2
    err = capsys.readouterr().err
    assert "missing.txt does not exist" in err and "invalid choice" not in err
    assert cli.main([str(tmp_path)]) == 2
    assert "is a folder, not a model" in capsys.readouterr().err


def test_a_gguf_file_under_another_name_still_opens_the_app(tmp_path, monkeypatch):
    seen = {}
    monkeypatch.setattr(cli, "cmd_default", lambda args: seen.setdefault("model", args.model_file)
                        and 0)
    model = tmp_path / "model.bin"
    model.write_bytes(b"GGUF" + bytes(60))
    assert cli.main([str(model)]) == 0
    assert seen["model"] == str(model)


def test_a_mistyped_command_is_still_argparses_error(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["chta"])
    assert e.value.code == 2
    assert "invalid choice: 'chta'" in capsys.readouterr().err


def test_building_the_parser_imports_no_numpy():
    """Every `ember` command builds the whole parser (quantize's and perplexity's options
    too). numpy there cost every command about 12 MiB of resident memory, which `ember
    bench` then reported in its peak RSS, and 0.1 s of start-up."""
    import os
    import subprocess
    import sys
    from pathlib import Path
    code = "import sys; from ember.commands import cli; cli.build_parser(); print(sorted(m for m in sys.modules if m == 'numpy'))"
    app = Path(cli.__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(app)}).stdout
    assert out.strip() == "[]", out
