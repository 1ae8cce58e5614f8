"""`ember serve` on the command line: every option has help with its default, and a missing
file, a file that is no model or a bad --parallel is a one-line message and an exit code,
not a traceback or a server that never answers."""
from __future__ import annotations

import argparse
import os
import subprocess
import sys

from ember.commands import cli

from tests.support.server_process import APP


def _serve(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([APP, os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-m", "ember", "serve", *args], capture_output=True,
                          text=True, env=env, timeout=300, check=False)


def test_every_serve_option_has_help_and_its_default():
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    serve = sub.choices["serve"]
    options = [a for a in serve._actions if a.option_strings and a.dest != "help"]
    assert {a.dest for a in options} >= {"model", "host", "port", "parallel", "ctx_size",
                                         "threads", "api_key", "cors"}
    formatter = serve._get_formatter()
    for a in options:
        if a.required:
            continue
        assert "default" in formatter._expand_help(a), a.option_strings
    assert serve.get_default("host") == "127.0.0.1" and serve.get_default("port") == 8080


def test_a_missing_model_file_is_exit_2(tmp_path):
    r = _serve("-m", str(tmp_path / "nothing.gguf"), "--port", "0")
    assert r.returncode == 2 and "does not exist" in r.stderr and "Traceback" not in r.stderr


def test_a_file_that_is_no_model_stops_the_server_with_the_reason(tmp_path):
    bad = tmp_path / "notes.gguf"
    bad.write_text("these are notes\n")
    r = _serve("-m", str(bad), "--port", "0")
    assert r.returncode == 1
    assert "cannot load" in r.stderr and "not a GGUF file" in r.stderr
    assert "Traceback" not in r.stderr


def test_parallel_out_of_range_is_exit_2(starter_model_path):
    r = _serve("-m", str(starter_model_path), "--port", "0", "--parallel", "0")
    assert r.returncode == 2 and "--parallel" in r.stderr
