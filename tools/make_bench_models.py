#!/usr/bin/env python3
"""Synthetic models of the sizes people run, for speed comparisons with llama.cpp.

The shapes are the real models' (random weights, the real Llama 3 vocabulary and keys, the
same deterministic generator as tools/make_arch_models.py); the file is F16, and
llama.cpp's llama-quantize makes the quantized files from it, so both engines read the
very same bytes:

    python tools/make_bench_models.py llama-1b --out /tmp/bench
    llama-quantize /tmp/bench/ember-synth-llama-1b.gguf /tmp/bench/llama-1b-Q4_K_M.gguf Q4_K_M
    python benchmarks/compare_llamacpp.py --llama-bench .../llama-bench -m /tmp/bench/llama-1b-Q4_K_M.gguf

Shapes (docs/PERFORMANCE.md): llama-1b = Llama-3.2-1B (2048, 16 layers, 32/8 heads, n_ff
8192, tied), llama-3b = Llama-3.2-3B (3072, 28, 24/8, 8192, tied), llama-8b = Llama-3.1-8B
(4096, 32, 32/8, 14336, untied; a 16 GB F16 file, so made on demand only), each with
Llama 3.1's rope_freqs; qwen35-4b = Qwen3.5-4B (2560, 32 blocks, 24 of them gated delta-net;
an 8 GB F16 file); lfm2-1.2b = LFM2-1.2B (2048, 16 blocks, 10 of them short convolutions).
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tools import make_arch_models as arch  # noqa: E402

SHAPES = {
    "llama-1b": arch.Family("llama", arch._vocab("llama-bpe"), 128256, 2048, 16, 32, 8, 8192, 500000.0,
                            131072, 1e-5, tied=True, llama3_rope=True, note="Llama-3.2-1B shape"),
    "llama-3b": arch.Family("llama", arch._vocab("llama-bpe"), 128256, 3072, 28, 24, 8, 8192, 500000.0,
                            131072, 1e-5, tied=True, llama3_rope=True, note="Llama-3.2-3B shape"),
    "llama-8b": arch.Family("llama", arch._vocab("llama-bpe"), 128256, 4096, 32, 32, 8, 14336, 500000.0,
                            131072, 1e-5, tied=False, llama3_rope=True, note="Llama-3.1-8B shape"),
    # Qwen3.5-4B: 32 blocks of n_embd 2560 (24 gated delta-net: 16 key / 32 value heads of
    # 128, conv 4; 8 gated attention: 16/4 heads of 256, 64 rotated dims), n_ff 9216, tied.
    # The vocabulary is llama.cpp's qwen35 test file (151936 tokens; the release has 248320).
    "qwen35-4b": arch.Family("qwen35", arch._vocab("qwen35"), 151936, 2560, 32, 16, 4, 9216, 10000000.0,
                             262144, 1e-6, tied=True, head_dim=256, write_head_dim=True, qk_norm=True,
                             qwen35=arch.Qwen35Layout(d_state=128, n_k_heads=16, n_v_heads=32, n_rot=64,
                                                      sections=(11, 11, 10, 0)),
                             note="Qwen3.5-4B shape"),
    # LFM2-1.2B: 16 blocks of n_embd 2048 (10 short convolutions, l_cache 3; 6 attention:
    # 32/8 heads of 64), n_ff 8192, tied. No LFM2 vocabulary ships with llama.cpp: Llama 3's
    # stands in (128256 tokens; the release has 65536, so the head here is twice as wide).
    "lfm2-1.2b": arch.Family("lfm2", arch._vocab("llama-bpe"), 128256, 2048, 16, 32, 8, 8192, 1000000.0,
                             128000, 1e-5, tied=True, head_dim=64, qk_norm=True,
                             lfm2=arch.Lfm2Layout(conv=(True, True, False, True, True, False, True, True, False,
                                                        True, False, True, False, True, False, True)),
                             note="LFM2-1.2B shape"),
}


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("shapes", nargs="+", choices=sorted(SHAPES))
    ap.add_argument("--out", type=Path, required=True, help="output directory")
    a = ap.parse_args(argv)
    arch.FAMILIES.update(SHAPES)
    for name in a.shapes:
        path = arch.write(name, a.out / arch.file_name(name))
        print(path, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
