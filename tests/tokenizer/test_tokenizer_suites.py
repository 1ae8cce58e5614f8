"""llama.cpp's tokenizer suites (ggml-vocab-*.gguf + .inp/.out) through Ember.

This is the acceptance bar for the tokenizer: every case of every vocabulary
that ships an .inp/.out pair must produce exactly the expected ids. The flags
mirror llama.cpp's tests/test-tokenizer-0.cpp: add_special=False,
parse_special=False.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from ember.engine import Model

SEPARATOR = b"\n__ggml_vocab_test__\n"

# The suites in llama-cpp-python 0.3.36's vendored llama.cpp. Listed (not
# discovered) so each is its own test; test_every_suite_is_listed catches new ones.
SUITES = [
    "bert-bge", "command-r", "deepseek-coder", "deepseek-llm", "falcon", "gemma-4", "gpt-2",
    "llama-bpe", "llama-spm", "mpt", "phi-3", "qwen2", "qwen35", "refact", "starcoder",
]


def read_suite(gguf: Path) -> list[tuple[str, list[int]]]:
    """Cases exactly as test-tokenizer-0.cpp's read_tests() splits them."""
    raw = gguf.with_name(gguf.name + ".inp").read_bytes()
    texts: list[bytes] = []
    pos = 0
    while pos < len(raw):
        nxt = raw.find(SEPARATOR, pos)
        if nxt < 0:
            texts.append(raw[pos:])
            break
        texts.append(raw[pos:nxt])
        pos = nxt + len(SEPARATOR)
    lines = gguf.with_name(gguf.name + ".out").read_bytes().split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    assert len(texts) == len(lines), f"{gguf.name}: {len(texts)} inputs but {len(lines)} outputs"
    return [(t.decode("utf-8"), [int(x) for x in line.split()]) for t, line in zip(texts, lines)]


def test_every_suite_is_listed(vocab_dir):
    present = sorted(p.name[len("ggml-vocab-"):-len(".gguf.inp")]
                     for p in vocab_dir.glob("ggml-vocab-*.gguf.inp")
                     if p.with_suffix(".out").exists())
    assert present, f"no suites found in {vocab_dir}"
    assert sorted(SUITES) == present


@pytest.mark.parametrize("name", SUITES)
def test_suite(name, vocab_dir, native_lib):
    gguf = vocab_dir / f"ggml-vocab-{name}.gguf"
    cases = read_suite(gguf)
    assert cases
    model = Model(gguf, vocab_only=True)
    try:
        failures = []
        for text, expected in cases:
            got = model.tokenize(text, add_special=False, parse_special=False)
            if got != expected:
                failures.append(f"  {text!r}\n    expected {expected}\n    got      {got}")
        assert not failures, (f"{name}: {len(failures)}/{len(cases)} cases differ:\n"
                              + "\n".join(failures[:10]))
    finally:
        model.close()
