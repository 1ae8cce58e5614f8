#!/usr/bin/env python3
"""Golden logits for the synthetic architecture-family models (DEV ONLY, llama.cpp).

For each family of tools/make_arch_models.py: build the synthetic GGUF (asset
cache), tokenize the family's text with llama.cpp, run it teacher-forced with
``Llama(path, n_ctx=2048, n_batch=512, n_threads=2, logits_all=True)`` and write
``tests/golden/arch_<family>.npz``; then run the float64 oracle
(tools/oracle.py) on the same tokens and record how closely it agrees with
llama.cpp.  meta.json["arch"] gets the file sha256s, texts, token counts and
the measured agreement; tests/engine/test_architectures.py reads all of it.

Setup as for tools/make_golden.py (see tests/golden/README.md)::

    export LLAMA_CPP_LIB_PATH=/work/ref/llama_cpp_python-0.3.36/build/bin
    export PYTHONPATH=/work/ref/llama_cpp_python-0.3.36:/work/ref/pydeps
    python tools/make_arch_golden.py [families...] [--no-oracle]

npz arrays (n = number of tokens)::

    tokens [n] int32, top_ids/top_logits [n,10], next_id, next_logit, next_logprob,
    logsumexp, gap [n]                         as in logits_*.npz (tools/make_golden.py)
    cols [1024] int32                          a fixed seeded subset of the vocabulary
    rows [r] int32                             the positions sub_logits holds (all of them,
                                               except llama3: 0-399 and 900-1199)
    sub_logits [r, 1024] float32               llama.cpp's logits at (rows, cols)

Agreement measure (also used by the tests): row-centred NMSE on the subset
columns -- subtract each row's mean over the subset from both, then
sum((ours - ref)^2) / sum(ref^2) over all stored rows.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tools import make_arch_models  # noqa: E402
from tools.make_golden import GOLDEN, TEXTS, N_CTX, N_BATCH, N_THREADS, position_stats  # noqa: E402
from tools.make_variants import file_sha256_cached  # noqa: E402

N_COLS = 1024
GAP_SURE = 0.5
NMSE_BAR = 1e-5
LONG_FROM = 900            # llama3: positions where rope_freqs matter most

# family -> texts (tests/data/texts/<name>.txt) joined with "\n\n"
FAMILY_TEXTS = {
    "llama3": ["essay", "prose"],
    "tinyllama": ["prose"],
    "qwen2": ["prose"],
    "qwen3": ["code"],
    "gemma3": ["prose"],
    "gemma2": ["prose"],
    "phi3": ["code"],
    "yarn": ["code"],
    "qwen3moe": ["prose"],
    "gpt-oss": ["prose"],
    "smollm3": ["code"],
    "mistral3": ["essay"],
    "gemma4": ["prose"],
    "qwen35": ["prose"],
    "qwen35moe": ["prose"],
    "gemma4moe": ["prose"],
    "lfm2": ["code"],
    "lfm2moe": ["code"],
}
JOIN = "\n\n"

# Quantized variants with goldens of their own (--quant): llama-quantize's file (the test
# makes the same bytes with Ember's quantizer), llama.cpp's logits on it. The bar is the one
# a supported family meets quantized (qwen3 Q4_K_M: NMSE 3.8e-4, no top-1 miss where
# llama.cpp's gap >= 0.5), held here as QUANT_NMSE_BAR.
QUANT_VARIANTS = {"qwen3moe": ["Q4_K_M"], "gpt-oss": ["Q8_0", "MXFP4_MOE"], "qwen35": ["Q4_K_M"],
                  "qwen35moe": ["Q4_K_M"], "gemma4moe": ["Q4_K_M"], "gemma4": ["Q4_K_M"]}
QUANT_NMSE_BAR = 1e-3
# qwen35's delta-net layers amplify activation rounding: on F16 an oracle that rounds every
# product's input to F16, as Ember does, lands 7.3e-6 from llama.cpp (the exact oracle
# 1.6e-7); on Q4_K_M both engines are 1.4e-2 from the exact oracle (their Q8_K activations)
# and 1.5e-3 from each other, where qwen3's Q4_K_M is at 3.8e-4. Its bar is the measured
# figure with a little room, until Ember's products round their inputs as llama.cpp's do.
# Gemma 4 and the two new mixtures measured the same way on their Q4_K_M files (December
# 2026, Ember's F32-activation F16 products; llama.cpp without its CPU repack): gemma4
# 1.30e-3 (median row 1.1e-3, from the first positions on: its q/k-normed scores at
# attention scale 1 amplify the 8-bit activation rounding, as qwen35's delta-net does),
# qwen35moe 2.85e-3 and gemma4moe 4.96e-3 (the router turns that rounding into different
# experts at near-ties, and qwen35moe's state carries a flip forward), their confident
# top-1 agreeing at 0.977 and 0.979. These bars are the measured figures with a little room:
# they catch a broken quantized path (a wrong kernel is 1e-1 away), not the engines' last
# digits, which the F16 goldens and the float64 oracle check.
QUANT_NMSE_BAR_FAMILY = {"qwen35": 2e-3, "gemma4": 2e-3, "qwen35moe": 4e-3, "gemma4moe": 6e-3}
MOE_QUANT_TOP1_AGREE = 0.97


# Mixture-of-experts families: a router's top-k is discontinuous, so where two experts' logits
# are nearly tied, rounding differences of ~1e-6 choose different experts and that position's
# logits differ by far more than the bar (a "flip"). Measured on these files: llama.cpp
# (0.3.36, AVX-512 machine) and the float64 oracle differ at 0-8 isolated positions of ~425 and
# where the block is recurrent (qwen35moe) the flip carries into every later position through
# the state; Ember (F32 activations) and the oracle at 0-2 isolated positions, 1e-9 elsewhere.
# So for these families: against the exact oracle, the bar holds on all positions but at most
# MOE_MAX_FLIPS isolated flips (a row NMSE > FLIP_ROW_NMSE); against llama.cpp, the median row
# NMSE meets the bar and the confident top-1 agrees at >= MOE_TOP1_AGREE of positions.
FLIP_ROW_NMSE = 1e-3
MOE_MAX_FLIPS = 0.01        # of the rows (at least 2)
MOE_TOP1_AGREE = 0.99


def is_moe(family: str) -> bool:
    return make_arch_models.FAMILIES[family].n_expert > 0


def row_nmse(ours: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """Each row's centred NMSE."""
    o = ours.astype(np.float64)
    r = ref.astype(np.float64)
    o = o - o.mean(axis=1, keepdims=True)
    r = r - r.mean(axis=1, keepdims=True)
    return ((o - r) ** 2).sum(axis=1) / (r ** 2).sum(axis=1)


