#!/usr/bin/env python3
"""Ember vs llama.cpp, side by side on the same machine and the same GGUF files.

Runs `ember bench --json` and llama.cpp's `llama-bench -o json` alternately (so both see
the same machine load), several rounds, and prints pp/tg tokens per second and the
ratio Ember / llama.cpp per model. llama-bench is a dev-only reference: build it from the
llama-cpp-python 0.3.36 sdist (see tests/golden/README.md) and pass --llama-bench.

Load time: llama-bench does not report it, so when the sdist's Python bindings sit beside
the build (``<sdist>/llama_cpp``, with ``<sdist>/build/bin/llama-bench``; they need
``pip install diskcache``), each round also times ``llama_cpp.Llama(...)`` plus a one-token
eval in a fresh process, the same span as Ember's load figure (model, context, first
decode; imports excluded on both sides). Each file is read once before its rounds, so both
programs load it from a warm page cache. Ember copies the weights its CPU multiplies into
its kernels' layout in the background once the context is open (docs/DESIGN.md, "Four-row
groups"); `ember bench` times its runs after that copy and reports when it was done, which
is printed beside the load time.

    python benchmarks/compare_llamacpp.py --llama-bench /path/to/llama-bench \\
        -m model-Q4_1.gguf -m model-Q4_0.gguf ... [-p 512] [-n 128] [-t 2] [--rounds 3] \\
        [--markdown docs/PERFORMANCE.md]
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_ember(model: Path, p: int, n: int, t: int, reps: int, depth: int = 0) -> dict:
    cmd = [sys.executable, "-m", "ember", "bench", "-m", str(model), "-p", str(p), "-n", str(n),
           "-t", str(t), "-r", str(reps), "-d", str(depth), "--json"]
    env = {"PYTHONPATH": str(ROOT / "app")}
    out = subprocess.run(cmd, capture_output=True, text=True, check=True,
                         env={**os.environ, **env}).stdout
    data = json.loads(out.strip().splitlines()[-1])
    at = f" @ d{depth}" if depth else ""
    res = data["results"]
    return {"pp": res[f"pp{p}{at}"]["mean"] if p else None, "tg": res[f"tg{n}{at}"]["mean"],
            "bound": data["tg_bound_tps"], "bw": data["read_bandwidth_gbs"],
            "pct": data.get("tg_bound_pct"),
            "load_s": data["load_seconds"], "layout_s": data.get("layout_seconds"),
            "system": data["system"],
            "rss": data.get("peak_rss_bytes") or 0}


LLAMA_EXTRA: list[str] = []  # --llama-arg: passed to every llama-bench run


def run_llama(bench: Path, model: Path, p: int, n: int, t: int, reps: int, depth: int = 0) -> dict:
    cmd = [str(bench), "-m", str(model), "-p", str(p), "-n", str(n), "-t", str(t), "-r", str(reps),
           "-d", str(depth), "-o", "json", *LLAMA_EXTRA]
    # wait4 gives this child's own peak RSS (Linux and macOS)
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True) as proc:
        out = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"llama-bench failed: {cmd}")
    rows = json.loads(out)
    res = {"rss": usage.ru_maxrss * (1 if sys.platform == "darwin" else 1024), "pp": None}
    for r in rows:
        key = "pp" if r.get("n_prompt", 0) > 0 and r.get("n_gen", 0) == 0 else "tg"
        res[key] = r["avg_ts"]
    return res


_LLAMA_LOAD = """
import os, sys, time
sys.path.insert(0, sys.argv[1])
os.environ["LLAMA_CPP_LIB_PATH"] = sys.argv[2]
import llama_cpp
t0 = time.perf_counter()
llm = llama_cpp.Llama(sys.argv[3], n_ctx=int(sys.argv[4]), n_batch=int(sys.argv[5]),
                      n_threads=int(sys.argv[6]), verbose=False)
