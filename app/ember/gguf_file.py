"""A GGUF file's layout in Python: metadata entries kept as their raw bytes (so a rewrite
copies them exactly), tensor infos, and the data offsets. Used by `ember quantize`; the
engine's own reader (native/src/gguf) is what loads models."""
from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from pathlib import Path

__all__ = ["GGUFLayout", "TensorInfo", "encode_kv_u32", "read_layout"]

_SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_DECODE = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q",
           11: "<q", 12: "<d"}
DEFAULT_ALIGNMENT = 32


@dataclass
class TensorInfo:
    name: str
    shape: tuple[int, ...]   # ne[0] first (the contiguous dimension)
    type: int
    offset: int              # relative to the data section

    @property
    def n_elements(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def n_dims(self) -> int:
        """Dimensions counted as ggml does: trailing ones do not count (at least one)."""
        n = len(self.shape)
        while n > 1 and self.shape[n - 1] == 1:
            n -= 1
        return max(n, 1)


@dataclass
class GGUFLayout:
    path: Path
    version: int
    kv_raw: list[tuple[str, bytes]]      # (key, bytes of the whole entry) in file order
    values: dict[str, object]            # decoded scalars and strings (arrays: None)
    tensors: list[TensorInfo]
    alignment: int
    data_start: int

    def array(self, key: str) -> list | None:
        """The array stored under `key` decoded (strings, numbers, bools), or None."""
        raw = next((b for k, b in self.kv_raw if k == key), None)
        if raw is None:
            return None
        c = _Cursor(raw)
        c.string()
        if c.u32() != 9:
            raise ValueError(f"{key} is not an array")
        etype, count = c.u32(), c.u64()
        if etype == 8:
            return [c.string() for _ in range(count)]
        if etype not in _SCALAR:
            raise ValueError(f"{key}: nested arrays are not decoded")
        size = _SCALAR[etype]
        return list(struct.unpack(f"<{count}{_DECODE[etype][1]}", c.take(size * count)))

    def data(self, buf: mmap.mmap | bytes, t: TensorInfo, nbytes: int) -> memoryview:
        start = self.data_start + t.offset
        if start + nbytes > len(buf):
            raise ValueError(f"tensor {t.name} runs past the end of the file")
        return memoryview(buf)[start:start + nbytes]


class _Cursor:
    def __init__(self, buf):
        self.buf, self.pos = buf, 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise ValueError("GGUF file is truncated")
        b = self.buf[self.pos:self.pos + n]
        self.pos += n
        return bytes(b)

    def u32(self) -> int:
        return struct.unpack("<I", self.take(4))[0]

    def u64(self) -> int:
        return struct.unpack("<Q", self.take(8))[0]

    def string(self) -> str:
        return self.take(self.u64()).decode("utf-8", errors="replace")

    def skip_value(self, vtype: int):
        """Skips one value; returns it decoded when it is a scalar or a string."""
        if vtype in _SCALAR:
            return struct.unpack(_DECODE[vtype], self.take(_SCALAR[vtype]))[0]
        if vtype == 8:
            return self.string()
        if vtype == 9:
            etype, count = self.u32(), self.u64()
            if etype in _SCALAR:
                self.take(_SCALAR[etype] * count)
            elif etype == 8:  # a vocabulary: 100k+ strings, stepped over without decoding
                buf, pos, end = self.buf, self.pos, len(self.buf)
                for _ in range(count):
                    if pos + 8 > end:
                        raise ValueError("GGUF file is truncated")
                    pos += 8 + struct.unpack_from("<Q", buf, pos)[0]
                if pos > end:
                    raise ValueError("GGUF file is truncated")
                self.pos = pos
            else:
                for _ in range(count):
                    self.skip_value(etype)
            return None
        raise ValueError(f"unknown GGUF value type {vtype}")


def read_layout(path: str | Path, buf=None) -> GGUFLayout:
    """Parses the header, metadata and tensor infos of a GGUF v2/v3 file."""
    path = Path(path)
    if buf is None:
        with open(path, "rb") as f:
            buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    c = _Cursor(buf)
    if c.take(4) != b"GGUF":
        raise ValueError(f"{path} is not a GGUF file")
    version = c.u32()
    if version not in (2, 3):
        raise ValueError(f"{path}: GGUF version {version} is not supported")
    n_tensors, n_kv = c.u64(), c.u64()
    kv_raw, values = [], {}
    for _ in range(n_kv):
        start = c.pos
        key = c.string()
        values[key] = c.skip_value(c.u32())
        kv_raw.append((key, bytes(buf[start:c.pos])))
    tensors = []
    for _ in range(n_tensors):
        name = c.string()
        n_dims = c.u32()
        if n_dims > 4:
            raise ValueError(f"tensor {name} has {n_dims} dimensions")
        shape = tuple(c.u64() for _ in range(n_dims))
        tensors.append(TensorInfo(name, shape, c.u32(), c.u64()))
    alignment = values.get("general.alignment", DEFAULT_ALIGNMENT)
    if not isinstance(alignment, int) or alignment <= 0 or alignment & (alignment - 1):
        raise ValueError(f"{path}: bad general.alignment {alignment!r}")
    data_start = (c.pos + alignment - 1) // alignment * alignment
    return GGUFLayout(path, version, kv_raw, values, tensors, alignment, data_start)


def encode_string(s: str) -> bytes:
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def encode_kv_u32(key: str, value: int) -> bytes:
    return encode_string(key) + struct.pack("<II", 4, value)


def encode_tensor_info(name: str, shape: tuple[int, ...], n_dims: int, type_id: int,
                       offset: int) -> bytes:
    out = encode_string(name) + struct.pack("<I", n_dims)
    out += b"".join(struct.pack("<Q", d) for d in shape[:n_dims])
    return out + struct.pack("<IQ", type_id, offset)