def without_flips(ours: np.ndarray, ref: np.ndarray) -> tuple[float, np.ndarray]:
    """(NMSE over the rows that are not routing flips, the flipped rows' indices)."""
    flips = np.flatnonzero(row_nmse(ours, ref) > FLIP_ROW_NMSE)
    keep = np.ones(len(ours), dtype=bool)
    keep[flips] = False
    return centred_nmse(ours[keep], ref[keep]), flips


def family_text(family: str) -> str:
    return JOIN.join((TEXTS / f"{n}.txt").read_text(encoding="utf-8") for n in FAMILY_TEXTS[family])


def stored_rows(family: str, n: int) -> np.ndarray:
    if family == "llama3":
        rows = np.concatenate([np.arange(0, min(400, n)), np.arange(LONG_FROM, min(1200, n))])
        return rows.astype(np.int32)
    return np.arange(n, dtype=np.int32)


def columns(family: str, n_vocab: int) -> np.ndarray:
    """N_COLS distinct vocabulary ids, fixed per family (PCG64 raw stream ranks)."""
    raw = np.random.PCG64(make_arch_models._seed(family, "golden-columns")).random_raw(n_vocab)
    return np.sort(np.argsort(raw, kind="stable")[:N_COLS]).astype(np.int32)


def centred_nmse(ours: np.ndarray, ref: np.ndarray) -> float:
    o = ours.astype(np.float64)
    r = ref.astype(np.float64)
    o = o - o.mean(axis=1, keepdims=True)
    r = r - r.mean(axis=1, keepdims=True)
    return float(((o - r) ** 2).sum() / (r ** 2).sum())


