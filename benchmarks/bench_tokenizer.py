#!/usr/bin/env python3
"""Tokenizer throughput: load time, tokenize and detokenize speed of ~100 KB of
mixed text (prose, code, CJK, emoji, whitespace runs) on each suite vocabulary.

    python benchmarks/bench_tokenizer.py [--size 100000] [--repeat 5] [name ...]

Vocabularies come from tools/fetch_assets.py (llama.cpp's ggml-vocab-*.gguf).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "app"), str(ROOT)]

from ember.engine import Model  # noqa: E402
from tools import fetch_assets  # noqa: E402

SAMPLE = """The quick brown fox jumps over the lazy dog. It's 12:45 and we've got 3,141,592 reasons!
def tokenize(text: str) -> list[int]:
    return [ord(c) for c in text if not c.isspace()]   # comment    with   spaces
Привет, мир! Γειά σου Κόσμε! 你好，世界！こんにちは世界 안녕하세요 🦙🚀😶‍🌫️ ✅
\t\tindented\r\n\n\n    four spaces	tab <|im_start|>user\nhi<|im_end|> y'all CAN'T stop
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("names", nargs="*", help="suite names (default: all)")
    ap.add_argument("--size", type=int, default=100_000, help="text size in characters")
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()

    vocab_dir = fetch_assets.vocab_dir()
    text = (SAMPLE * (a.size // len(SAMPLE) + 1))[: a.size]
    paths = sorted(vocab_dir.glob("ggml-vocab-*.gguf"))
    if a.names:
        paths = [p for p in paths if p.name[len("ggml-vocab-"):-len(".gguf")] in a.names]

    print(f"{'vocab':18} {'load ms':>8} {'tok ms':>8} {'MB/s':>7} {'tokens':>8} {'detok ms':>9}")
    for p in paths:
        name = p.name[len("ggml-vocab-"):-len(".gguf")]
        t0 = time.perf_counter()
        try:
            m = Model(p, vocab_only=True)
        except Exception as e:  # an unsupported tokenizer model
            print(f"{name:18} {'-':>8}  ({e})")
            continue
        load_ms = (time.perf_counter() - t0) * 1e3
        tok, detok = [], []
        for _ in range(a.repeat):
            t0 = time.perf_counter()
            ids = m.tokenize(text, add_special=False)
            tok.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            m.detokenize(ids)
            detok.append(time.perf_counter() - t0)
        t_tok = statistics.median(tok)
        mb = len(text.encode()) / 1e6
        print(f"{name:18} {load_ms:8.0f} {t_tok * 1e3:8.1f} {mb / t_tok:7.1f} {len(ids):8d} "
              f"{statistics.median(detok) * 1e3:9.1f}")
        m.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
