"""Where the app runs a model: the "Run on" choices Settings offers (from the engine's
backend_devices() rows), the backend a saved choice resolves to on this computer, and the
status-bar line that says where the loaded model runs. No Qt and no engine calls here."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol, Sequence

# what Settings.backend may hold: "auto", "cpu" or a backend with an optional device
SELECTOR = re.compile(r"^[a-z][a-z0-9_]*(:\d+)?$")
NOTE_LIMIT = 64  # characters of a note the status bar shows; the tooltip has all of it
# system_info()'s EMBER_ISA spellings as the engine's own status lines write them
# (isa_label in native/src/cpu/kernels.cpp), so the bar reads the same before and after a load
ISA_LABELS = {"scalar": "scalar", "avx2": "AVX2", "avx512": "AVX-512", "neon": "NEON"}


class DeviceRow(Protocol):  # engine.BackendDevice
    backend: str
    label: str
    device: int
    usable: bool
    name: str
    memory_total: int
    memory_free: int
    reason: str


@dataclass(frozen=True)
class RunOnChoice:
    selector: str  # Settings.backend and Model(backend=...): "auto", "cpu", "cuda:0"
    label: str
    usable: bool
    tooltip: str  # the device's facts, or why the backend cannot be used


def _gb(n: int) -> str:
    return f"{n / 2**30:.1f} GB"


def run_on_choices(devices: Sequence[DeviceRow], saved: str | None = None) -> list[RunOnChoice]:
    """Auto, the CPU, each usable device, then each backend that cannot run here (not
    usable, with its reason). A saved device this computer does not have now is kept as a
    choice of its own, so opening Settings does not change it silently."""
    out = [RunOnChoice("auto", "Auto (the best GPU, else the CPU)", True,
                       "The usable GPU with the highest score and the most free memory; "
                       "the CPU when there is none")]
    per_backend: dict[str, int] = {}
    for d in devices:
        if d.usable and d.backend != "cpu":
            per_backend[d.backend] = per_backend.get(d.backend, 0) + 1
    unusable = []
    for d in devices:
        if d.backend == "cpu":
            out.append(RunOnChoice("cpu", "CPU", True, d.name))
        elif d.usable:
            which = f" {d.device}" if per_backend[d.backend] > 1 else ""
            free = f" ({_gb(d.memory_free)} free)" if d.memory_total else ""
            facts = f", {_gb(d.memory_total)} of memory" if d.memory_total else ""
            out.append(RunOnChoice(f"{d.backend}:{d.device}", f"{d.label}{which}: {d.name}{free}",
                                   True, f"{d.label} device {d.device}: {d.name}{facts}"))
        else:
            unusable.append(RunOnChoice(d.backend, f"{d.label}: unavailable", False,
                                        d.reason or "unavailable"))
    if saved and saved not in {c.selector for c in out}:
        out.append(RunOnChoice(saved, f"{saved} (not found now)", True,
                               "Chosen before; this computer has no such device now, so the "
                               "model runs where Ember can (the status bar says where)"))
    return out + unusable


def unavailable_text(devices: Sequence[DeviceRow]) -> str:
    """One line per backend that cannot run here, with its reason ("" when all can)."""
    return "\n".join(f"{d.label} is unavailable: {d.reason}." for d in devices
                     if not d.usable and d.backend != "cpu")


def resolve(selector: str, devices: Sequence[DeviceRow]) -> tuple[str, str]:
    """The Model(backend=...) value for a saved choice, and a note when it cannot be used
    as saved: a backend this install does not have at all (its library removed, or a test
    backend) would be an error at load, so it runs as Auto instead."""
    base = selector.split(":", 1)[0]
    if selector in ("auto", "cpu") or any(d.backend == base for d in devices):
        return selector, ""
    return "auto", f"no backend '{base}' in this Ember (Run on: Auto used)"


def cpu_line(system_info: str) -> str:
    """"CPU (AVX-512)": the CPU and its instruction level from engine.system_info()'s
    "ISA=avx512 active=avx2 ..." (the level in use), or "CPU" where it says none."""
    parts = dict(p.split("=", 1) for p in system_info.split() if "=" in p)
    isa = parts.get("active") or parts.get("ISA")
    return f"CPU ({ISA_LABELS.get(isa, isa.upper())})" if isa else "CPU"


def _shorten(note: str, limit: int) -> str:
    if len(note) <= limit:
        return note
    # the facts in parentheses (library paths, byte counts) go first, then the tail
    short = re.sub(r"\s*\([^()]*\)", "", note).strip()
    if len(short) <= limit:
        return short
    cut = short[:limit - 1]
    return (cut.rsplit(" ", 1)[0] if " " in cut else cut).rstrip(" ;,") + "…"


def status_line(summary: str, note: str, limit: int = NOTE_LIMIT) -> tuple[str, str]:
    """"CUDA: NVIDIA H200, 30/31 layers", or "CPU (AVX2) — CUDA: no driver": the text for
    the status bar and its tooltip (the whole note)."""
    if not note:
        return summary, f"Where the model runs: {summary}"
    return f"{summary} — {_shorten(note, limit)}", f"Where the model runs: {summary}\n{note}"
