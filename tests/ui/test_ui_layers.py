"""The layering the architecture promises: ui/ talks to the engine through the engine
package's API (and chat/, model_card.py), never to the ctypes layer; chat/ knows no Qt and
no engine; the engine knows nothing above it; storage knows no Qt."""
from __future__ import annotations

import ast
from pathlib import Path

APP = Path(__file__).resolve().parents[2] / "app" / "ember"


def imported_modules(path: Path) -> set[str]:
    """Absolute-ish names of what a module imports ("..native" -> "native")."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = (node.module or "").lstrip(".")
            if node.level and not base:  # "from .. import native"
                out.update(a.name for a in node.names)
            else:
                out.add(base)
                out.update(f"{base}.{a.name}" for a in node.names)
    return out


def test_ui_never_imports_native():
    offenders = {p.name: sorted(m for m in imported_modules(p)
                                if m == "native" or m.endswith(".native")
                                or m.startswith("native"))
                 for p in (APP / "ui").rglob("*.py")}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_chat_logic_needs_neither_qt_nor_the_engine():
    for p in (APP / "chat").glob("*.py"):
        mods = imported_modules(p)
        assert not any(m.startswith("PySide6") for m in mods), p.name
        assert not any(m in ("engine", "native") or m.startswith(("engine.", "native."))
                       for m in mods), p.name


PACKAGE_RULES = {
    # folder: what its modules may not import (top-level names under ember)
    "engine": {"chat", "commands", "server", "storage", "ui", "PySide6"},
    "storage": {"commands", "server", "ui", "PySide6"},  # settings make engine.SamplingParams
    "chat": {"engine", "commands", "server", "storage", "ui", "PySide6"},
    "server": {"commands", "ui", "PySide6"},
    # the library: the engine's embeddings plug in behind documents.embedder.Embedder
    "documents": {"commands", "server", "ui", "PySide6"},
}


def _top(module: str) -> str:
    return module.split(".")[0]


def test_only_the_engine_speaks_ctypes():
    # native.py is the one file that speaks to the engine's library, and only the engine
    # package imports it (display_check's ctypes speaks to libxcb, not to the engine)
    offenders = {}
    for p in APP.rglob("*.py"):
        rel = p.relative_to(APP).as_posix()
        if rel.startswith("engine/"):
            continue
        mods = imported_modules(p)
        bad = sorted(m for m in mods if m == "native" or m.endswith(".native"))
        if bad:
            offenders[rel] = bad
    assert offenders == {}


def test_each_package_imports_only_what_sits_below_it():
    offenders = {}
    for folder, banned in PACKAGE_RULES.items():
        for p in (APP / folder).rglob("*.py"):
            bad = sorted(m for m in imported_modules(p) if _top(m) in banned)
            if bad:
                offenders[p.relative_to(APP).as_posix()] = bad
    assert offenders == {}
