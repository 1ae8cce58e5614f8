"""PyInstaller runtime hook (onefile builds): removes Ember's stale unpack folders.

A onefile build unpacks itself into <temp>/_MEIxxxxxx at each start and the bootloader
deletes that folder when the app exits. A crash of the bootloader itself (killed, power
loss) leaves the folder behind, a few hundred MB each time. This hook marks the folder of
the running app with the PIDs that own it (the bootloader parent and this process) and, in a
background thread, deletes sibling _MEI* folders whose marker names only dead processes.
Folders without Ember's marker (other PyInstaller apps) are never touched. The marker is
removed last, so a deletion cut short by a quick exit is finished by a later start.
"""
import os
import sys
import threading

MARKER = ".ember-owner"


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    if sys.platform == "win32":
        import ctypes
        k32 = ctypes.windll.kernel32
        k32.OpenProcess.restype = ctypes.c_void_p
        h = k32.OpenProcess(0x1000, False, pid)  # PROCESS_QUERY_LIMITED_INFORMATION
        if not h:
            return ctypes.GetLastError() == 5  # ERROR_ACCESS_DENIED: exists, not ours
        try:
            code = ctypes.c_ulong()
            ok = k32.GetExitCodeProcess(ctypes.c_void_p(h), ctypes.byref(code))
            return not ok or code.value == 259  # STILL_ACTIVE
        finally:
            k32.CloseHandle(ctypes.c_void_p(h))
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove(folder: str) -> None:
    marker = os.path.join(folder, MARKER)
    for root, dirs, files in os.walk(folder, topdown=False):
        for f in files:
            if root != folder or f != MARKER:
                try:
                    os.remove(os.path.join(root, f))
                except OSError:
                    pass
        for d in dirs:
            try:
                os.rmdir(os.path.join(root, d))
            except OSError:
                pass
    try:
        os.remove(marker)
        os.rmdir(folder)
    except OSError:
        pass


def _sweep(mine: str) -> None:
    parent = os.path.dirname(mine)
    try:
        names = os.listdir(parent)
    except OSError:
        return
    for name in names:
        path = os.path.join(parent, name)
        if not name.startswith("_MEI") or os.path.normcase(path) == os.path.normcase(mine):
            continue
        try:
            with open(os.path.join(path, MARKER), encoding="ascii") as f:
                pids = [int(p) for p in f.read().split()]
        except (OSError, ValueError):
            continue  # not Ember's, or being created right now
        if pids and not any(_pid_alive(p) for p in pids):
            _remove(path)


def _install() -> None:
    mine = getattr(sys, "_MEIPASS", None)
    # onefile only: a onedir / .app build has no temporary folder
    if not mine or not os.path.basename(os.path.normpath(mine)).startswith("_MEI"):
        return
    try:
        with open(os.path.join(mine, MARKER), "w", encoding="ascii") as f:
            f.write(f"{os.getppid()} {os.getpid()}\n")
    except OSError:
        return
    if os.environ.get("EMBER_NO_MEI_CLEANUP"):
        return
    threading.Thread(target=_sweep, args=(mine,), name="ember-mei-cleanup", daemon=True).start()


_install()
