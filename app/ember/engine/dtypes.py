"""The GGUF element types' reference codecs (used by tests and tools)."""
from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING

from . import native
from .errors import _check

if TYPE_CHECKING:
    import numpy as np  # imported where used: chatting needs no numpy (start-up time, memory)


def type_name(type_id: int) -> str | None:
    name = native.lib().ember_type_name(type_id)
    return name.decode() if name else None


# GGUF's element type ids are one byte wide in practice (ggml's enum ends below 64)
_TYPE_IDS = range(256)


def weight_types() -> dict[int, tuple[str, int, int]]:
    """The element types a model's weights may have: id -> (name, elements per block,
    bytes per block), from the engine's type table."""
    lib = native.lib()
    return {i: (type_name(i), int(lib.ember_type_block_size(i)), int(lib.ember_type_block_bytes(i)))
            for i in _TYPE_IDS if lib.ember_type_is_weight(i)}


def dequantize(type_id: int, data: bytes | np.ndarray, n: int) -> np.ndarray:
    """n float32 values from the raw blocks of a GGUF element type."""
    import numpy as np
    src = np.frombuffer(data, dtype=np.uint8) if isinstance(data, bytes) else \
        np.ascontiguousarray(data).view(np.uint8)
    lib = native.lib()
    bs, bb = lib.ember_type_block_size(type_id), lib.ember_type_block_bytes(type_id)
    if bs == 0 or n % bs or src.size < n // bs * bb:
        raise ValueError(f"{n} elements do not fit type {type_id} in {src.size} bytes")
    out = np.empty(n, dtype=np.float32)
    _check(lib.ember_dequantize(type_id, src.ctypes.data, out.ctypes.data_as(
        ctypes.POINTER(ctypes.c_float)), n))
    return out


def quantize(type_id: int, values: np.ndarray) -> bytes:
    """Reference quantization of float32 values to a GGUF element type's blocks."""
    import numpy as np
    x = np.ascontiguousarray(values, dtype=np.float32).ravel()
    lib = native.lib()
    bs, bb = lib.ember_type_block_size(type_id), lib.ember_type_block_bytes(type_id)
    if bs == 0 or x.size % bs:
        raise ValueError(f"{x.size} elements are not whole blocks of type {type_id}")
    out = np.empty(x.size // bs * bb, dtype=np.uint8)
    _check(lib.ember_quantize(type_id, x.ctypes.data_as(ctypes.POINTER(ctypes.c_float)),
                              out.ctypes.data, x.size))
    return out.tobytes()


def type_block(type_id: int) -> tuple[int, int]:
    """(elements per block, bytes per block) of a GGUF element type; (0, 0) if unknown."""
    lib = native.lib()
    return int(lib.ember_type_block_size(type_id)), int(lib.ember_type_block_bytes(type_id))


def quantize_into(type_id: int, values: np.ndarray, out: np.ndarray) -> None:
    """Reference quantization of contiguous float32 values into out's bytes (no copy). The
    native call releases the GIL, so threads can quantize separate slices at once."""
    lib = native.lib()
    bs, bb = lib.ember_type_block_size(type_id), lib.ember_type_block_bytes(type_id)
    if values.dtype.name != "float32" or not values.flags.c_contiguous or not out.flags.c_contiguous:
        raise ValueError("quantize_into needs contiguous float32 input and a contiguous output")
    if bs == 0 or values.size % bs or out.nbytes < values.size // bs * bb:
        raise ValueError(f"{values.size} elements do not fit type {type_id} in {out.nbytes} bytes")
    _check(lib.ember_quantize(type_id, values.ctypes.data_as(ctypes.POINTER(ctypes.c_float)),
                              out.ctypes.data, values.size))
