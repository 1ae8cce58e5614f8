#!/usr/bin/env python3
"""Regenerate tests/golden/perplexity.json with llama-perplexity's numbers (DEV ONLY).

Two parts, both over tests/data/texts/essay.txt with -c 128 (the -c 128 perplexity runs
themselves, flash attention at llama.cpp's default, are in meta.json, made by
tools/make_golden.py):

* ``kld``: llama-perplexity saves the F16 SmolLM2 variant's log-probs
  (``--kl-divergence-base``), then compares the Q4_0, Q8_0 and Q4_1 files with them
  (``--kl-divergence``); the per-chunk table and the final statistics are parsed and kept.
  tests/commands/test_perplexity.py parses `ember perplexity --kl-divergence`'s printout with the
  same parser (parse_kld_output).
* ``fa_off``: the running PPL of every variant again with ``-fa off``: how far llama.cpp's
  own per-chunk values move between its two attention paths, the yardstick for how closely
  another engine's per-chunk values can be asked to agree on these small chunks.

The tools are built as in tools/make_golden.py; then::

    python tools/make_perplexity_golden.py --llama-bin /work/ref/llama_cpp_python-0.3.36/build/bin
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

GOLDEN = REPO / "tests" / "golden" / "perplexity.json"
TEXT = "essay"
CTX = 128
THREADS = 2
BASE = "F16"
COMPARED = ("Q4_0", "Q8_0", "Q4_1")

_NUM = r"(-?[0-9.]+|nan|-?inf)"
_PM = _NUM + r"\s*±\s*" + _NUM

# final-statistics lines: label regex -> key (keys as ember.commands.perplexity.KLDStats.summary())
_SUMMARY = [
    (r"Mean PPL\(Q\)\s*:", "ppl_q"),
    (r"Mean PPL\(base\)\s*:", "ppl_base"),
    (r"Mean ln\(PPL\(Q\)/PPL\(base\)\)\s*:", "ln_ppl_ratio"),
    (r"Mean PPL\(Q\)/PPL\(base\)\s*:", "ppl_ratio"),
    (r"Mean PPL\(Q\)-PPL\(base\)\s*:", "ppl_diff"),
    (r"Mean\s+KLD:", "mean_kld"),
    (r"Mean\s+Δp:", "mean_dp"),
    (r"RMS Δp\s*:", "rms_dp"),
    (r"Same top p:", "same_top_p"),
]
_SINGLE = [
    (r"Cor\(ln\(PPL\(Q\)\), ln\(PPL\(base\)\)\):", "cor_ln_ppl"),
    (r"Maximum KLD:", "max_kld"), (r"Median\s+KLD:", "median_kld"), (r"Minimum KLD:", "min_kld"),
    (r"Maximum Δp:", "max_dp"), (r"Median\s+Δp:", "median_dp"), (r"Minimum Δp:", "min_dp"),
]


def parse_kld_output(text: str) -> dict:
    """The per-chunk table and the final statistics of a `--kl-divergence` run's output."""
    chunks = []
    row = re.compile(r"^\s*(\d+)\s+" + r"\s+".join([_PM] * 3) + r"\s+" + _PM + r"\s*%\s+"
                     + _PM + r"\s*%\s*$")
    for line in text.splitlines():
        m = row.match(line)
        if m:
            v = [float(x) for x in m.groups()[1:]]
            chunks.append({"chunk": int(m.group(1)), "ppl": v[0], "ppl_err": v[1],
                           "ln_ppl_ratio": v[2], "ln_ppl_ratio_err": v[3],
                           "kld": v[4], "kld_err": v[5], "rms_dp": v[6], "rms_dp_err": v[7],
                           "same_top_p": v[8], "same_top_p_err": v[9]})
    summary = {}
    for line in text.splitlines():
        for pat, key in _SUMMARY:
            m = re.search(pat + r"\s*" + _PM, line)
            if m and key not in summary:
                summary[key], summary[key + "_err"] = float(m.group(1)), float(m.group(2))
        for pat, key in _SINGLE:
            m = re.search(pat + r"\s*" + _NUM, line)
            if m:
                summary[key] = float(m.group(1))
        m = re.match(r"^\s*([0-9. ]+)%\s+(KLD|Δp):\s*" + _NUM, line)
        if m:
            kind = "kld" if m.group(2) == "KLD" else "dp"
            summary[f"{kind}_{m.group(1).strip()}%"] = float(m.group(3))
    return {"chunks": chunks, "summary": summary}


