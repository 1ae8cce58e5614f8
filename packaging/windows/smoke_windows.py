"""Windows-only checks of the packaged Ember.exe / ember.exe, run by the Windows Python that
built them (packaging/build_windows_under_wine.sh, under wine or natively) after
`packaging/build.py --smoke`, which checks --version, `run` against llama.cpp's greedy text,
`serve` and --self-test:

  1. the PE files: Ember.exe a GUI program, ember.exe a console one, each with the icon, a
     version resource (FileVersion = ember.__version__) and a manifest; no UPX sections;
  2. broken GGUF files (a truncated download, an unknown version) refused by ember.exe with
     the engine's message and exit status 1;
  3. Ember.exe, started with the starter model, opens its chat store (SQLite, WAL) in the
     user's %LOCALAPPDATA%\\Ember (under wine: the prefix's C:\\users\\<user>\\AppData\\Local).

    python smoke_windows.py WINDOWED_EXE CONSOLE_EXE STARTER.gguf
"""
from __future__ import annotations

import ctypes
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from ctypes import wintypes
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "app"))
sys.path.insert(0, str(REPO / "packaging"))


def log(msg: str) -> None:
    print(f"[windows-smoke] {msg}", flush=True)


def fail(msg: str) -> None:
    raise SystemExit(f"[windows-smoke] FAIL: {msg}")


def under_wine() -> bool:
    return hasattr(ctypes.WinDLL("ntdll"), "wine_get_version")


# ---- processes ----------------------------------------------------------------------------
class PROCESSENTRY32W(ctypes.Structure):
    _fields_ = [("dwSize", wintypes.DWORD), ("cntUsage", wintypes.DWORD),
                ("th32ProcessID", wintypes.DWORD), ("th32DefaultHeapID", ctypes.c_void_p),
                ("th32ModuleID", wintypes.DWORD), ("cntThreads", wintypes.DWORD),
                ("th32ParentProcessID", wintypes.DWORD), ("pcPriClassBase", ctypes.c_long),
                ("dwFlags", wintypes.DWORD), ("szExeFile", ctypes.c_wchar * 260)]


def _children() -> dict[int, list[int]]:
    k32 = ctypes.WinDLL("kernel32", use_last_error=True)
    k32.CreateToolhelp32Snapshot.restype = wintypes.HANDLE
    snap = k32.CreateToolhelp32Snapshot(0x2, 0)  # TH32CS_SNAPPROCESS
    kids: dict[int, list[int]] = {}
    entry = PROCESSENTRY32W(dwSize=ctypes.sizeof(PROCESSENTRY32W))
    ok = k32.Process32FirstW(wintypes.HANDLE(snap), ctypes.byref(entry))
    while ok:
        kids.setdefault(entry.th32ParentProcessID, []).append(entry.th32ProcessID)
        ok = k32.Process32NextW(wintypes.HANDLE(snap), ctypes.byref(entry))
    k32.CloseHandle(wintypes.HANDLE(snap))
    return kids


def kill_tree(proc: subprocess.Popen) -> None:
    """A onefile program is two processes (the bootloader and the app it unpacked and
    started); terminating the bootloader alone leaves the app running. Children first."""
    kids, todo, order = _children(), [proc.pid], []
    while todo:
        pid = todo.pop()
        order.append(pid)
        todo += kids.get(pid, [])
    k32 = ctypes.WinDLL("kernel32")
    k32.OpenProcess.restype = wintypes.HANDLE
    for pid in reversed(order[1:]):
        h = k32.OpenProcess(0x0001, False, pid)  # PROCESS_TERMINATE
        if h:
            k32.TerminateProcess(wintypes.HANDLE(h), 1)
            k32.CloseHandle(wintypes.HANDLE(h))
    proc.kill()
    proc.wait(30)


