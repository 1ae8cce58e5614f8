"""`ember bench` in llama-bench's shape: comma-separated -p/-n/-t/-d lists, one test per
value, llama-bench's markdown table and its -o json/jsonl/csv fields, plus Ember's own
columns (the decode bound from read bandwidth, the share of it reached, peak RSS)."""
from __future__ import annotations

import csv
import io
import json
import random
import re
import statistics
import sys
import time
from dataclasses import dataclass, field

__all__ = ["BenchTest", "format_results", "parse_int_list", "run", "run_tests"]

# llama-bench's fields, in its order (its `test::get_fields()`), then the samples
LLAMA_FIELDS = [
    "build_commit", "build_number", "cpu_info", "gpu_info", "backends", "model_filename",
    "model_type", "model_size", "model_n_params", "n_batch", "n_ubatch", "n_threads",
    "cpu_mask", "cpu_strict", "poll", "type_k", "type_v", "n_gpu_layers", "n_cpu_moe",
    "split_mode", "main_gpu", "no_kv_offload", "flash_attn", "devices", "tensor_split",
    "tensor_buft_overrides", "load_mode", "lazy_mode", "embeddings", "no_op_offload", "no_host",
    "repack", "fit_target", "fit_min_ctx", "n_prompt", "n_gen", "n_depth", "test_time", "avg_ns",
    "stddev_ns", "avg_ts", "stddev_ts",
]
EMBER_FIELDS = ["bound_ts", "bound_pct", "read_bandwidth_gbs", "weight_bytes_per_token",
                "peak_rss_bytes"]


def parse_int_list(text: str) -> list[int]:
    """llama-bench's list syntax: "128,512", with ranges "first-last", "first-last+step"
    and "first-last*factor"."""
    out: list[int] = []
    for part in str(text).split(","):
        m = re.fullmatch(r"\s*(\d+)(?:-(\d+)(?:([+*])(\d+))?)?\s*", part)
        if not m:
            raise ValueError(f"bad list {text!r}")
        first = int(m.group(1))
        last = int(m.group(2)) if m.group(2) else first
        op, step = m.group(3) or "+", int(m.group(4) or 1)
        i = first
        while i <= last:
            out.append(i)
            nxt = i + step if op == "+" else i * step
            if nxt <= i:
                raise ValueError(f"bad range {part!r}")
            i = nxt
    if not out:
        raise ValueError(f"bad list {text!r}")
    return out


def _stdev(v: list[float]) -> float:
    """llama-bench's: the sample standard deviation (n - 1), 0 for a single sample."""
    return statistics.stdev(v) if len(v) > 1 else 0.0


@dataclass
class BenchTest:
    n_prompt: int
    n_gen: int
    n_depth: int
    n_threads: int
    samples_ns: list[int]
    fields: dict = field(default_factory=dict)   # model and run fields shared by the tests

    @property
    def samples_ts(self) -> list[float]:
        n = self.n_prompt + self.n_gen
        return [1e9 * n / t for t in self.samples_ns]

    @property
    def avg_ts(self) -> float:
        return statistics.fmean(self.samples_ts)

    @property
    def stddev_ts(self) -> float:
        return _stdev(self.samples_ts)

    @property
    def name(self) -> str:
        if self.n_prompt and not self.n_gen:
            s = f"pp{self.n_prompt}"
        elif self.n_gen and not self.n_prompt:
            s = f"tg{self.n_gen}"
        else:
            s = f"pp{self.n_prompt}+tg{self.n_gen}"
        return s + (f" @ d{self.n_depth}" if self.n_depth else "")

    def record(self) -> dict:
        r = dict(self.fields)
        avg_ns = int(statistics.fmean(self.samples_ns))
        r.update(n_threads=self.n_threads, n_prompt=self.n_prompt, n_gen=self.n_gen,
                 n_depth=self.n_depth, avg_ns=avg_ns, stddev_ns=int(_stdev(self.samples_ns)),
                 avg_ts=self.avg_ts, stddev_ts=self.stddev_ts)
        out = {k: r.get(k) for k in LLAMA_FIELDS}
        out["samples_ns"] = list(self.samples_ns)
        out["samples_ts"] = self.samples_ts
        bound = r.get("bound_ts")
        # the bandwidth bound is a decode figure: pp tests have none
        is_tg = self.n_gen > 0 and self.n_prompt == 0
        out["bound_ts"] = bound if is_tg else None
        # run by run against the bound probed beside it, where it was
        pct = r.get("bound_pct") or (100.0 * self.avg_ts / bound if bound else None)
        out["bound_pct"] = pct if is_tg else None
        for k in ("read_bandwidth_gbs", "weight_bytes_per_token", "peak_rss_bytes"):
            out[k] = r.get(k)
        # the rates probed beside each run (decode tests, where the engine's probe applies)
        out["read_bandwidth_samples_gbs"] = r.get("read_bandwidth_samples_gbs") if is_tg else None
        return out


