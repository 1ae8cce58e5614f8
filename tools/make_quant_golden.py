#!/usr/bin/env python3
"""Regenerate tests/golden/quant_*.json with llama-quantize's output (DEV ONLY).

Inputs, both deterministic (their sha256 is recorded, and the tests check it first):

* ``starter``: the F16 variant of the starter model (tools/make_variants.py). Its width 576
  is not a multiple of 256, so most K-quant tensors fall back to 32-element types there;
* ``synth``: ``quant_shape`` below, a small llama-family file with real-model proportions
  (every row a multiple of 256, GQA 4, 8 layers, untied output), written by
  tools/make_arch_models.py's generator: every K-quant and every mix rule is live.

For each input and type llama-quantize runs once (no importance matrix, 2 threads) and the
record keeps each tensor's type and sha256 of its data, and the sha256 of the whole file.
Types in PURE also run with ``--pure`` (one type for every quantizable tensor), so each
quantizer is checked on every tensor shape. Then llama-perplexity scores the starter's
Q4_K_M file over tests/data/texts/essay.txt with -c 128, with its default (flash) attention
and with -fa off (tests/commands/test_quantize.py checks ``ember quantize`` + ``ember perplexity``
against both).

llama.cpp built as in docs/QUANTIZE.md (the llama-cpp-python 0.3.36 sdist), then::

    python tools/make_quant_golden.py --llama-bin /work/ref/llama_cpp_python-0.3.36/build/bin
"""
from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "app"))

from tools import make_arch_models as arch

GOLDEN = REPO / "tests" / "golden"
THREADS = 2
# every file type llama-quantize offers that Ember runs (Q3_K/Q4_K/Q5_K are its aliases
# of the _M mixes, so they are not repeated)
MIXES = ["F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K_S", "Q3_K_M",
         "Q3_K_L", "Q4_K_S", "Q4_K_M", "Q5_K_S", "Q5_K_M", "Q6_K", "IQ4_NL", "IQ4_XS"]
PURE = ["Q2_K", "Q3_K_M", "Q4_K_M", "Q5_K_M", "Q6_K", "Q4_0", "Q8_0", "IQ4_NL", "IQ4_XS"]
STARTER_MIXES = ["Q8_0", "Q4_0", "Q4_K_M", "Q5_K_M", "Q6_K", "Q2_K", "Q3_K_M"]
# on the synthetic gpt-oss file (3-D expert tensors, the layer rules by name): gpt-oss's own
# type, and two mixes whose rules look at the expert count
MOE_INPUT = "gpt-oss"
MOE_MIXES = ["MXFP4_MOE", "Q4_K_M", "IQ4_XS"]
PPL_TEXT, PPL_CTX = "essay", 128

QUANT_SHAPE = arch.Family("llama", arch._vocab("llama-spm"), 32000, 256, 8, 4, 1, 768, 10000.0,
                          4096, 1e-5, tied=False,
                          note="quantizer fixture: rows multiples of 256, GQA 4, 8 layers")


def synth_path(out_dir: Path | None = None) -> Path:
    """The synthetic input (made once into the asset cache)."""
    arch.FAMILIES.setdefault("quant_shape", QUANT_SHAPE)
    out = (out_dir or arch.default_dir()) / arch.file_name("quant_shape")
    if not out.is_file():
        arch.write("quant_shape", out)
    return out


def sha256_file(p: Path) -> str:
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def tensor_digests(path: Path) -> dict[str, list]:
    """name -> [type id, sha256 of the tensor's data] (the file's own layout reader)."""
    import mmap

    from ember import engine
    from ember.gguf_file import read_layout
    from ember.commands.quantize import type_bytes
    with open(path, "rb") as f:
        buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    lay = read_layout(path, buf)
    out = {}
    for t in lay.tensors:
        engine.type_block(t.type)
        n = type_bytes(t.type, t.n_elements, t.shape[0])
        out[t.name] = [t.type, hashlib.sha256(lay.data(buf, t, n)).hexdigest()]
    return out


def _run(cmd: list[str]) -> tuple[str, float]:
    t0 = time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       check=False)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{r.stdout[-3000:]}")
    return r.stdout, time.perf_counter() - t0


def main() -> int:
    from tools import fetch_assets, make_variants
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--llama-bin", type=Path, required=True, help="dir with llama-quantize")
    ap.add_argument("--only", choices=["starter", "synth", "moe"], default=None)
    a = ap.parse_args()
    quant = str(a.llama_bin / "llama-quantize")
    inputs = {"starter": (make_variants.build_all(fetch_assets.starter_model())["F16"], STARTER_MIXES),
              "synth": (synth_path(), MIXES), "moe": (arch.build(MOE_INPUT), MOE_MIXES)}
    for key, (src, mixes) in inputs.items():
        if a.only and key != a.only:
            continue
        doc = {"generator": "llama-quantize (llama.cpp vendored in llama-cpp-python 0.3.36, CPU, "
                            f"{THREADS} threads, no imatrix), tools/make_quant_golden.py",
               "input": src.name, "input_sha256": sha256_file(src), "threads": THREADS,
               "runs": {}}
        with tempfile.TemporaryDirectory() as td:
            jobs = [(m, False) for m in mixes] + [(m, True) for m in (PURE if key != "moe" else [])]
            for mix, pure in jobs:
                dst = Path(td) / f"{mix}.gguf"
                cmd = [quant] + (["--pure"] if pure else []) + [str(src), str(dst), mix, str(THREADS)]
                _, secs = _run(cmd)
                run = {"cmd": "llama-quantize " + ("--pure " if pure else "") + f"IN OUT {mix} {THREADS}",
                       "seconds": round(secs, 2), "size": dst.stat().st_size,
                       "sha256": sha256_file(dst), "tensors": tensor_digests(dst)}
                if key == "starter" and mix == "Q4_K_M" and not pure:
                    text = REPO / "tests" / "data" / "texts" / f"{PPL_TEXT}.txt"
                    out, _ = _run([str(a.llama_bin / "llama-perplexity"), "-m", str(dst), "-f",
                                   str(text), "-c", str(PPL_CTX), "-t", str(THREADS), "--no-warmup"])
                    m = re.search(r"Final estimate: PPL = ([0-9.]+) \+/- ([0-9.]+)", out)
                    n = re.search(r"calculating perplexity over (\d+) chunks", out)
                    run["perplexity"] = {"text": f"tests/data/texts/{PPL_TEXT}.txt", "ctx": PPL_CTX,
                                         "ppl": float(m.group(1)), "ppl_err": float(m.group(2)),
                                         "n_chunks": int(n.group(1))}
                    out, _ = _run([str(a.llama_bin / "llama-perplexity"), "-m", str(dst), "-f",
                                   str(text), "-c", str(PPL_CTX), "-t", str(THREADS), "--no-warmup",
                                   "-fa", "off"])
                    m = re.search(r"Final estimate: PPL = ([0-9.]+) \+/- ([0-9.]+)", out)
                    run["perplexity"]["ppl_fa_off"] = float(m.group(1))
                doc["runs"][("pure " if pure else "") + mix] = run
                print(f"{key} {'pure ' if pure else ''}{mix}: {secs:.1f} s", file=sys.stderr)
        path = GOLDEN / f"quant_{key}.json"
        path.write_text(json.dumps(doc, indent=1) + "\n")
        print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