# ---- 1. PE files ----------------------------------------------------------------------------
def check_pe(exe: Path, gui: bool) -> None:
    import pefile

    from ember import __version__
    pe = pefile.PE(str(exe), fast_load=False)
    subsystem = pe.OPTIONAL_HEADER.Subsystem  # 2 GUI, 3 console
    if subsystem != (2 if gui else 3):
        fail(f"{exe.name}: subsystem {subsystem}, expected {'GUI' if gui else 'console'}")
    resources = pe.DIRECTORY_ENTRY_RESOURCE.entries if hasattr(pe, "DIRECTORY_ENTRY_RESOURCE") else []
    types = {e.id for e in resources}
    want = {14: "icon", 16: "version", 24: "manifest"}  # RT_GROUP_ICON, RT_VERSION, RT_MANIFEST
    missing = [name for rid, name in want.items() if rid not in types]
    if missing:
        fail(f"{exe.name}: no {', '.join(missing)} resource")
    strings = {k.decode(): v.decode() for fi in pe.FileInfo[0] if fi.Key == b"StringFileInfo"
               for table in fi.StringTable for k, v in table.entries.items()}
    if strings.get("FileVersion") != __version__:
        fail(f"{exe.name}: FileVersion {strings.get('FileVersion')!r}, expected {__version__!r}")
    sections = [s.Name.rstrip(b"\0").decode(errors="replace") for s in pe.sections]
    if any(s.upper().startswith("UPX") for s in sections):
        fail(f"{exe.name}: UPX-packed ({sections})")
    log(f"{exe.name}: {'GUI' if gui else 'console'} program, icon, manifest, version "
        f"{strings['FileVersion']} ({strings.get('FileDescription')}), sections {sections}")


# ---- 2. broken GGUF files ---------------------------------------------------------------------
def check_bad_gguf(console: Path, starter: Path) -> None:
    from build import run_bounded  # packaging/build.py: ended with kill_tree past its limit
    with tempfile.TemporaryDirectory(prefix="ember-bad-") as d:
        truncated = Path(d) / "truncated download.gguf"
        truncated.write_bytes(starter.read_bytes()[:1_000_000])
        version = Path(d) / "version99.gguf"
        version.write_bytes(b"GGUF" + (99).to_bytes(4, "little") + bytes(16))
        for path, words in ((truncated, "is larger than the file"),
                            (version, "unsupported GGUF version 99")):
            r = run_bounded([console, "run", "-m", path, "-p", "hi", "-n", "1"], 300,
                            f"run -m {path.name!r}")
            err = r.stderr.strip()
            if r.returncode != 1 or not err.startswith("ember: error:") or words not in err:
                fail(f"{path.name}: exit {r.returncode}, stderr {err[-500:]!r}; expected exit 1 "
                     f"and 'ember: error: ...{words}...'")
            log(f"bad GGUF refused: {path.name}: {err}")


# ---- 3. the chat store under %LOCALAPPDATA% ------------------------------------------------
def check_store(windowed: Path, starter: Path, timeout: float = 180) -> None:
    local = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    store = local / "Ember" / "history.sqlite3"
    wal = store.with_name(store.name + "-wal")  # exists while a connection has it open
    if under_wine():  # the build's own prefix: start from no store, so it is seen created
        for f in (store, wal, store.with_name(store.name + "-shm")):
            f.unlink(missing_ok=True)
    existed = store.exists()
    env = dict(os.environ, QT_QPA_PLATFORM=os.environ.get("QT_QPA_PLATFORM", "offscreen"))
    env.pop("EMBER_DATA_DIR", None)
    proc = subprocess.Popen([str(windowed), str(starter)], env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    t0 = time.perf_counter()
    try:
        while not wal.exists() and proc.poll() is None and time.perf_counter() - t0 < timeout:
            time.sleep(0.25)
        opened = wal.exists()
        dt = time.perf_counter() - t0
    finally:
        kill_tree(proc)
    if not opened:
        fail(f"{windowed.name} did not open {store} within {timeout:.0f} s "
             f"(exit status {proc.returncode})")
    db = sqlite3.connect(f"file:{store.as_posix()}?mode=ro", uri=True)
    try:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        mode = db.execute("PRAGMA journal_mode").fetchone()[0]
    finally:
        db.close()
    if "conversations" not in tables:
        fail(f"{store}: tables {sorted(tables)}, no conversations")
    log(f"chat store {'opened' if existed else 'created'} by {windowed.name} after {dt:.1f} s: "
        f"{store} (journal {mode}, "
        f"tables {', '.join(sorted(tables))})")


def main(argv: list[str]) -> int:
    if len(argv) != 3 or sys.platform != "win32":
        print(__doc__, file=sys.stderr)
        return 2
    windowed, console, starter = (Path(a).resolve() for a in argv)
    check_pe(windowed, gui=True)
    check_pe(console, gui=False)
    check_bad_gguf(console, starter)
    check_store(windowed, starter)
    log("all Windows checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
