#!/usr/bin/env python3
"""Embedding throughput (texts/s, tokens/s) of the engine's bert family against the numpy
reference pass and, where its Python binding imports, llama.cpp on the same GGUF file and
the same texts: short sentences and library-sized passages.

    python benchmarks/bench_embed.py [--model MINILM.gguf] [-t THREADS] [--reps 3] [--numpy]

llama.cpp (dev-only) is used when `import llama_cpp` works (LLAMA_CPP_LIB_PATH and PYTHONPATH
pointing at a llama-cpp-python build; tests/golden/README.md). Without --model the fetched
MiniLM is converted to F16 first. Runs alternate between the implementations; the best of
the repetitions is reported."""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
import types
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "app"), str(ROOT)]

from ember.engine import Embedder, Model

from benchmarks.retrieval import model_path

BASE = ["The tenant may keep one cat or one small dog, with the landlord's written consent.",
        ("Run the descaler through the boiler every six months to remove limescale from the "
         "heat exchanger.")]


def text_sets() -> dict[str, list[str]]:
    return {"sentences": [BASE[i % 2] + f" Note {i}." for i in range(64)],
            "passages": [(BASE[i % 2] + " ") * 9 + f"Note {i}." for i in range(32)]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", help="a GGUF bert file (default: the converted MiniLM F16)")
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--numpy", action="store_true", help="also time the numpy reference pass")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        path = model_path(a.model, Path(tmp))
        model = Model(path, n_threads=a.threads)
        engine = Embedder(model)
        model.layout_progress(wait=True)  # timed once the weights are in the kernels' layout
        runners = {"ember": None}
        ref = None
        if a.numpy:
            from ember.documents.minilm import MiniLMEmbedder
            ref = MiniLMEmbedder.from_gguf(path, max_tokens=512)
            runners["numpy"] = None
        llm = None
        try:
            sys.modules.setdefault("diskcache", types.ModuleType("diskcache"))
            import llama_cpp
            llm = llama_cpp.Llama(str(path), embedding=True, n_ctx=512, n_batch=2048, n_ubatch=2048,
                                  n_threads=a.threads, n_threads_batch=a.threads, verbose=False)
            runners["llama.cpp"] = None
        except Exception as e:  # noqa: BLE001 (not installed, or no library: ember alone)
            print(f"(llama.cpp not timed: {type(e).__name__}: {e})", file=sys.stderr)
        print(f"{path.name}, {a.threads} threads, best of {a.reps}")
        for name, texts in text_sets().items():
            seqs = [engine.tokenize(t) for t in texts]
            n_tok = sum(map(len, seqs))
            best: dict[str, float] = {}
            vectors: dict[str, np.ndarray] = {}
            for _ in range(a.reps):
                for who in runners:
                    t0 = time.perf_counter()
                    if who == "ember":
                        v = engine.embed_tokens(seqs)
                    elif who == "numpy":
                        v = ref.embed(texts)
                    else:
                        v = np.asarray(llm.embed(texts, normalize=True), dtype=np.float32)
                    dt = time.perf_counter() - t0
                    best[who] = min(best.get(who, dt), dt)
                    vectors[who] = v
            print(f"{name}: {len(texts)} texts, {n_tok} tokens")
            for who, dt in best.items():
                cos = float(np.min(np.sum(vectors[who] * vectors["ember"], axis=1)))
                print(f"  {who:10s} {len(texts) / dt:8.1f} texts/s {n_tok / dt:9.0f} tokens/s"
                      f"   min cosine to ember {cos:.7f}")
        engine.close()
        model.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
