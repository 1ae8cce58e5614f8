"""`ember embed`: texts from -p and -f (and stdin), OpenAI's list or one array a line, the
engine's vectors; --pooling, --no-normalize, --truncate; the refusals as messages."""
from __future__ import annotations

import contextlib
import io
import json
import sys

import numpy as np
import pytest
from ember.commands import cli
from ember.engine import Embedder, Model

from tools import fetch_assets

pytestmark = pytest.mark.native


@pytest.fixture(scope="module")
def minilm_path(tmp_path_factory):
    from tools.convert_minilm import convert
    return convert(fetch_assets.minilm_dir(), tmp_path_factory.mktemp("cli") / "minilm.f16.gguf", "f16")


@pytest.fixture(scope="module")
def engine(minilm_path):
    model = Model(minilm_path)
    yield model
    model.close()


def embed(*argv, stdin: str | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    old = sys.stdin
    if stdin is not None:
        sys.stdin = io.StringIO(stdin)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = cli.main(["embed", *map(str, argv)])
            except SystemExit as e:
                rc = e.code if isinstance(e.code, int) else 1
                err.write(str(e.code))
    finally:
        sys.stdin = old
    return rc, out.getvalue(), err.getvalue()


def test_prompts_and_a_file_in_order_as_openais_list(minilm_path, engine, tmp_path):
    f = tmp_path / "texts.txt"
    f.write_text("The girl is carrying a baby.\n\n  \nA man is riding a horse.\n", encoding="utf-8")
    rc, out, err = embed("-m", minilm_path, "-p", "A man is eating food.", "-f", f)
    assert rc == 0, err
    body = json.loads(out)
    texts = ["A man is eating food.", "The girl is carrying a baby.", "A man is riding a horse."]
    got = np.array([d["embedding"] for d in body["data"]], dtype=np.float32)
    with Embedder(engine) as e:
        assert np.abs(got - e.embed(texts)).max() < 1e-7
        n = sum(len(e.tokenize(t)) for t in texts)
    assert [d["index"] for d in body["data"]] == [0, 1, 2]
    assert body["usage"] == {"prompt_tokens": n, "total_tokens": n}
    assert "embedded 3 texts" in err and "384 dimensions, pooling mean" in err


def test_jsonl_from_stdin_with_cls_pooling_unnormalised(minilm_path, engine):
    rc, out, err = embed("-m", minilm_path, "-f", "-", "--pooling", "cls", "--no-normalize",
                         "-o", "jsonl", stdin="first line\nsecond line\n")
    assert rc == 0, err
    rows = np.array([json.loads(line) for line in out.splitlines()], dtype=np.float32)
    with Embedder(engine, pooling="cls") as e:
        want = e.embed(["first line", "second line"], normalize=False)
    assert rows.shape == (2, 384) and np.abs(rows - want).max() < 1e-6
    assert np.linalg.norm(rows[0]) > 1.5  # not unit length


def test_too_long_is_a_message_and_truncate_cuts(minilm_path, engine):
    rc, _, err = embed("-m", minilm_path, "-p", "word " * 600)
    assert rc == 1 and "text 1 has 602 tokens" in err and "--truncate 512" in err
    rc, out, err = embed("-m", minilm_path, "-p", "word " * 600, "--truncate", "256", "-o", "jsonl")
    assert rc == 0, err
    with Embedder(engine) as e:
        want = e.embed(["word " * 600], max_tokens=256)[0]
    assert np.abs(np.array(json.loads(out)) - want).max() < 1e-7


def test_refusals_are_messages(minilm_path, starter_model_path):
    rc, _, err = embed("-m", minilm_path)
    assert rc != 0 and "nothing to embed" in err
    rc, _, err = embed("-m", starter_model_path, "-p", "hi")
    assert rc == 1 and "is a text-generation model" in err
    rc, _, err = embed("-m", "/nonexistent/model.gguf", "-p", "hi")
    assert rc == 1 and "ember: error:" in err
