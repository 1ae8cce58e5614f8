"""Whether Qt can open a window on this Linux desktop, asked before a QApplication exists:
Qt aborts the process (SIGABRT) when its xcb plugin cannot load or the X display cannot be
reached, and its message then blames xcb-cursor0 whatever is missing."""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import re
import subprocess
import sys
from pathlib import Path


def debian_package(soname: str) -> str:
    """The Debian/Ubuntu package that ships a library: libxcb-icccm.so.4 -> libxcb-icccm4,
    libxkbcommon-x11.so.0 -> libxkbcommon-x11-0 (Debian's naming rule for libraries)."""
    m = re.fullmatch(r"(.+?)\.so\.(\d+).*", soname)
    if not m:
        return soname
    stem, major = m.group(1).lower(), m.group(2)
    return f"{stem}-{major}" if stem[-1].isdigit() else f"{stem}{major}"


def unresolved_libraries(ldd_output: str) -> list[str]:
    """The sonames ldd printed as "=> not found", each once, in ldd's order."""
    found = re.findall(r"^\s*(\S+)\s+=>\s+not found", ldd_output, flags=re.MULTILINE)
    return list(dict.fromkeys(found))


def xcb_plugin() -> Path | None:
    """Qt's xcb platform plugin file, where this PySide6 has one."""
    from PySide6.QtCore import QLibraryInfo
    folder = Path(QLibraryInfo.path(QLibraryInfo.LibraryPath.PluginsPath)) / "platforms"
    hits = sorted(folder.glob("libqxcb*.so*")) if folder.is_dir() else []
    return hits[0] if hits else None


def missing_xcb_libraries(plugin: Path) -> list[str]:
    """Libraries the xcb plugin needs and the dynamic loader cannot find (ldd walks the
    plugin's dependencies, Qt's own xcb library included). [] when ldd is not there."""
    try:
        out = subprocess.run(["ldd", str(plugin)], capture_output=True, text=True,
                             timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return unresolved_libraries(out)


def display_reachable(display: str) -> bool:
    """Whether an X connection to display opens (libxcb's own connect, as Qt's xcb plugin
    does: sockets, TCP and X authority included). True when libxcb itself is absent: the
    library check reports that."""
    name = ctypes.util.find_library("xcb")
    if name is None:
        return True
    try:
        xcb = ctypes.CDLL(name)
    except OSError:
        return True
    xcb.xcb_connect.restype = ctypes.c_void_p
    xcb.xcb_connect.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
    xcb.xcb_connection_has_error.argtypes = [ctypes.c_void_p]
    xcb.xcb_disconnect.argtypes = [ctypes.c_void_p]
    conn = xcb.xcb_connect(display.encode(), None)
    try:
        return bool(conn) and xcb.xcb_connection_has_error(conn) == 0
    finally:
        if conn:
            xcb.xcb_disconnect(conn)


def _uses_xcb(env: dict[str, str]) -> bool:
    chosen = env.get("QT_QPA_PLATFORM", "").split(";")[0].split(":")[0]
    if chosen:
        return chosen == "xcb"
    return not env.get("WAYLAND_DISPLAY")  # Qt prefers Wayland where a compositor runs


def why_no_window(env: dict[str, str] | None = None) -> str | None:
    """None when Qt should be able to open a window; else a sentence for the user saying
    what is missing (system packages by name, or the display)."""
    env = dict(os.environ) if env is None else env
    if not sys.platform.startswith("linux") or not _uses_xcb(env):
        return None
    display = env.get("DISPLAY", "")
    plugin = xcb_plugin()
    if plugin is None:
        return None  # an unusual Qt build: let Qt itself say what it can
    missing = missing_xcb_libraries(plugin)
    if missing:
        packages = " ".join(dict.fromkeys(debian_package(m) for m in missing))
        return (f"the desktop app needs system libraries that are not installed "
                f"({', '.join(missing)}); on Debian or Ubuntu: sudo apt install {packages}")
    if not display:
        return "no display (DISPLAY is not set)"
    if not display_reachable(display):
        return (f"cannot open the display {display!r} (no X server answers there, or it "
                f"refused the connection)")
    return None
