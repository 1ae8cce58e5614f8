#!/usr/bin/env python3
"""Build F16 / Q8_0 / Q4_0 variants of the starter model with gguf-py only.

Mirrors ``llama_model_quantize`` with ``pure = True`` (every quantizable 2-D
weight gets the same type, including token_embd) and ``allow_requantize``:

* F16  is made from the shipped Q4_1 file (Q4_1/Q8_0 -> f32 -> f16),
* Q8_0 and Q4_0 are made from that F16 file (f16 -> f32 -> quant).

"Quantizable" follows llama.cpp's ``tensor_allows_quantization``: >= 2 dims,
name ends in ``weight``, not a ``*_norm.weight``.  1-D tensors are copied.
All metadata is copied byte-for-byte (strings as raw bytes, original value
types) except ``general.file_type`` which is set to the new llama_ftype;
like llama.cpp, ``general.quantization_version`` and ``general.file_type`` go
last and tensors are written in llama.cpp's loader order (block, name).  The
result is byte-identical to ``llama_model_quantize(pure=True)`` output for
this model (verified with llama.cpp from llama-cpp-python 0.3.36).

The output is deterministic; tests/golden/meta.json records the sha256 of each
variant file so tests can check that their build matches the files the goldens
were generated from.  Files go to ``<asset cache>/variants/``.

Requires ``gguf==0.19.0`` (pip).  CLI: ``python tools/make_variants.py [--out DIR]``
"""
from __future__ import annotations

import os
import re
import sys
import tempfile
from pathlib import Path

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tools import fetch_assets  # noqa: E402

# llama_ftype values written to general.file_type
FTYPES = {"F16": 1, "Q8_0": 7, "Q4_0": 2, "Q4_1": 3}
VARIANTS = ("F16", "Q8_0", "Q4_0")


def copy_kv(w, key: str, f):
    """Writes metadata field f (a gguf.GGUFReader field) to writer w under key, with its
    own value type (arrays with their element type). Returns the value written."""
    from gguf import GGUFValueType as VT
    t0 = f.types[0]
    if t0 == VT.STRING:
        val = bytes(f.parts[f.data[0]])
    elif t0 == VT.ARRAY:
        sub = f.types[-1]
        if sub == VT.STRING:
            val = [bytes(f.parts[i]) for i in f.data]
        elif sub == VT.ARRAY:
            raise NotImplementedError(f"nested array in {key}")
        else:
            val = [f.parts[i].tolist()[0] for i in f.data]
        w.add_key_value(key, val, VT.ARRAY, sub_type=sub)
        return val
    else:
        val = f.parts[f.data[0]].tolist()[0]
    w.add_key_value(key, val, t0)
    return val


def variant_name(base: Path, vtype: str) -> str:
    stem = base.name
    for suf in (".Q4_1.gguf", ".gguf"):
        if stem.endswith(suf):
            stem = stem[: -len(suf)]
            break
    return f"{stem}.{vtype}.gguf"


def _quantizable(name: str, n_dims: int) -> bool:
    return n_dims >= 2 and name.endswith("weight") and "_norm.weight" not in name


def _llama_order(t):
    """llama.cpp's weight_name_comparer: (block index or -1, name) -- the order
    llama_model_quantize writes tensors in, so our files match its byte for byte."""
    m = re.match(r"blk\.(\d+)\.", t.name)
    return (int(m.group(1)) if m else -1, t.name.encode())


def convert(src: Path, dst: Path, vtype: str) -> Path:
    """Write `src` re-quantized to `vtype` (F16, Q8_0, Q4_0) at `dst`."""
    import gguf
    from gguf import GGMLQuantizationType as QT, GGUFValueType as VT

    qt = {"F16": QT.F16, "Q8_0": QT.Q8_0, "Q4_0": QT.Q4_0}[vtype]
    r = gguf.GGUFReader(src)
    arch = r.fields["general.architecture"].contents()
    dst.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=dst.name + ".", suffix=".tmp", dir=dst.parent)
    os.close(fd)
    w = gguf.GGUFWriter(tmp, arch)
    for key, f in r.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":  # writer adds arch first
            continue
        if key == "general.alignment":
            w.data_alignment = int(f.contents())
        if key in ("general.file_type", "general.quantization_version"):
            continue  # re-added at the end, as llama.cpp's gguf_set_val_u32 does
        copy_kv(w, key, f)
    qv = r.fields.get("general.quantization_version")
    w.add_key_value("general.quantization_version", 2 if qv is None else int(qv.contents()), VT.UINT32)
    w.add_key_value("general.file_type", FTYPES[vtype], VT.UINT32)
    for t in sorted(r.tensors, key=_llama_order):
        n_dims = len(t.shape)
        if _quantizable(t.name, n_dims) and t.tensor_type != qt:
            f32 = gguf.quants.dequantize(t.data, t.tensor_type)
            data = gguf.quants.quantize(f32, qt)
            if qt == QT.F16:
                w.add_tensor(t.name, data)
            else:
                w.add_tensor(t.name, data, raw_dtype=qt)
        else:
            w.add_tensor(t.name, np.array(t.data), raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.chmod(tmp, 0o644)
    os.replace(tmp, dst)
    return dst


def file_sha256_cached(path: Path) -> str:
    """sha256 of `path`, memoised in a sidecar keyed by size + mtime."""
    st = path.stat()
    side = path.with_name(path.name + ".sha256")
    key = f"{st.st_size}:{st.st_mtime_ns}"
    if side.is_file():
        parts = side.read_text().split()
        if len(parts) == 2 and parts[1] == key:
            return parts[0]
    h = fetch_assets.sha256_file(path)
    side.write_text(f"{h} {key}\n")
    return h


def build_all(base: Path | None = None, out_dir: Path | None = None) -> dict[str, Path]:
    """Return {"Q4_1": base, "F16": ..., "Q8_0": ..., "Q4_0": ...}, building missing files."""
    base = Path(base) if base else fetch_assets.starter_model()
    out_dir = Path(out_dir) if out_dir else fetch_assets.asset_dir() / "variants"
    out = {"Q4_1": base}
    with fetch_assets._lock("variants"):
        f16 = out_dir / variant_name(base, "F16")
        if not f16.is_file():
            convert(base, f16, "F16")
        out["F16"] = f16
        for v in ("Q8_0", "Q4_0"):
            p = out_dir / variant_name(base, v)
            if not p.is_file():
                convert(f16, p, v)
            out[v] = p
    return out


if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    for k, p in build_all(out_dir=a.out).items():
        print(f"{k:5s} {p}  sha256={file_sha256_cached(p)}")
