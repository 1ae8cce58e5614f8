"""Load test of `ember serve` (a program that prints numbers, not a test): N streamed chat
requests, C at a time, against a server with --parallel P. Prints errors, p50/p95 time to
the first token, total throughput, the server's RSS along the way, and how soon a slot is
free again after a client drops its stream.

    python benchmarks/load_server.py -m model.gguf [-n 200] [-c 8] [--parallel 4]
    python benchmarks/load_server.py -m model.gguf --llama-server PATH/llama-server  # reference
    python benchmarks/load_server.py --url http://127.0.0.1:8080 [--model-id NAME] [--pid PID]

With --llama-server the same model is served by llama.cpp's server with the same slots,
context per slot (its -c is the total, so slots x --ctx, with --no-kv-unified where it has
the switch) and threads.

Only loopback addresses are meant: the load stays on this machine.
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "app"))

from ember.remote import RemoteEndpoint, RemoteError

TOPICS = ["the sea", "a lighthouse", "bread", "the moon", "a train journey", "winter",
          "a garden", "mountains", "a library", "rain"]


def start_server(model: str, parallel: int, n_ctx: int, threads: int | None):
    cmd = [sys.executable, "-m", "ember", "serve", "-m", model, "--port", "0",
           "--parallel", str(parallel), "-c", str(n_ctx)]
    if threads:
        cmd += ["-t", str(threads)]
    env = dict(os.environ, PYTHONPATH=str(REPO / "app"))
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
    port = None
    for line in proc.stdout:
        m = re.search(r"listening on http://[^:]+:(\d+)", line)
        if m:
            port = int(m.group(1))
        if "loaded" in line:
            break
    if port is None:
        raise SystemExit("the server did not start")
    threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()
    return proc, f"http://127.0.0.1:{port}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_llama_server(binary: str, model: str, parallel: int, n_ctx: int, threads: int | None):
    port = free_port()
    cmd = [binary, "-m", model, "--host", "127.0.0.1", "--port", str(port),
           "--parallel", str(parallel), "-c", str(n_ctx * parallel)]
    help_text = subprocess.run([binary, "--help"], capture_output=True, text=True).stdout
    if "--no-kv-unified" in help_text:
        cmd.append("--no-kv-unified")  # each slot its own n_ctx / parallel, as Ember's
    if threads:
        cmd += ["-t", str(threads)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    print("started: " + " ".join(cmd), flush=True)
    for _ in range(1200):  # /health answers 503 while loading, 200 once ready
        if proc.poll() is not None:
            raise SystemExit(f"llama-server exited with {proc.returncode}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/health")
            if conn.getresponse().status == 200:
                return proc, url
        except OSError:
            pass
        time.sleep(0.1)
    proc.terminate()
    raise SystemExit("llama-server did not become ready")


def rss_mib(pid: int | None, field: str = "VmRSS") -> float | None:
    """The process's resident memory now (VmHWM: its peak), from /proc (Linux only)."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def one_request(remote: RemoteEndpoint, model_id: str, i: int, max_tokens: int) -> dict:
    messages = [{"role": "user", "content": f"Write two sentences about {TOPICS[i % len(TOPICS)]}."}]
    t0 = time.perf_counter()
    first = None
    pieces = 0
    try:
        stream = remote.chat(model_id, messages, max_tokens=max_tokens, temperature=0.7,
                             seed=i)
        for _piece in stream:
            pieces += 1
            if first is None:
                first = time.perf_counter() - t0
        tokens = (stream.usage or {}).get("completion_tokens")
        return {"ok": True, "ttft": first, "tokens": pieces if tokens is None else tokens,
                "counted": tokens is None, "seconds": time.perf_counter() - t0}
    except RemoteError as e:
        return {"ok": False, "error": f"{e.kind}: {e.message}"}


def health(remote: RemoteEndpoint) -> dict:
    conn = http.client.HTTPConnection(remote.host, remote.port, timeout=60)
    try:
        conn.request("GET", "/health")
        return json.loads(conn.getresponse().read())
    finally:
        conn.close()