def probe_gbs(model, seconds: float = 0.2) -> float | None:
    """The engine's read-rate probe (GB/s): the context's threads reading the weights a
    one-token decode reads, in its products' layout. None where it does not apply (layers
    offloaded to a device); callers then fall back to cli._read_bandwidth_gbs."""
    from .engine import UnsupportedModelError
    try:
        return model.read_bandwidth(seconds)[0]
    except UnsupportedModelError:
        return None


def _time_test(model, n_prompt: int, n_gen: int, depth: int, reps: int, rng: random.Random,
               bandwidths: list | None = None) -> list[int]:
    """One warm-up and `reps` timed runs; the depth fill before each run is not timed. With
    `bandwidths` (a list) a decode test probes the read rate right before each timed run and
    right after it, and appends per run the faster of the two (None: no probe here): this
    machine's bandwidth drifts by a third over minutes, so the bound is taken beside its run."""
    vocab = model.n_vocab
    samples = []
    probing = bandwidths is not None and n_gen > 0 and n_prompt == 0
    for r in range(reps + 1):
        if depth:
            model.decode([rng.randrange(vocab) for _ in range(depth)], 0)
        ids = [rng.randrange(vocab) for _ in range(n_prompt)]
        tok = rng.randrange(vocab)
        before = probe_gbs(model) if probing and r else None
        t0 = time.perf_counter_ns()
        if n_prompt:
            model.decode(ids, depth)
        for pos in range(depth + n_prompt, depth + n_prompt + n_gen):
            model.decode([tok], pos)
        if r:
            samples.append(max(1, time.perf_counter_ns() - t0))
            if probing:
                after = probe_gbs(model)
                bandwidths.append(None if before is None or after is None else max(before, after))
    return samples