llm.eval([0])
print(time.perf_counter() - t0)
"""


def run_llama_load(bench: Path, model: Path, n_ctx: int, n_batch: int, t: int) -> float | None:
    """Seconds llama.cpp takes to load the model, create a context and decode one token,
    through the sdist's own Python bindings on the same build; None where they are missing."""
    sdist = bench.resolve().parent.parent.parent
    if not (sdist / "llama_cpp" / "__init__.py").is_file():
        return None
    cmd = [sys.executable, "-c", _LLAMA_LOAD, str(sdist), str(bench.resolve().parent), str(model),
           str(n_ctx), str(n_batch), str(t)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        print(f"llama.cpp load timing unavailable: {done.stderr.strip().splitlines()[-1:]}",
              file=sys.stderr)
        return None
    return float(done.stdout.strip().splitlines()[-1])


def warm_page_cache(model: Path) -> None:
    """Reads the file once, so that the first program of a round does not pay for the disk
    (the load figures are then both from a warm page cache)."""
    with open(model, "rb") as f:
        while f.read(16 << 20):
            pass


def cpu_name() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-m", "--model", action="append", required=True, type=Path)
    ap.add_argument("--llama-bench", required=True, type=Path)
    ap.add_argument("-p", type=int, default=512)
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("-t", type=int, default=2)
    ap.add_argument("-d", "--depth", type=int, default=0, help="context depth (llama-bench's -d)")
    ap.add_argument("-r", "--reps", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2, help="alternations of the two programs")
    ap.add_argument("--markdown", type=Path, help="append the table to this file")
    ap.add_argument("--llama-arg", action="append", default=[],
                    help="an argument for llama-bench (repeat: --llama-arg=--repack --llama-arg=0)")
    a = ap.parse_args()
    LLAMA_EXTRA[:] = a.llama_arg

    secs = lambda x: f"{x:.2f}" if x is not None else "?"  # noqa: E731
    num = lambda x: f"{x:.1f}" if x is not None else "-"  # noqa: E731
    ratio = lambda x, y: f"{x / y:.2f}x" if x is not None and y else "-"  # noqa: E731
    # Ember's share: each run against the read rate probed right beside it (ember bench);
    # llama.cpp's: its median against that bound's median, from runs minutes apart
    share = lambda r: r["ember_pct"] if r["ember_pct"] is not None else 100 * r["ember_tg"] / r["bound"]  # noqa: E731
    rows = []
    for model in a.model:
        ours, theirs, loads = [], [], []
        warm_page_cache(model)
        for _ in range(a.rounds):
            ours.append(run_ember(model, a.p, a.n, a.t, a.reps, a.depth))
            theirs.append(run_llama(a.llama_bench, model, a.p, a.n, a.t, a.reps, a.depth))
            # the n_ctx and batch `ember bench` uses, so both load the same context
            loads.append(run_llama_load(a.llama_bench, model, max(a.p + a.n, 64) + a.depth + 16,
                                        max(a.p, min(a.depth, 512), 1), a.t))
            # round by round: on a shared machine the bound moves between rounds, and with
            # it both programs' shares (the table has the medians)
            o, t = ours[-1], theirs[-1]
            if o["tg"] is not None and t["tg"] is not None and o["bound"]:
                pct = o["pct"] if o["pct"] is not None else 100 * o["tg"] / o["bound"]
                print(f"  round {len(ours)}: tg{a.n} {o['tg']:.1f} vs {t['tg']:.1f} "
                      f"({o['tg'] / t['tg']:.2f}x), bound {o['bound']:.1f} t/s: "
                      f"{pct:.0f}% / {100 * t['tg'] / o['bound']:.0f}%", flush=True)

        def med(xs, k):
            vals = [x[k] for x in xs if x[k] is not None]
            return statistics.median(vals) if vals else None
        row = {"model": model.name, "ember_pp": med(ours, "pp"), "ember_tg": med(ours, "tg"),
               "llama_pp": med(theirs, "pp"), "llama_tg": med(theirs, "tg"),
               "bound": med(ours, "bound"), "ember_pct": med(ours, "pct"), "system": ours[0]["system"],
               "ember_rss": max(x["rss"] for x in ours), "llama_rss": max(x["rss"] for x in theirs),
               "ember_load": med(ours, "load_s"), "ember_layout": med(ours, "layout_s"),
               "llama_load": statistics.median(loads) if None not in loads else None}
        rows.append(row)
        print(f"{row['model']}: pp{a.p} {num(row['ember_pp'])} vs {num(row['llama_pp'])} "
              f"({ratio(row['ember_pp'], row['llama_pp'])}), tg{a.n} {row['ember_tg']:.1f} vs "
              f"{row['llama_tg']:.1f} ({ratio(row['ember_tg'], row['llama_tg'])}; "
              f"{share(row):.0f}% / {100 * row['llama_tg'] / row['bound']:.0f}% "
              f"of the bound), load {row['ember_load']:.2f} s (weights in the kernels' layout at "
              f"{secs(row['ember_layout'])} s) vs {secs(row['llama_load'])} s", flush=True)

    depth = f", depth {a.depth}" if a.depth else ""
    head = (f"\n### {datetime.date.today()} — {cpu_name()}, {a.t} threads{depth}, {rows[0]['system']}\n\n"
            f"| model | Ember pp{a.p} | llama.cpp pp{a.p} | ratio | Ember tg{a.n} | llama.cpp tg{a.n} "
            f"| ratio | tg bound | % of bound Ember / llama.cpp | peak RSS Ember / llama.cpp (MiB) "
            f"| load s Ember (layout ready) / llama.cpp |\n"
            f"|---|---|---|---|---|---|---|---|---|---|---|\n")
    mib = lambda b: f"{b / 2**20:.0f}" if b else "?"  # noqa: E731
    lines = [f"| {r['model']} | {num(r['ember_pp'])} | {num(r['llama_pp'])} | "
             f"{ratio(r['ember_pp'], r['llama_pp'])} | {r['ember_tg']:.1f} | {r['llama_tg']:.1f} | "
             f"{ratio(r['ember_tg'], r['llama_tg'])} | {r['bound']:.1f} | "
             f"{share(r):.0f}% / {100 * r['llama_tg'] / r['bound']:.0f}% | "
             f"{mib(r['ember_rss'])} / {mib(r['llama_rss'])} | "
             f"{r['ember_load']:.2f} ({secs(r['ember_layout'])}) / {secs(r['llama_load'])} |" for r in rows]
    table = head + "\n".join(lines) + "\n"
    print(table)
    if a.markdown:
        with open(a.markdown, "a", encoding="utf-8") as f:
            f.write(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