def _run(cmd: list[str]) -> str:
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = str(Path(cmd[0]).parent) + os.pathsep + env.get("LD_LIBRARY_PATH", "")
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{r.stdout[-3000:]}")
    return r.stdout


def main() -> int:
    from tools import fetch_assets, make_variants
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--llama-bin", type=Path, required=True, help="dir with llama-perplexity")
    a = ap.parse_args()
    exe = str(a.llama_bin / "llama-perplexity")
    models = dict(make_variants.build_all())
    models["gemma3"] = fetch_assets.gemma_model()
    text = REPO / "tests" / "data" / "texts" / f"{TEXT}.txt"
    common = ["-c", str(CTX), "-t", str(THREADS), "--no-warmup"]
    doc = {
        "generator": "llama-perplexity (llama.cpp vendored in llama-cpp-python 0.3.36, CPU), "
                     "tools/make_perplexity_golden.py",
        "text": f"tests/data/texts/{TEXT}.txt", "ctx": CTX,
        "kld": {"base": BASE,
                "base_cmd": f"llama-perplexity -m {BASE} -f tests/data/texts/{TEXT}.txt -c {CTX} "
                            f"-t {THREADS} --kl-divergence-base BASE",
                "results": {}},
        "fa_off": {},
    }
    with tempfile.TemporaryDirectory() as td:
        base = str(Path(td) / "base.kld")
        out = _run([exe, "-m", str(models[BASE]), "-f", str(text), *common,
                    "--kl-divergence-base", base])
        m = re.search(r"Final estimate: PPL = ([0-9.]+) \+/- ([0-9.]+)", out)
        n = re.search(r"calculating perplexity over (\d+) chunks", out)
        kld = doc["kld"]
        kld["base_ppl"], kld["base_ppl_err"] = float(m.group(1)), float(m.group(2))
        kld["n_chunks"] = int(n.group(1))
        for k in COMPARED:
            out = _run([exe, "-m", str(models[k]), *common, "--kl-divergence-base", base,
                        "--kl-divergence"])
            r = parse_kld_output(out)
            r["cmd"] = f"llama-perplexity -m {k} -c {CTX} -t {THREADS} --kl-divergence-base " \
                       "BASE --kl-divergence"
            kld["results"][k] = r
            s = r["summary"]
            print(f"KLD {k}: {len(r['chunks'])} chunks, KLD {s['mean_kld']} +/- "
                  f"{s['mean_kld_err']}, same top p {s['same_top_p']} %, "
                  f"mean dp {s['mean_dp']} %", file=sys.stderr)
    for k, p in models.items():
        out = _run([exe, "-m", str(p), "-f", str(text), *common, "-fa", "off"])
        m = re.search(r"Final estimate: PPL = ([0-9.]+) \+/- ([0-9.]+)", out)
        doc["fa_off"][k] = {"ppl": float(m.group(1)), "ppl_err": float(m.group(2)),
                            "running_ppl": [float(x) for x in re.findall(r"\[\d+\]([0-9.]+)", out)],
                            "cmd": f"llama-perplexity -m {k} -f tests/data/texts/{TEXT}.txt "
                                   f"-c {CTX} -t {THREADS} -fa off"}
        print(f"fa off {k}: {doc['fa_off'][k]['ppl']}", file=sys.stderr)
    GOLDEN.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {GOLDEN}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