def run_tests(path: str, n_prompt: list[int], n_gen: list[int], threads: list[int | None],
              depths: list[int], reps: int, log=None) -> list[BenchTest]:
    """llama-bench's loop order: threads, depth, then the pp tests and the tg tests."""
    from . import __version__, native
    from .cli import _human, _kv_bytes_per_token, _peak_rss_bytes, _read_bandwidth_gbs
    from .engine import Model, default_threads
    tests: list[BenchTest] = []
    rng = random.Random(0)
    max_depth = max(depths)
    n_batch = max(max(n_prompt, default=0), min(max_depth, 512), 1)
    n_ctx = max(max(n_prompt, default=0) + max(n_gen, default=0), 64) + max_depth + 16
    system = native.decode_str(native.lib().ember_system_info())
    for t in threads:
        model = Model(path, n_ctx=n_ctx, n_threads=t, n_batch=n_batch)
        try:
            model.decode([0], 0)
            # steady state, as llama-bench's (which repacks while it loads): the runs are timed
            # once the weights are in the kernels' layout, which a background thread builds
            # after the load (runs during that copy read the file's layout, slower, and share
            # the memory bus with the copy)
            model.layout_progress(wait=True)
            n_threads = model.n_threads or default_threads()
            tensors = model.tensors()
            size = sum(x.n_bytes for x in tensors)
            emb = next((x for x in tensors if x.name == "token_embd.weight"), None)
            tied = not any(x.name == "output.weight" for x in tensors)
            weights = size - (emb.n_bytes if emb and not tied else 0) + \
                (emb.n_bytes // emb.shape[1] if emb and not tied else 0)
            shared = {"build_commit": f"ember {__version__}", "build_number": 0,
                      "cpu_info": system, "gpu_info": "",
                      "backends": str(getattr(model.context, "backend", "") or "CPU").upper(),
                      "model_filename": str(path),
                      "model_type": f"{model.arch} {_human(model.n_params)} {model.ftype}",
                      "model_size": size, "model_n_params": model.n_params, "n_batch": n_batch,
                      "n_ubatch": n_batch, "cpu_mask": "0x0", "cpu_strict": False, "poll": 50,
                      "type_k": "f16", "type_v": "f16", "n_gpu_layers": int(getattr(model.context, "n_gpu_layers", 0) or 0),
                      "n_cpu_moe": 0,
                      "split_mode": "layer", "main_gpu": 0, "no_kv_offload": False,
                      "flash_attn": -1, "devices": "auto", "tensor_split": "0.00",
                      "tensor_buft_overrides": "none", "load_mode": "mmap", "lazy_mode": "none",
                      "embeddings": False, "no_op_offload": 0, "no_host": False, "repack": True,
                      "fit_target": 0, "fit_min_ctx": 0}
            mine: list[BenchTest] = []
            for d in depths:
                for p in n_prompt:
                    if p:
                        mine.append(BenchTest(p, 0, d, n_threads, _time_test(model, p, 0, d, reps, rng),
                                              dict(shared, test_time=_now(),
                                                   peak_rss_bytes=_peak_rss_bytes())))
                        if log:
                            log(mine[-1])
                for n in n_gen:
                    if n:
                        bws: list = []
                        samples = _time_test(model, 0, n, d, reps, rng, bws)
                        mine.append(BenchTest(0, n, d, n_threads, samples,
                                              dict(shared, test_time=_now(),
                                                   peak_rss_bytes=_peak_rss_bytes())))
                        per_token = weights + _kv_bytes_per_token(model, d)
                        if bws and None not in bws:
                            mine[-1].fields.update(bound_fields(mine[-1].samples_ts, bws, per_token))
                        if log:
                            log(mine[-1])
            for test in mine:
                test.fields["weight_bytes_per_token"] = weights + _kv_bytes_per_token(model, test.n_depth)
            tests.extend(mine)
        finally:
            model.close()
    # where the engine's probe did not apply: a buffer of numpy's, after every test, so that
    # it is in no test's peak RSS
    left = sorted({x.n_threads for x in tests if "read_bandwidth_gbs" not in x.fields})
    bandwidth = {n: _read_bandwidth_gbs(n) for n in left}
    for test in tests:
        if "read_bandwidth_gbs" in test.fields:
            continue
        bw = bandwidth[test.n_threads]
        test.fields.update(read_bandwidth_gbs=bw,
                           bound_ts=bw * 1e9 / test.fields["weight_bytes_per_token"])
    return tests


def bound_fields(samples_ts: list[float], bandwidths: list[float], bytes_per_token: int) -> dict:
    """The decode bound of a test whose runs each had their read rate probed beside them:
    the mean rate, the mean bound (t/s), and the mean of the runs' shares of their own bound."""
    bounds = [bw * 1e9 / bytes_per_token for bw in bandwidths]
    return {"read_bandwidth_gbs": statistics.fmean(bandwidths), "bound_ts": statistics.fmean(bounds),
            "read_bandwidth_samples_gbs": list(bandwidths),
            "bound_pct": 100.0 * statistics.fmean(ts / b for ts, b in zip(samples_ts, bounds))}


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _size(n: int) -> str:
    return f"{n / 2**20:.2f} MiB" if n < 2**30 else f"{n / 2**30:.2f} GiB"


def _params(n: int) -> str:
    return f"{n / 1e6:.2f} M" if n < 1e9 else f"{n / 1e9:.2f} B"


def format_results(tests: list[BenchTest], fmt: str) -> str:
    records = [t.record() for t in tests]
    if fmt == "json":
        return json.dumps(records, indent=2) + "\n"
    if fmt == "jsonl":
        return "".join(json.dumps(r) + "\n" for r in records)
    if fmt == "csv":
        buf = io.StringIO()
        cols = LLAMA_FIELDS + EMBER_FIELDS
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(cols)
        for r in records:
            w.writerow(["" if r[c] is None else int(r[c]) if isinstance(r[c], bool) else r[c]
                        for c in cols])
        return buf.getvalue()
    rows = [["model", "size", "params", "backend", "threads", "test", "t/s", "bound t/s",
             "% of bound", "peak RSS"]]
    for r, t in zip(records, tests):
        rows.append([r["model_type"], _size(r["model_size"]), _params(r["model_n_params"]),
                     r["backends"], str(r["n_threads"]), t.name,
                     f"{r['avg_ts']:.2f} ± {r['stddev_ts']:.2f}",
                     f"{r['bound_ts']:.1f}" if r["bound_ts"] else "",
                     f"{r['bound_pct']:.0f}%" if r["bound_pct"] else "",
                     f"{r['peak_rss_bytes'] / 2**20:.0f} MiB" if r["peak_rss_bytes"] else ""])
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    left = {0, 3}  # text columns, as llama-bench aligns them

    def line(row):
        return "| " + " | ".join(c.ljust(w) if i in left else c.rjust(w)
                                 for i, (c, w) in enumerate(zip(row, widths))) + " |"
    sep = "| " + " | ".join(("-" * (w - 1) + ":") if i not in left else "-" * w
                            for i, w in enumerate(widths)) + " |"
    return "\n".join([line(rows[0]), sep] + [line(r) for r in rows[1:]]) + "\n"


def run(args) -> int:
    try:
        p, n = parse_int_list(args.n_prompt), parse_int_list(args.n_gen)
        d = parse_int_list(args.depth)
        t = parse_int_list(args.threads) if args.threads is not None else [None]
    except ValueError as e:
        print(f"ember bench: {e}", file=sys.stderr)
        return 2
    tests = run_tests(args.model, p, n, t, d, args.reps,
                      log=(lambda x: print(f"  {x.name}: {x.avg_ts:.2f} t/s", file=sys.stderr))
                      if args.output != "md" else None)
    sys.stdout.write(format_results(tests, args.output))
    return 0
