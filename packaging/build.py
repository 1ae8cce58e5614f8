#!/usr/bin/env python3
"""Builds Ember's packaged app on this OS (Linux, Windows, macOS), the one script CI and
release use:

  1. the engine library with CMake (Release, no tests; an existing build folder is reused),
  2. the icons (packaging/make_icons.py),
  3. PyInstaller with packaging/ember.spec (onefile, or --onedir; on macOS also Ember.app),
  4. prints each artifact's size and the cold start of `ember --version` (3 fresh runs),
  5. with --smoke: `--version`, `run` greedy text against llama.cpp's golden and `serve`
     answering the same text over loopback HTTP (console builds), and `--self-test` (the
     app offscreen: model load, a streamed reply).

    python packaging/build.py [--with-starter] [--console] [--onedir] [--smoke] [--model PATH]

Needs: CMake + a C++ compiler, and `pip install -r packaging/requirements.txt` (PyInstaller,
PySide6, numpy, jinja2, platformdirs). Writes dist/ and build/pyinstaller/; a summary goes to
dist/build-info.json.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WIN, MAC = sys.platform == "win32", sys.platform == "darwin"
LIB_NAME = "ember.dll" if WIN else "libember.dylib" if MAC else "libember.so"
STARTER_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
sys.path.insert(0, str(REPO / "app"))  # ember.__version__, the engine for golden text


def log(msg: str) -> None:
    print(f"[build] {msg}", flush=True)


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    log("$ " + " ".join(str(c) for c in cmd))
    return subprocess.run([str(c) for c in cmd], check=True, **kw)


def human(n: float) -> str:
    return f"{n / 2**20:.1f} MiB"


def tree_size(p: Path) -> int:
    if p.is_file():
        return p.stat().st_size
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file() and not f.is_symlink())


# ---- 1. the engine --------------------------------------------------------------------
def _has_target(build_dir: Path, name: str) -> bool:
    r = subprocess.run(["cmake", "--build", str(build_dir), "--target", "help"], capture_output=True,
                       text=True, check=False)
    return r.returncode == 0 and name in r.stdout


def build_native(build_dir: Path, jobs: int) -> Path:
    cache = build_dir / "CMakeCache.txt"
    if cache.is_file() and "CMAKE_TOOLCHAIN_FILE" in cache.read_text(errors="replace"):
        raise SystemExit(f"{build_dir} is a cross build; pass another --native-build-dir")
    if not cache.is_file():
        gen = ["-G", "Ninja"] if shutil.which("ninja") and not WIN else []
        # EMBER_CUDA_ARCHS narrows the CUDA backend's architectures (CI: 90-real)
        archs = os.environ.get("EMBER_CUDA_ARCHS")
        run(["cmake", "-S", REPO, "-B", build_dir, *gen, "-DCMAKE_BUILD_TYPE=Release",
             "-DEMBER_TESTS=OFF", *([f"-DCMAKE_CUDA_ARCHITECTURES={archs}"] if archs else [])])
    # the CUDA backend too, where CMake found nvcc (docs/GPU.md)
    targets = ["ember", "ember-cuda"] if _has_target(build_dir, "ember-cuda") else ["ember"]
    run(["cmake", "--build", build_dir, "--config", "Release", "--target", *targets,
         "-j", str(jobs)])
    found = [p for p in (build_dir / "Release" / LIB_NAME, build_dir / LIB_NAME) if p.is_file()]
    if not found:
        raise SystemExit(f"no {LIB_NAME} under {build_dir} after the build")
    return found[0]


def find_starter(explicit: str | None) -> Path | None:
    if explicit:
        return Path(explicit)
    assets = Path(os.environ.get("EMBER_ASSET_DIR") or Path.home() / ".cache" / "ember-assets")
    for p in (assets / "starter" / STARTER_FILE,):
        if p.is_file():
            return p
    from ember import starter
    return starter.installed()


# ---- 3. PyInstaller -------------------------------------------------------------------
QT_PLUGINS_MISSING = 3  # ember.spec's exit status when it has no Qt platform plugin


def pyinstaller(lib: Path, icons: Path, dist: Path, work: Path, starter: Path | None,
                console: bool, no_app: bool, uncompressed: bool, onedir: bool) -> None:
    args = ["--native-lib", lib, "--icons", icons]
    if onedir:
        args.append("--onedir")
    if uncompressed:
        args.append("--uncompressed")
    if starter:
        args += ["--with-starter", starter]
    if console:
        args.append("--console")
    if no_app:
        args.append("--no-app")
    cmd = [sys.executable, "-m", "PyInstaller", "--noconfirm", "--log-level", "WARN",
           "--distpath", dist, "--workpath", work, REPO / "packaging" / "ember.spec", "--", *args]
    try:
        run(cmd)
    except subprocess.CalledProcessError as e:
        if e.returncode != QT_PLUGINS_MISSING:
            raise
        # the spec found no Qt platform plugin: PyInstaller's query of Qt failed (a passing
        # failure under wine); once more, and a second miss stops the build
        log("PyInstaller collected no Qt platform plugin; once more")
        run(cmd)


def artifacts(dist: Path) -> dict[str, Path]:
    present = {p.name for p in dist.iterdir()}  # by listing: Windows names ignore case
    return {name: dist / name for name in ("ember", "Ember.exe", "ember.exe", "Ember",
                                           "Ember.app") if name in present}


def program(dist: Path, console: bool, onedir: bool) -> Path:
    """The program the smoke tests and the cold start run: the onefile, or the one in the
    --onedir folder (Windows: Ember.exe windowed, ember.exe console)."""
    name = "Ember" if WIN and not console else "ember"
    exe = name + ".exe" if WIN else name
    return dist / name / exe if onedir else dist / exe


# ---- 4. cold start --------------------------------------------------------------------
def _children_cpu() -> float:
    try:
        import resource
    except ImportError:  # Windows
        return 0.0
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def cold_start(exe: Path, runs: int) -> tuple[list[float], list[float]]:
    """Wall time (and CPU time, where known) of `exe --version`, each run a fresh process
    (a onefile build unpacks itself each time; the first run also reads it from disk)."""
    times, cpu = [], []
    for _ in range(runs):
        c0 = _children_cpu()
        t0 = time.perf_counter()
        r = run_bounded([exe, "--version"], 300, "--version")
        times.append(time.perf_counter() - t0)
        cpu.append(_children_cpu() - c0)
        if r.returncode != 0:
            raise SystemExit(f"{exe} --version failed ({r.returncode}): {r.stderr[-2000:]}")
    return times, cpu


# ---- 5. smoke tests ---------------------------------------------------------------------
def run_bounded(cmd: list, timeout: float, what: str, env: dict | None = None
                ) -> subprocess.CompletedProcess:
    """A program under test, ended with stop() when it runs past `timeout` s (then a failed
    build that names it). Its output goes to files, read once it has exited: an end of file
    on a pipe comes only when every process holding it has gone (a onefile's app outlives its
    killed bootloader; under wine a process started on the way, such as the desktop's
    explorer.exe, can keep an inherited pipe open for good), and subprocess.run's timeout
    waits for that."""
    import tempfile
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen([str(c) for c in cmd], stdin=subprocess.DEVNULL, stdout=out,
                                stderr=err, env=env)

        def text(f) -> str:
            f.seek(0)  # as text mode reads it: Windows' \r\n line ends are \n
            return f.read().decode("utf-8", errors="replace").replace("\r\n", "\n")
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            stop(proc)
            raise SystemExit(f"smoke: {what} ran past {timeout:.0f} s and was ended:\n"
                             f"{text(out)[-3000:]}\n{text(err)[-3000:]}") from None
        return subprocess.CompletedProcess(proc.args, proc.returncode, text(out), text(err))


def smoke(exe: Path, model: Path | None, console: bool, native_lib: Path | None = None,
          qt_platform: str | None = None) -> dict:
    res: dict = {}
    env = dict(os.environ, QT_QPA_PLATFORM=qt_platform or os.environ.get("QT_QPA_PLATFORM",
                                                                          "offscreen"))
    r = run_bounded([exe, "--version"], 300, "--version")
    if r.returncode != 0:
        raise SystemExit(f"smoke: --version failed: {r.stderr[-2000:]}")
    if console:
        from ember import __version__
        if r.stdout.strip() != f"ember {__version__}":
            raise SystemExit(f"smoke: --version printed {r.stdout!r}")
        log(f"smoke: --version -> {r.stdout.strip()}")
    res["version"] = "ok"
    if console:
        # the backends the file carries: the CUDA library, when built, loads and says why it
        # cannot run here rather than being missing
        r = run_bounded([exe, "info", "--backends"], 300, "info --backends")
        cuda = next((ln.strip() for ln in r.stdout.splitlines() if " CUDA " in ln), "")
        if r.returncode != 0 or not cuda:
            raise SystemExit(f"smoke: info --backends failed ({r.returncode}): {r.stdout}{r.stderr[-2000:]}")
        built = native_lib is not None and native_lib.with_name("libember-cuda.so").is_file()
        if built and "is not installed" in cuda:
            raise SystemExit(f"smoke: libember-cuda.so was built but the file lacks it: {cuda}")
        log(f"smoke: info --backends -> {cuda}")
        res["cuda"] = cuda
    if model is None:
        log("smoke: no starter model; `run` and `--self-test` skipped")
        return res
    if console:
        golden = json.loads((REPO / "tests" / "golden" / "greedy_Q4_1.json").read_text())
        case = golden["run"][0]
        n = 8
        r = run_bounded([exe, "run", "-m", model, "-p", case["prompt"], "-n", n, "--temp", "0"],
                        600, "run", env)
        if r.returncode != 0:
            raise SystemExit(f"smoke: run failed ({r.returncode}): {r.stderr[-2000:]}")
        out = r.stdout.removesuffix("\n")
        # llama.cpp's text, from the engine's own detokenizer (the source tree's build)
        from ember.engine import Model
        vocab = Model(model, vocab_only=True)
        tie = case.get("first_near_tie")
        k = n if tie is None else min(n, tie)
        want_prefix = vocab.detokenize(case["tokens"][:k])
        want_full = vocab.detokenize(case["tokens"][:n])
        if not out.startswith(want_prefix):
            raise SystemExit(f"smoke: run printed {out!r}; llama.cpp's greedy text starts "
                             f"{want_prefix!r}")
        exact = out == want_full
        log(f"smoke: run -> {out!r} ({'= llama.cpp greedy, all ' + str(n) + ' tokens' if exact else 'llama.cpp prefix up to its near-tie'})")
        res["run"] = {"text": out, "golden_exact": exact}
        res["serve"] = smoke_serve(exe, model, case["prompt"], n, out)
    t0 = time.perf_counter()
    # before this limit the self test's own watchdog (EMBER_SELFTEST_TIMEOUT, default 300 s,
    # + 60 s) prints every thread's stack and ends it
    r = run_bounded([exe, "--self-test", model], 600, "--self-test", env)
    dt = time.perf_counter() - t0
    line = next((ln for ln in (r.stdout + r.stderr).splitlines() if "self-test:" in ln), "")
    if r.returncode != 0:
        raise SystemExit(f"smoke: --self-test failed ({r.returncode}):\n{r.stdout[-3000:]}\n"
                         f"{r.stderr[-3000:]}")
    log(f"smoke: --self-test exit 0 in {dt:.1f} s: {line or '(windowed: no output)'}")
    res["self_test"] = {"seconds": round(dt, 2), "line": line}
    return res


def smoke_serve(exe: Path, model: Path, prompt: str, n: int, expected: str) -> dict:
    """`ember serve` in the onefile (uvicorn and Starlette bundled): a greedy completion over
    loopback HTTP must be `run`'s text."""
    import http.client
    import re
    proc = subprocess.Popen([str(exe), "serve", "-m", str(model), "--port", "0", "-c", "256"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        port = None
        for line in proc.stdout:  # "listening on http://127.0.0.1:PORT ...", then "... loaded"
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
            port = int(m.group(1)) if m else port
            if "loaded" in line:
                break
        if port is None or proc.poll() is not None:
            raise SystemExit(f"smoke: serve did not start: {proc.stderr.read()[-2000:]}")
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        body = {"model": model.name.removesuffix(".gguf"), "prompt": prompt, "max_tokens": n,
                "temperature": 0}
        conn.request("POST", "/v1/completions", body=json.dumps(body),
                     headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        answer = json.loads(r.read())
        conn.close()
        text = answer["choices"][0]["text"] if r.status == 200 else None
        if text != expected:
            raise SystemExit(f"smoke: serve answered {r.status} {answer!r}; run printed "
                             f"{expected!r}")
        log(f"smoke: serve -> {text!r} (= run)")
        return {"text": text}
    finally:
        stop(proc)


def stop(proc: subprocess.Popen) -> None:
    """Ends a program under test. On Windows with the process it started: a onefile
    program is the bootloader and the app it unpacked, which outlives a killed bootloader."""
    if WIN:
        sys.path.insert(0, str(REPO / "packaging" / "windows"))
        from smoke_windows import kill_tree
        kill_tree(proc)
    else:
        proc.terminate()
        proc.wait(60)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--with-starter", nargs="?", const="auto", default=None, metavar="MODEL",
                    help="bundle the starter model (default: from the asset cache / installed)")
    ap.add_argument("--console", action="store_true",
                    help="the console ember.exe on Windows (the onefile is one elsewhere)")
    ap.add_argument("--no-app", action="store_true", help="macOS: skip Ember.app")
    ap.add_argument("--onedir", action="store_true",
                    help="the one-folder variant (dist/Ember/ on Windows) instead of the onefile")
    ap.add_argument("--uncompressed", action="store_true",
                    help="store the libraries uncompressed: a ~2.5x bigger file whose start "
                         "skips inflating them")
    ap.add_argument("--native-build-dir", default="build",
                    help="CMake build folder of the engine (reused when configured)")
    ap.add_argument("--native-lib", default=None, help="use this engine library, build nothing")
    ap.add_argument("--dist", default="dist")
    ap.add_argument("--work", default="build/pyinstaller")
    ap.add_argument("--runs", type=int, default=3, help="cold-start runs of --version")
    ap.add_argument("--smoke", action="store_true", help="smoke-test the result")
    ap.add_argument("--model", default=None, help="model for --smoke (default: the starter)")
    # wine passes no QT_* variable from Linux to a Windows program, hence an option
    ap.add_argument("--qt-platform", default=None, metavar="NAME",
                    help="Qt platform of the --smoke programs (default: $QT_QPA_PLATFORM, "
                         "else offscreen)")
    ap.add_argument("-j", "--jobs", type=int, default=int(os.environ.get("JOBS", "2")))
    a = ap.parse_args(argv)
    os.chdir(REPO)
    t_all = time.perf_counter()

    lib = Path(a.native_lib) if a.native_lib else build_native(Path(a.native_build_dir), a.jobs)
    lib = lib.resolve()
    log(f"engine: {lib} ({human(lib.stat().st_size)})")

    work = Path(a.work).resolve()
    icons = work / "icons"
    run([sys.executable, REPO / "packaging" / "make_icons.py", icons],
        env=dict(os.environ, QT_QPA_PLATFORM="offscreen"))

    starter = None
    if a.with_starter:
        starter = find_starter(None if a.with_starter == "auto" else a.with_starter)
        if starter is None or not starter.is_file():
            raise SystemExit("--with-starter: no starter model (run `python tools/fetch_assets.py "
                             "starter` or `ember fetch-starter`, or pass its path)")
        log(f"bundling the starter model {starter} ({human(starter.stat().st_size)})")

    dist = Path(a.dist).resolve()
    t0 = time.perf_counter()
    pyinstaller(lib, icons, dist, work, starter, a.console, a.no_app, a.uncompressed, a.onedir)
    log(f"PyInstaller took {time.perf_counter() - t0:.0f} s")

    console = a.console or not WIN
    info: dict = {"os": platform.system(), "machine": platform.machine(),
                  "python": platform.python_version(), "with_starter": bool(starter),
                  "uncompressed": a.uncompressed, "onedir": a.onedir,
                  "console": console, "artifacts": {}}
    for name, p in artifacts(dist).items():
        size = tree_size(p)
        info["artifacts"][name] = size
        log(f"artifact: {p} {human(size)}")
    exe = program(dist, console, a.onedir)
    times, cpu = cold_start(exe, a.runs)
    info["cold_start_s"] = [round(t, 3) for t in times]
    info["cold_start_cpu_s"] = [round(t, 3) for t in cpu]
    load = f", load average {os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else ""
    log("cold start of `{} --version`: {} (median {:.2f} s; CPU {:.2f} s{})".format(
        exe.name, ", ".join(f"{t:.2f} s" for t in times), statistics.median(times),
        statistics.median(cpu), load))
    if MAC and (dist / "Ember.app").is_dir():
        app_exe = dist / "Ember.app" / "Contents" / "MacOS" / "Ember"
        t, _ = cold_start(app_exe, a.runs)
        info["app_cold_start_s"] = [round(x, 3) for x in t]
        log(f"cold start of Ember.app --version: median {statistics.median(t):.2f} s")

    if a.smoke:
        model = Path(a.model) if a.model else (starter or find_starter(None))
        info["smoke"] = smoke(exe, model, console, lib, a.qt_platform)
    info["build_seconds"] = round(time.perf_counter() - t_all, 1)
    (dist / "build-info.json").write_text(json.dumps(info, indent=1))
    log(f"done in {info['build_seconds']:.0f} s; summary in {dist / 'build-info.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
