#!/usr/bin/env python3
"""The end-to-end part of scripts/gpu_check.sh, on a machine with a GPU: the CUDA backend
against the CPU backend on whole models, then speed.

    python tools/gpu_check.py e2e OUT_DIR      # fidelity: synthetic models of each family
    python tools/gpu_check.py bench OUT_DIR [--8b]

Fidelity, the engine's bar (tests/engine/test_fidelity.py): over a prompt, no top-1 disagreement
where the CPU's top-2 gap is >= 1.0, mean NLL of the prompt's own next tokens within 0.5%,
and greedy generation equal up to the first near-tie (gap < 0.1). The models are the
synthetic families of tools/make_arch_models.py (real vocabularies, random weights), since
nothing can be fetched on that machine. Results go to OUT_DIR as JSON and text.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "app"))

BACKEND = os.environ.get("GPU_CHECK_BACKEND", "cuda")  # "test" rehearses this script without a GPU
PROMPT = ("The history of the city begins with a small fishing village on the river, where "
          "traders from the north and the south met every summer to exchange salt, wool and iron.")


def logits_of(path: Path, backend: str, ids: list[int], n_gen: int) -> dict:
    import numpy as np
    from ember import engine
    m = engine.Model(path, n_ctx=512, backend=backend, gpu_layers=-1 if backend != "cpu" else 0)
    ctx = m.context
    ctx.decode(ids, 0, all_logits=True)
    prompt = np.array([ctx.logits(i) for i in range(len(ids))])
    gen, gaps = [], []
    pos = len(ids)
    last = prompt[-1]
    for _ in range(n_gen):
        top2 = np.sort(last)[-2:]
        gaps.append(float(top2[1] - top2[0]))
        tok = int(np.argmax(last))
        gen.append(tok)
        ctx.decode([tok], pos)
        pos += 1
        last = ctx.logits(-1).copy()
    out = {"prompt": prompt, "gen": gen, "gaps": gaps, "where": ctx.backend, "note": ctx.backend_note}
    m.close()
    return out


def nll(logits, ids) -> float:
    import numpy as np
    total = 0.0
    for i in range(len(ids) - 1):
        row = logits[i].astype(np.float64)
        mx = row.max()
        total += mx + np.log(np.exp(row - mx).sum()) - row[ids[i + 1]]
    return total / (len(ids) - 1)


def e2e(out: Path) -> int:
    import numpy as np
    from tools import make_arch_models as arch
    from ember import engine
    models = out / "models"
    models.mkdir(parents=True, exist_ok=True)
    report, failures = [], 0
    for family in ("tinyllama", "llama3", "qwen2", "qwen3", "phi3", "yarn"):
        path = arch.write(family, models / arch.file_name(family))
        ids = engine.Model(path, vocab_only=True).tokenize(PROMPT)
        cpu = logits_of(path, "cpu", ids, 24)
        gpu = logits_of(path, BACKEND, ids, 24)
        a, b = cpu["prompt"], gpu["prompt"]
        gap = np.sort(a, axis=1)[:, -1] - np.sort(a, axis=1)[:, -2]
        disagree = int(((np.argmax(a, 1) != np.argmax(b, 1)) & (gap >= 1.0)).sum())
        n_cpu, n_gpu = nll(a, ids), nll(b, ids)
        tie = next((i for i, g in enumerate(cpu["gaps"]) if g < 0.1), len(cpu["gaps"]))
        greedy_ok = cpu["gen"][:tie] == gpu["gen"][:tie]
        nmse = float(((a - b) ** 2).sum() / (a ** 2).sum())
        ok = disagree == 0 and abs(n_gpu - n_cpu) <= 0.005 * abs(n_cpu) and greedy_ok and not gpu["where"].startswith("CPU")
        failures += not ok
        row = {"family": family, "where": gpu["where"], "note": gpu["note"], "nmse": nmse,
               "top1_disagreements_gap_ge_1": disagree, "nll_cpu": n_cpu, "nll_cuda": n_gpu,
               "greedy_equal_to_first_near_tie": greedy_ok, "first_near_tie": tie, "ok": ok}
        report.append(row)
        print(json.dumps(row), flush=True)
    (out / "e2e.json").write_text(json.dumps(report, indent=1))
    return 1 if failures else 0


def ember(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ember", *args], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "app") + os.pathsep + os.environ.get("PYTHONPATH", "")})


def bench(out: Path, with_8b: bool) -> int:
    from tools import make_bench_models as mb
    from tools import make_arch_models as arch
    arch.FAMILIES.update(mb.SHAPES)
    models = out / "models"
    models.mkdir(parents=True, exist_ok=True)
    rows = []
    shapes = ["llama-1b"] + (["llama-8b"] if with_8b else [])
    for shape in shapes:
        t0 = time.time()
        f16 = arch.write(shape, models / arch.file_name(shape))
        q = models / f"{shape}-Q4_K_M.gguf"
        r = ember("quantize", str(f16), str(q), "Q4_K_M")
        if r.returncode:
            print(r.stderr)
            return 1
        f16.unlink()  # disk: the 8B F16 file is 16 GB
        print(f"{shape}: made and quantized in {time.time() - t0:.0f} s", flush=True)
        for backend, p in ((BACKEND, "512"), ("cpu", "128")):
            r = ember("bench", "-m", str(q), "-p", p, "-n", "128", "-r", "3", "--backend", backend, "--json")
            if r.returncode:
                print(r.stderr)
                return 1
            res = json.loads(r.stdout)
            row = {"model": shape + " Q4_K_M", "backend": res.get("backend"),
                   "results": res["results"], "tg_bound_tps": res.get("tg_bound_tps")}
            rows.append(row)
            print(json.dumps(row), flush=True)
        q.unlink()
    (out / "bench.json").write_text(json.dumps(rows, indent=1))
    return 0


def main() -> int:
    what, out = sys.argv[1], Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    if what == "e2e":
        return e2e(out)
    return bench(out, "--8b" in sys.argv)


if __name__ == "__main__":
    sys.exit(main())
