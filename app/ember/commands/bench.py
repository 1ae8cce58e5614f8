"""`ember bench` in llama-bench's shape: comma-separated -p/-n/-t/-d lists, one test per
value, llama-bench's markdown table and its -o json/jsonl/csv fields, plus Ember's own
columns (the decode bound from read bandwidth, the share of it reached, peak RSS)."""
from __future__ import annotations

import csv
import io
import json
import os
import random
import re
import statistics
import sys
import time
from dataclasses import dataclass, field

from ..metadata import count_text

__all__ = ["BenchTest", "bench_model", "format_results", "main", "parse_int_list", "run", "run_tests"]

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
    offloaded to a device); callers then fall back to _read_bandwidth_gbs."""
    from ..engine import UnsupportedModelError
    try:
        return model.read_bandwidth(seconds)[0]
    except UnsupportedModelError:
        return None


def _last_level_cache_bytes(sysfs: str = "/sys/devices/system/cpu/cpu0/cache") -> int:
    """Size of the CPU's largest cache in bytes, 0 where the OS does not say (Linux's sysfs
    "491520K" / "32M" sizes; macOS's sysctl; nothing on Windows)."""
    best = 0
    try:
        for entry in os.listdir(sysfs):
            if not entry.startswith("index"):
                continue
            try:
                with open(os.path.join(sysfs, entry, "size")) as f:
                    text = f.read().strip().upper()
            except OSError:
                continue
            scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
            digits = text[:-1] if scale != 1 else text
            if digits.isdigit():
                best = max(best, int(digits) * scale)
    except OSError:
        pass
    if best == 0 and sys.platform == "darwin":
        import subprocess
        for key in ("hw.l3cachesize", "hw.l2cachesize"):
            try:
                out = subprocess.run(["sysctl", "-n", key], capture_output=True, text=True, timeout=5).stdout
                best = max(best, int(out.strip() or 0))
            except (OSError, ValueError, subprocess.SubprocessError):
                pass
    return best


def _probe_bytes(llc_bytes: int) -> int:
    """The bandwidth probe's buffer: at least 256 MiB and twice the last-level cache, so a
    pass cannot be served from it (server parts report caches of hundreds of MiB, 480 MiB
    on one Xeon here, where 64 MiB read 45 GB/s at two threads and 1-4 GiB 35), at most
    4 GiB; a multiple of 64 MiB."""
    want = max(256 << 20, 2 * llc_bytes)
    want = (want + (64 << 20) - 1) // (64 << 20) * (64 << 20)
    return min(want, 4 << 30)


