"""The layering the architecture promises: ui/ talks to the engine through engine.py
(and chat/, model_card.py), never to the ctypes layer; chat/ knows no Qt and no engine."""
from __future__ import annotations

import ast
from pathlib import Path

APP = Path(__file__).resolve().parent.parent / "app" / "ember"


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
                 for p in (APP / "ui").glob("*.py")}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_chat_logic_needs_neither_qt_nor_the_engine():
    for p in (APP / "chat").glob("*.py"):
        mods = imported_modules(p)
        assert not any(m.startswith("PySide6") for m in mods), p.name
        assert not any(m in ("engine", "native") or m.startswith(("engine.", "native."))
                       for m in mods), p.name
