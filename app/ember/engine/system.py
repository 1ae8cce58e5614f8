"""The machine as the engine sees it: backends and their devices, instruction-set levels,
the default thread count and placement, the architectures it runs."""
from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from . import native
from .errors import _check

if TYPE_CHECKING:
    pass  # imported where used: chatting needs no numpy (start-up time, memory)


_default_placement: list = ["auto", -1]


def set_default_placement(backend: str | None = None, gpu_layers: int | None = None) -> None:
    """Where models opened without backend=/gpu_layers= run (the CLI's --backend and
    --gpu-layers, the app's settings): "auto", "cpu", "cuda", "cuda:1"; -1 as many layers
    as fit, 0 none, N the last N (the output head counted as one)."""
    if backend is not None:
        _default_placement[0] = backend
    if gpu_layers is not None:
        _default_placement[1] = gpu_layers


@dataclass
class BackendDevice:
    """A row of backend_devices(): a usable device, or a backend that cannot run here."""
    backend: str        # "cpu", "cuda", "test": what Model(backend=...) takes
    label: str          # "CPU", "CUDA"
    device: int         # -1 for an unusable backend
    usable: bool
    score: int
    name: str           # "NVIDIA H200", the CPU's model name
    memory_total: int   # bytes (0: unknown)
    memory_free: int
    reason: str         # why it cannot be used ("" when it can)
    path: str           # its library ("" for the CPU)

    @property
    def selector(self) -> str:
        """The Model(backend=...) value that picks this device."""
        return self.backend if self.backend == "cpu" else f"{self.backend}:{self.device}"


def backend_devices() -> list[BackendDevice]:
    """The CPU and every GPU backend this install has, usable or with the reason why not."""
    lib = native.lib()
    rows = []
    for i in range(int(lib.ember_backend_device_count())):
        d = native.BackendDevice()
        _check(lib.ember_backend_device_get(i, ctypes.byref(d)))
        rows.append(BackendDevice(
            d.backend.decode(), d.label.decode(), int(d.device), bool(d.usable), int(d.score),
            d.name.decode("utf-8", "replace"), int(d.memory_total), int(d.memory_free),
            d.reason.decode("utf-8", "replace"), d.path.decode("utf-8", "replace")))
    return rows


def supported_isas() -> list[str]:
    """Instruction-set levels this CPU can run the kernels at (for tests and settings)."""
    lib = native.lib()
    return [name for name, v in native.ISA_LEVELS.items() if v >= 0 and lib.ember_isa_supported(v)]


def default_threads() -> int:
    """The threads a context uses when none are asked for (the engine's count of physical
    cores)."""
    import re
    m = re.search(r"threads=(\d+)", native.decode_str(native.lib().ember_system_info()))
    return int(m.group(1)) if m else (os.cpu_count() or 1)


def supported_architectures() -> dict[str, str]:
    """The model architectures the engine runs: GGUF ``general.architecture`` name ->
    the models users know it as (from the engine's architecture table)."""
    text = native.decode_str(native.lib().ember_architectures())
    return dict(line.split("\t", 1) for line in text.splitlines() if line)


def system_info() -> str:
    """The engine's build and CPU description ("ISA=avx2 active=avx2 threads=8 ...")."""
    return native.decode_str(native.lib().ember_system_info())