def cancel_latency(remote: RemoteEndpoint, model_id: str, samples: int = 5) -> list[float]:
    """Seconds from dropping a stream to /health counting the cancel (polled every 2 ms;
    includes the poll's own round trips). Empty for a server whose /health has no such
    count (llama-server's)."""
    out = []
    if "requests_cancelled" not in health(remote):
        return out
    for k in range(samples):
        before = health(remote)["requests_cancelled"]
        stream = remote.complete(model_id, "Once upon a time, in a small village by the sea,",
                                 max_tokens=1000, temperature=0)
        for n, _ in enumerate(stream):
            if n == 10:
                t0 = time.perf_counter()
                stream.cancel()
        while health(remote)["requests_cancelled"] <= before:
            time.sleep(0.002)
        out.append(time.perf_counter() - t0)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-m", "--model", help="start `ember serve` on this model")
    ap.add_argument("--llama-server", metavar="PATH",
                    help="serve -m with this llama-server binary instead (the reference)")
    ap.add_argument("--url", help="or use a running server")
    ap.add_argument("--model-id", help="model id for --url (default: its first)")
    ap.add_argument("--pid", type=int, help="the --url server's process, for its RSS")
    ap.add_argument("-n", "--requests", type=int, default=200)
    ap.add_argument("-c", "--concurrency", type=int, default=8)
    ap.add_argument("--parallel", type=int, default=4)
    ap.add_argument("--ctx", type=int, default=1024, help="context per slot")
    ap.add_argument("-t", "--threads", type=int, default=None)
    ap.add_argument("--max-tokens", type=int, default=64)
    args = ap.parse_args()
    if not args.model and not args.url:
        ap.error("give -m MODEL or --url URL")

    proc = None
    if args.model and args.llama_server:
        proc, url = start_llama_server(args.llama_server, args.model, args.parallel, args.ctx,
                                       args.threads)
    elif args.model:
        proc, url = start_server(args.model, args.parallel, args.ctx, args.threads)
    else:
        url = args.url
    pid = proc.pid if proc else args.pid
    try:
        remote = RemoteEndpoint(url, timeout=600)
        model_id = args.model_id or remote.models()[0]
        one_request(remote, model_id, 0, 8)  # warm-up: pages of the weights touched
        rss = [(0, rss_mib(pid))]
        done = []
        lock = threading.Lock()

        def run(i):
            r = one_request(remote, model_id, i, args.max_tokens)
            with lock:
                done.append(r)
                if len(done) % 50 == 0:
                    rss.append((len(done), rss_mib(pid)))
            return r

        t0 = time.perf_counter()
        with ThreadPoolExecutor(args.concurrency) as ex:
            results = list(ex.map(run, range(args.requests)))
        wall = time.perf_counter() - t0
        ok = [r for r in results if r["ok"]]
        errors = [r["error"] for r in results if not r["ok"]]
        ttft = sorted(r["ttft"] for r in ok if r["ttft"] is not None)
        tokens = sum(r["tokens"] for r in ok)
        peak = rss_mib(pid, "VmHWM")
        cancels = cancel_latency(remote, model_id)
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(30)

    def pct(xs, p):
        return xs[min(len(xs) - 1, round(p / 100 * (len(xs) - 1)))] if xs else float("nan")

    kind = "llama-server" if args.llama_server else "ember serve" if args.model else "server"
    print(f"{kind}: {url} (--parallel {args.parallel}, ctx {args.ctx}); {args.requests} "
          f"requests, {args.concurrency} at a time, max_tokens {args.max_tokens}")
    print(f"errors: {len(errors)}" + (f" (first: {errors[0]})" if errors else ""))
    print(f"first-token latency: p50 {pct(ttft, 50) * 1e3:.0f} ms, p95 {pct(ttft, 95) * 1e3:.0f} ms")
    print(f"throughput: {tokens} tokens in {wall:.1f} s = {tokens / wall:.1f} tokens/s, "
          f"{len(ok) / wall:.2f} requests/s" +
          (" (tokens counted as streamed pieces: no usage)" if any(r["counted"] for r in ok)
           else ""))
    if pid is not None:
        print("server RSS (MiB) after N requests: " +
              ", ".join(f"{n}: {m:.0f}" for n, m in rss if m is not None) +
              (f"; peak {peak:.0f}" if peak is not None else ""))
    if cancels:
        print(f"drop-to-free-slot: median {statistics.median(cancels) * 1e3:.0f} ms, "
              f"max {max(cancels) * 1e3:.0f} ms over {len(cancels)} drops")
    else:
        print("drop-to-free-slot: not measured (the server's /health has no cancel count)")
    return 1 if errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
