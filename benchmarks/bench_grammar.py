#!/usr/bin/env python3
"""Grammar mask speed: milliseconds per ember_grammar_apply (one sampling step) on real
vocabularies, in the states that cost most (inside a JSON string, where nearly every token
stays) and least (after a key, where few do), plus the one-off index of the vocabulary.

    python benchmarks/bench_grammar.py [--repeat 20] [gguf ...]

Without paths: the starter model (49k tokens) and llama.cpp's qwen2 vocabulary (151k).
"""
from __future__ import annotations

import argparse
import ctypes
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "app"))
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from ember.chat.json_schema import JSON_OBJECT_GBNF, schema_to_gbnf  # noqa: E402
from ember.engine import Grammar, Model  # noqa: E402

SCHEMA = {"type": "object", "properties": {"name": {"type": "string"},
                                           "age": {"type": "integer"},
                                           "tags": {"type": "array", "items": {"type": "string"}}},
          "required": ["name", "age", "tags"], "additionalProperties": False}
STATES = [  # (grammar, label, text so far)
    ("json_object", "start", ""),
    ("json_object", "in a string", '{"descr'),
    ("json_object", "after a value", '{"a": 12'),
    ("schema", "after {", "{"),
    ("schema", "in a string", '{"name": "Jo'),
    ("schema", "in a number", '{"name": "Jo", "age": 4'),
]


def default_paths() -> list[Path]:
    from tools import fetch_assets
    return [fetch_assets.starter_model(), fetch_assets.vocab_dir() / "ggml-vocab-qwen2.gguf"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("paths", nargs="*", type=Path)
    args = ap.parse_args()
    grammars = {"json_object": JSON_OBJECT_GBNF, "schema": schema_to_gbnf(SCHEMA)}
    for path in args.paths or default_paths():
        model = Model(path, vocab_only=True)
        n = model.n_vocab
        t0 = time.perf_counter()
        Grammar(grammars["json_object"], model)  # the first grammar indexes the vocabulary
        index_ms = 1e3 * (time.perf_counter() - t0)
        print(f"{path.name}: {n} tokens, vocabulary index {index_ms:.0f} ms")
        row = np.zeros(n, dtype=np.float32)
        ptr = row.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
        for name, label, text in STATES:
            g = Grammar(grammars[name], model)
            g.accept_text(text)
            times = []
            for _ in range(args.repeat):
                row[:] = 0
                t = time.perf_counter()
                kept = g.apply(ptr, n)
                times.append(time.perf_counter() - t)
            print(f"  {name:12s} {label:14s} {1e3 * statistics.median(times):7.2f} ms/step"
                  f"  ({kept} tokens kept)")
        model.close()


if __name__ == "__main__":
    main()
