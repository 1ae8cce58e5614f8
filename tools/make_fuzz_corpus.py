#!/usr/bin/env python3
"""Write the fuzzers' seed corpora into native/fuzz/corpus/ (committed; rerun after
adding a broken-file kind or a tokenizer suite).

gguf/        every broken-file kind of tests/engine/test_gguf_robustness.py, built on a
             300-token slice of the starter vocabulary, plus the first 16 KiB of real
             GGUF files (the starter model, Gemma 3 and llama.cpp's vocab files)
tokenize/    llama.cpp's tokenizer-suite inputs, each behind the two selector bytes
detokenize/  the suites' expected ids as little-endian int32, behind the selector bytes
sampler/     hand-made logits: ordinary, NaN, +-inf, all equal, one token, greedy
grammar/     GBNF grammars (the JSON object grammar, a schema's, hand-made ones), each
             with a NUL and a text to feed the matcher
"""

from __future__ import annotations

import hashlib
import struct
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "app"))

from tools import fetch_assets

OUT = ROOT / "native" / "fuzz" / "corpus"
HEADER_BYTES = 16 * 1024
SUITE_SEP = "\n__ggml_vocab_test__\n"


def write(kind: str, data: bytes) -> None:
    d = OUT / kind
    d.mkdir(parents=True, exist_ok=True)
    (d / hashlib.sha1(data).hexdigest()[:16]).write_bytes(data)


def small_vocab(starter: Path, n: int = 300):
    import gguf

    r = gguf.GGUFReader(starter)

    def strings(key):
        f = r.fields[key]
        return [bytes(f.parts[i]).decode("utf-8") for i in f.data]

    tokens = strings("tokenizer.ggml.tokens")[:n]
    known = set(tokens)
    merges = [
        m
        for m in strings("tokenizer.ggml.merges")
        if all(p in known for p in m.split(" ")) and m.replace(" ", "") in known
    ]
    return tokens, merges, [1] * n


def gguf_seeds(starter: Path) -> None:
    from tests.support import gguf_writer as gw
    from tests.engine.test_gguf_robustness import cases

    tokens, merges, types = small_vocab(starter)
    shape = {"n_embd": 16, "n_head": 2, "n_head_kv": 1, "n_ff": 32}  # small inputs fuzz faster

    def base(**kw):
        return gw.tiny_llama(tokens, merges, types, **{**shape, **kw})

    for _, data, _, _ in cases(base):
        write("gguf", data)
    reals = [starter, fetch_assets.gemma_model()] + sorted(fetch_assets.vocab_dir().glob("*.gguf"))
    for p in reals:
        with open(p, "rb") as f:
            write("gguf", f.read(HEADER_BYTES))


def suite_seeds() -> None:
    seen: set[str] = set()
    for i, inp in enumerate(sorted(fetch_assets.vocab_dir().glob("*.gguf.inp"))):
        texts = inp.read_text(encoding="utf-8").split(SUITE_SEP)
        outs = inp.with_suffix(".out").read_text().splitlines()
        for j, text in enumerate(texts):
            if text not in seen:  # most suites share one input file
                seen.add(text)
                write("tokenize", bytes([i, j % 4]) + text.encode("utf-8"))
        for j, line in enumerate(outs):
            ids = [int(x) for x in line.split()]
            write("detokenize", bytes([i, (j % 8) | 16]) + struct.pack(f"<{len(ids)}i", *ids))


def sampler_seeds() -> None:
    def params(
        temp=0.8,
        top_k=40,
        top_p=0.95,
        min_p=0.05,
        rep=1.1,
        pres=0.0,
        freq=0.0,
        last_n=64,
        seed=1,
        mode=0,
        n_hist=8,
    ):
        return struct.pack(
            "<fifffffhHBB", temp, top_k, top_p, min_p, rep, pres, freq, last_n, seed, mode, n_hist
        ).ljust(40, b"\0")

    ordinary = struct.pack("<16f", *[float(i % 7) - 3 for i in range(16)])
    nan, inf = float("nan"), float("inf")
    write("sampler", params() + ordinary)
    write("sampler", params(temp=0.0) + ordinary)
    write("sampler", params(mode=1) + ordinary)
    write("sampler", params(mode=1) + struct.pack("<f", nan) * 8)
    write("sampler", params() + struct.pack("<8f", 1, nan, 2, inf, -inf, 0, nan, 3))
    write("sampler", params(top_k=0, top_p=1.0, min_p=0.0) + struct.pack("<4f", inf, inf, 1, 2))
    write("sampler", params(top_k=-5, top_p=-1, min_p=2, rep=0.0) + ordinary)
    write("sampler", params(temp=1e-30, mode=0xE0) + struct.pack("<f", 0.0))


def grammar_seeds() -> None:
    from ember.chat.json_schema import JSON_OBJECT_GBNF, schema_to_gbnf

    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
                                               "tags": {"type": "array", "items": {
                                                   "enum": ["a", 1, None]}}},
              "required": ["name"]}
    seeds = [
        (JSON_OBJECT_GBNF, '{"a": [1, -2.5e3, {"b": null}], "c": "\\u00e9"}'),
        (schema_to_gbnf(schema), '{"name": "x", "tags": ["a", 1]}'),
        ('root ::= ( "\\u00e9" | [^a-z] | . )+ "x"?  # comment\n', "\u00e9\u65e5ax"),
        ('root ::= "a" root "b" | "a" root "c" | ""', "aaaaaaaaaaaabc"),
        ('root ::= x{2,5} y\nx ::= [0-9]\ny ::= "." | ""', "123."),
        ('root ::= expr\nexpr ::= expr "+" "1" | "1"', "1+1"),
    ]
    for grammar, text in seeds:
        write("grammar", grammar.encode() + b"\0" + text.encode())


def main() -> None:
    gguf_seeds(fetch_assets.starter_model())
    suite_seeds()
    sampler_seeds()
    grammar_seeds()
    for d in sorted(OUT.iterdir()):
        print(f"{d.name}: {len(list(d.iterdir()))} seeds")


if __name__ == "__main__":
    main()