def agreement(full_logits: np.ndarray, g: dict) -> dict:
    """Compare [n, n_vocab] logits with a golden dict (npz contents)."""
    rows, cols = g["rows"], g["cols"]
    sub = full_logits[rows][:, cols]
    out = {"nmse": centred_nmse(sub, g["sub_logits"])}
    sel = rows >= LONG_FROM
    if sel.any():
        out["nmse_pos_ge_900"] = centred_nmse(sub[sel], g["sub_logits"][sel])
    sure = g["gap"] >= GAP_SURE
    top1 = full_logits.argmax(axis=1)
    out["n_gap_ge_0.5"] = int(sure.sum())
    out["frac_gap_ge_0.5"] = round(float(sure.mean()), 4)
    out["top1_agree_gap_ge_0.5"] = float((top1[sure] == g["top_ids"][sure, 0]).mean())
    out["top1_agree_all"] = float((top1 == g["top_ids"][:, 0]).mean())
    return out


def log(msg):
    print(f"[make_arch_golden {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def without_cpu_repack() -> None:
    """llama.cpp's CPU weight repack (its extra buffer types) segfaults in llama_decode on the
    synthetic gpt-oss files once quantized (0.3.36's tree; the F16 file runs, and so does the
    same quantized file with the repack off). The quantized goldens since gpt-oss's MXFP4_MOE
    are made with the plain CPU buffers, what `llama-bench --repack 0` runs: ggml's own
    kernels on the file's layout."""
    import llama_cpp
    import llama_cpp.llama as high
    default = llama_cpp.llama_model_default_params

    def params():
        p = default()
        p.use_extra_bufts = False
        return p
    llama_cpp.llama_model_default_params = params
    high.llama_cpp.llama_model_default_params = params


def run_llama_cpp(path: Path, family: str) -> dict:
    from tools.make_golden import load
    m = load(path)
    text = family_text(family)
    ids = m.tokenize(text.encode("utf-8"), add_bos=True, special=False)
    if len(ids) > N_CTX:
        raise RuntimeError(f"{family}: {len(ids)} tokens > n_ctx")
    m.reset()
    t0 = time.time()
    m.eval(ids)
    lg = np.array(m.scores[: len(ids)], dtype=np.float32)
    n_vocab = m.n_vocab()
    del m
    st = position_stats(lg, ids)
    rows = stored_rows(family, len(ids))
    cols = columns(family, n_vocab)
    st.update(rows=rows, cols=cols, sub_logits=lg[rows][:, cols].astype(np.float32))
    log(f"{family}: {len(ids)} tokens, llama.cpp eval {time.time() - t0:.1f}s, "
        f"gap>={GAP_SURE} at {float((st['gap'] >= GAP_SURE).mean()):.0%} of positions")
    return st


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("families", nargs="*", default=None)
    ap.add_argument("--no-oracle", action="store_true",
                    help="skip the oracle agreement measurement")
    ap.add_argument("--quant", action="store_true",
                    help="the quantized variants (QUANT_VARIANTS) instead: llama-quantize "
                         "($LLAMA_QUANTIZE) makes them, llama.cpp's logits on them")
    ap.add_argument("--oracle-only", action="store_true",
                    help="only re-measure the oracle against the existing npz files")
    a = ap.parse_args(argv)
    fams = a.families or list(make_arch_models.FAMILIES)

    meta_path = GOLDEN / "meta.json"
    meta = json.loads(meta_path.read_text())
    arch_meta = meta.setdefault("arch", {})
    arch_meta.update({
        "generator": "tools/make_arch_golden.py: llama.cpp (llama-cpp-python 0.3.36 sdist, CPU) "
                     "on the synthetic files of tools/make_arch_models.py",
        "settings": {"n_ctx": N_CTX, "n_batch": N_BATCH, "n_threads": N_THREADS, "logits_all": True,
                     "add_bos": True, "parse_special": False,
                     "kv_cache": "f16 (llama.cpp default)"},
        "n_cols": N_COLS,
        "measure": "row-centred NMSE on the subset columns (each row minus its subset mean, "
                   "sum((ours-ref)^2)/sum(ref^2)); top-1 agreement where llama.cpp's gap >= 0.5",
        "bars": {"nmse": NMSE_BAR, "gap_sure": GAP_SURE, "long_from": LONG_FROM},
    })
    families = arch_meta.setdefault("families", {})

    def save():
        meta_path.write_text(json.dumps(meta, indent=1) + "\n")

    if a.quant:
        import os
        import subprocess
        quantize = os.environ.get("LLAMA_QUANTIZE", "llama-quantize")
        qmeta = arch_meta.setdefault("quantized", {})
        for fam in fams:
            without_cpu_repack()
            for ft in QUANT_VARIANTS.get(fam, []):
                src = make_arch_models.build(fam)
                dst = src.with_name(f"llama-quantize-{fam}-{ft}.gguf")
                subprocess.run([quantize, str(src), str(dst), ft], check=True, capture_output=True)
                st = run_llama_cpp(dst, fam)
                npz = GOLDEN / f"arch_{fam}-{ft}.npz"
                np.savez_compressed(npz, **st)
                qmeta[f"{fam}-{ft}"] = {"sha256": file_sha256_cached(dst), "n_tokens": int(len(st["tokens"])),
                                        "frac_gap_ge_0.5": round(float((st["gap"] >= GAP_SURE).mean()), 4),
                                        "made_by": "llama-quantize (llama-cpp-python 0.3.36 sdist)",
                                        "llama_cpp_cpu_repack": False}
                log(f"wrote {npz.name}")
                save()
        return 0
    for fam in fams:
        spec = make_arch_models.FAMILIES[fam]
        path = make_arch_models.build(fam)
        entry = families.get(fam, {})
        entry.update({"file": path.name, "sha256": file_sha256_cached(path), "arch": spec.arch,
                      "texts": [f"tests/data/texts/{n}.txt" for n in FAMILY_TEXTS[fam]],
                      "join": JOIN})
        if spec.note:
            entry["note"] = spec.note
        npz = GOLDEN / f"arch_{fam}.npz"
        if not a.oracle_only:
            st = run_llama_cpp(path, fam)
            np.savez_compressed(npz, **st)
            entry["n_tokens"] = int(len(st["tokens"]))
            entry["stored_rows"] = int(len(st["rows"]))
            entry["frac_gap_ge_0.5"] = round(float((st["gap"] >= GAP_SURE).mean()), 4)
            log(f"wrote {npz.name} ({npz.stat().st_size / 1e6:.2f} MB)")
        families[fam] = entry
        save()
        if not a.no_oracle:
            from tools.oracle import Oracle
            with np.load(npz) as z:
                g = {k: z[k] for k in z.files}
            t0 = time.time()
            orc = Oracle(path, n_ctx=N_CTX)
            lg = orc.logits(g["tokens"])
            del orc
            r = agreement(lg, g)
            if is_moe(fam):
                sub = lg[g["rows"]][:, g["cols"]]
                r["median_row_nmse"] = float(np.median(row_nmse(sub, g["sub_logits"])))
                r["nmse_without_flips"], flips = without_flips(sub, g["sub_logits"])
                r["flips"] = [int(i) for i in flips]
            del lg
            r = {k: (float(f"{v:.4g}") if isinstance(v, float) else v) for k, v in r.items()}
            entry["oracle_vs_llama_cpp"] = r
            log(f"{fam}: oracle vs llama.cpp {r} ({time.time() - t0:.1f}s)")
            if (r["median_row_nmse"] if is_moe(fam) else r["nmse"]) > NMSE_BAR:
                log(f"WARNING {fam}: NMSE {r['nmse']:.3g} > {NMSE_BAR}")
            save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