def _read_bandwidth_gbs(n_threads: int = 2, seconds: float = 0.6) -> float:
    """Rough DRAM read bandwidth of n_threads threads (the bench's count: one core alone
    cannot draw what two can), each summing a slice of a buffer far larger than cache."""
    import threading

    import numpy as np  # not at start-up: `ember --version` stays fast
    # integer adds keep up with DRAM
    buf = np.ones(_probe_bytes(_last_level_cache_bytes()) // 8, dtype=np.int64)
    n_threads = max(1, n_threads)
    parts = np.array_split(buf, n_threads)
    best = 0.0
    t_end = time.perf_counter() + seconds
    while time.perf_counter() < t_end:
        t0 = time.perf_counter()
        ths = [threading.Thread(target=np.add.reduce, args=(p,)) for p in parts]
        for t in ths:
            t.start()
        for t in ths:
            t.join()
        best = max(best, buf.nbytes / (time.perf_counter() - t0) / 1e9)
    return best


def _decode_weight_bytes(model, tensors) -> int:
    """The weight bytes a one-token decode reads: every tensor once, one row of an untied
    token_embd (a tied one is the output product too), and of a mixture of experts' expert
    tensors the used share."""
    size = sum(x.n_bytes for x in tensors)
    emb = next((x for x in tensors if x.name == "token_embd.weight"), None)
    tied = not any(x.name == "output.weight" for x in tensors)
    if emb and not tied:
        size += emb.n_bytes // emb.shape[1] - emb.n_bytes
    return size - _unread_expert_bytes(model, tensors)


def _unread_expert_bytes(model, tensors) -> int:
    """The bytes of a mixture-of-experts file that one decode does not read: each expert
    tensor ([in, out, n_expert]) is read for n_expert_used of its n_expert experts only."""
    meta = model.metadata
    arch = meta.get("general.architecture", "")
    n_expert = meta.get(f"{arch}.expert_count") or 0
    n_used = meta.get(f"{arch}.expert_used_count") or 0
    if not n_expert or not n_used:
        return 0
    experts = sum(x.n_bytes for x in tensors if len(x.shape) == 3 and x.shape[2] == n_expert)
    return experts - experts * n_used // n_expert


def _kv_bytes_per_token(model, depth: int) -> int:
    """F16 keys and values a decode at this depth reads: every layer's whole cache (an
    upper bound where layers have sliding windows)."""
    if depth <= 0:
        return 0
    meta = model.metadata
    arch = meta.get("general.architecture", "")

    def key(name, default=None):
        v = meta.get(f"{arch}.{name}", default)
        return v[0] if isinstance(v, (list, tuple)) else v

    n_head = key("attention.head_count", 1) or 1
    n_head_kv = key("attention.head_count_kv", n_head) or n_head
    head_k = key("attention.key_length", model.n_embd // n_head)
    head_v = key("attention.value_length", head_k)
    return model.n_layer * depth * n_head_kv * (head_k + head_v) * 2


def _peak_rss_bytes() -> int | None:
    """This process's peak resident set so far (None where the OS does not say)."""
    try:
        import resource
    except ImportError:  # Windows
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # bytes on macOS, KiB on Linux


def bench_model(model, n_prompt: int, n_gen: int, reps: int, profiles: dict | None = None,
                depth: int = 0, bandwidths: list | None = None) -> dict:
    """pp: n_prompt tokens in one decode; tg: n_gen one-token decodes; both after `depth`
    tokens already in the cache (llama-bench's -d: filled before each run, not timed).
    Like llama-bench: random token ids, one warm-up run, then reps timed runs. With
    `profiles` (a dict), the engine's per-op timing of each test's last timed run lands there.
    With `bandwidths` (a list), the tg test's runs each get the read rate probed right before
    and after them (the faster; None where the engine's probe does not apply), in order."""
    # no numpy here: the peak RSS reported is the engine's, not a numerics library's
    rng = random.Random(0)
    vocab = model.n_vocab
    suffix = f" @ d{depth}" if depth else ""
    result = {}

    def fill() -> None:
        if depth:
            model.decode([rng.randrange(vocab) for _ in range(depth)], 0)

    if n_prompt > 0:
        times = []
        for r in range(reps + 1):
            ids = [rng.randrange(vocab) for _ in range(n_prompt)]
            fill()
            profiled = profiles is not None and r == reps  # the last timed run, not its fill
            if profiled:
                model.set_profiling(True)
            t0 = time.perf_counter()
            model.decode(ids, depth)
            if r:
                times.append(time.perf_counter() - t0)
            if profiled:
                profiles[f"pp{n_prompt}{suffix}"] = (model.profile(), times[-1])
                model.set_profiling(False)
        ts = [n_prompt / t for t in times]
        result[f"pp{n_prompt}{suffix}"] = (statistics.fmean(ts), statistics.pstdev(ts))
    if n_gen > 0:
        times = []
        for r in range(reps + 1):
            tok = rng.randrange(vocab)
            fill()
            profiled = profiles is not None and r == reps
            before = probe_gbs(model) if bandwidths is not None and r else None
            if profiled:
                model.set_profiling(True)
            t0 = time.perf_counter()
            for pos in range(depth, depth + n_gen):
                model.decode([tok], pos)
            if r:
                times.append(time.perf_counter() - t0)
            if bandwidths is not None and r:
                after = probe_gbs(model)
                bandwidths.append(None if before is None or after is None else max(before, after))
            if profiled:
                profiles[f"tg{n_gen}{suffix}"] = (model.profile(), times[-1])
                model.set_profiling(False)
        ts = [n_gen / t for t in times]
        result[f"tg{n_gen}{suffix}"] = (statistics.fmean(ts), statistics.pstdev(ts), times)
    return result


def main(args) -> int:
    """`ember bench`: llama-bench's table and formats, or (--json / --profile) one test of
    each kind as one summary object, which benchmarks/ reads."""
    from ..engine import Model, default_threads, system_info
    if not (args.json or args.profile):
        return run(args)
    # --json / --profile: one test of each kind, one summary object (benchmarks/ reads it)
    try:
        lists = [parse_int_list(v) for v in (args.n_prompt, args.n_gen, args.depth,
                                             args.threads or "0")]
    except ValueError as e:
        print(f"ember bench: {e}", file=sys.stderr)
        return 2
    if any(len(v) > 1 for v in lists):
        print("ember bench: --json and --profile take one value per option; use -o json for lists",
              file=sys.stderr)
        return 2
    args.n_prompt, args.n_gen, args.depth = lists[0][0], lists[1][0], lists[2][0]
    args.threads = lists[3][0] or None
    if args.pin:
        os.environ["EMBER_PIN_THREADS"] = "1"  # read when the context's thread pool starts
    t0 = time.perf_counter()
    depth = args.depth
    model = Model(args.model, n_ctx=max(args.n_prompt + args.n_gen, 64) + depth + 16,
                  n_threads=args.threads, n_batch=max(args.n_prompt, min(depth, 512), 1))
    model.decode([0], 0)  # context created, pages of the weights touched
    load_s = time.perf_counter() - t0
    # usable from here; the runs are timed once the background copy of the weights into
    # the kernels' layout is done (steady state), and when that was is reported
    model.layout_progress(wait=True)
    layout_s = time.perf_counter() - t0
    weight_bytes = _decode_weight_bytes(model, model.tensors()) + _kv_bytes_per_token(model, depth)
    profiles: dict | None = {} if args.profile else None
    bws: list = []
    res = bench_model(model, args.n_prompt, args.n_gen, args.reps, profiles, depth=depth, bandwidths=bws)
    peak_rss = _peak_rss_bytes()  # before numpy's bandwidth probe, whose buffer is not the model's
    tg_key = f"tg{args.n_gen}" + (f" @ d{depth}" if depth else "")
    if bws and None not in bws:  # each run against the rate probed beside it
        b = bound_fields([args.n_gen / t for t in res[tg_key][2]], bws, weight_bytes)
        bw, bound, pct = b["read_bandwidth_gbs"], b["bound_ts"], b["bound_pct"]
    else:
        bw = _read_bandwidth_gbs(model.n_threads or default_threads())
        bound = bw * 1e9 / weight_bytes
        pct = 100 * res[tg_key][0] / bound if tg_key in res else None
    info = system_info()
    out = {"model": str(args.model), "ftype": model.ftype, "n_params": model.n_params,
           "backend": model.context.backend, "n_gpu_layers": model.context.n_gpu_layers,
           "threads": model.n_threads or None, "system": info, "load_seconds": load_s, "layout_seconds": layout_s,
           "weight_bytes_per_token": weight_bytes, "read_bandwidth_gbs": bw,
           "tg_bound_tps": bound, "tg_bound_pct": pct, "peak_rss_bytes": peak_rss, "n_depth": depth,
           "results": {k: {"mean": v[0], "sd": v[1]} for k, v in res.items()}}
    if profiles is not None:
        out["profile"] = {test: {"wall_seconds": wall, "ops": [
            {"name": n, "count": c, "seconds": sec} for n, c, sec in rows]}
            for test, (rows, wall) in profiles.items()}
    if args.json:
        print(json.dumps(out))
        return 0
    print(f"model: {args.model} ({model.ftype}, {count_text(model.n_params)} params); {info}")
    print(f"backend: {model.context.backend}" + (f" ({model.context.backend_note})"
                                                  if model.context.backend_note else ""))
    # the threads the tests ran on (the system line above gives the engine's default)
    n_threads = model.n_threads or default_threads()
    print("| threads | test | t/s |\n|---|---|---|")
    for k, v in res.items():
        print(f"| {n_threads} | {k} | {v[0]:.2f} ± {v[1]:.2f} |")
    what = "weights and KV cache" if depth else "weights"
    # the range of the rates probed beside the runs: on a shared machine it is wide, and
    # the share of the bound moves with it
    how = (f"probed beside each run, {min(bws):.1f}-{max(bws):.1f}" if bws and None not in bws
           else "numpy's probe")
    print(f"{what} read per token: {weight_bytes / 2**20:.1f} MiB; read bandwidth ~{bw:.1f} GB/s"
          f" ({how}); decode bound ~{bound:.0f} t/s", file=sys.stderr)
    rss = f"; peak RSS {peak_rss / 2**20:.0f} MiB" if peak_rss else ""
    print(f"load {load_s:.2f} s (weights in the kernels' layout at {layout_s:.2f} s){rss}",
          file=sys.stderr)
    if pct is not None:
        print(f"tg at {pct:.0f}% of the bandwidth bound", file=sys.stderr)
    for test, (rows, wall) in (profiles or {}).items():
        print(f"\nprofile of {test} (thread 0; {wall:.3f} s wall of the last timed run)")
        print("| node | count | ms | % of wall |\n|---|---|---|---|")
        for name, count, sec in sorted(rows, key=lambda r: -r[2]):
            print(f"| {name} | {count} | {sec * 1e3:.1f} | {100 * sec / wall:.1f} |")
    return 0


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
    from .. import __version__
    from ..engine import Model, default_threads, system_info
    tests: list[BenchTest] = []
    rng = random.Random(0)
    max_depth = max(depths)
    n_batch = max(max(n_prompt, default=0), min(max_depth, 512), 1)
    n_ctx = max(max(n_prompt, default=0) + max(n_gen, default=0), 64) + max_depth + 16
    system = system_info()
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
            weights = _decode_weight_bytes(model, tensors)
            shared = {"build_commit": f"ember {__version__}", "build_number": 0,
                      "cpu_info": system, "gpu_info": "",
                      "backends": str(getattr(model.context, "backend", "") or "CPU").upper(),
                      "model_filename": str(path),
                      "model_type": f"{model.arch} {count_text(model.n_params)} {model.ftype}",
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
