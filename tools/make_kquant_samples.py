#!/usr/bin/env python3
"""Make tests/golden/kquant_samples.npz: raw K-quant, IQ4_NL, IQ4_XS and MXFP4 blocks made
by llama.cpp's own quantizer from real weights (gguf-py can dequantize them but makes none
but MXFP4).

Dev-only, needs llama.cpp built as a shared library and the llama_cpp Python package
of the llama-cpp-python 0.3.36 sdist (see tests/golden/README.md), e.g.:

    LLAMA_CPP_LIB_PATH=/path/to/llama.cpp/build/bin \\
    PYTHONPATH=/path/to/llama_cpp_python-0.3.36 python tools/make_kquant_samples.py

It quantizes the F16 variant of the starter model (tools/make_variants.py) to each
type with params.pure (MXFP4 through its file type MXFP4_MOE), then keeps the first rows
of two tensors per type.
"""
from __future__ import annotations

import ctypes
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# llama_ftype values of llama.cpp
FTYPES = {"Q2_K": 10, "Q3_K": 12, "Q4_K": 15, "Q5_K": 17, "Q6_K": 18, "IQ4_NL": 25, "IQ4_XS": 30,
          "MXFP4": 38}
TENSORS = ["blk.2.ffn_down.weight", "blk.9.ffn_down.weight"]  # 1536 columns: K-quant rows need 256 | ncols
ROWS = 48


def main() -> None:
    import llama_cpp
    from gguf import GGMLQuantizationType, GGUFReader

    from tools import fetch_assets, make_variants

    f16 = make_variants.build_all(fetch_assets.starter_model())["F16"]
    out: dict[str, np.ndarray] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, ftype in FTYPES.items():
            dst = Path(tmp) / f"{name}.gguf"
            params = llama_cpp.llama_model_quantize_default_params()
            params.ftype = ftype
            params.pure = True
            params.allow_requantize = True
            params.nthread = 2
            rc = llama_cpp.llama_model_quantize(str(f16).encode(), str(dst).encode(),
                                                ctypes.byref(params))
            assert rc == 0, f"quantize to {name} failed"
            reader = GGUFReader(dst)
            raws = []
            for t in reader.tensors:
                if t.name in TENSORS:
                    assert t.tensor_type == GGMLQuantizationType[name], (t.name, t.tensor_type)
                    raws.append(np.ascontiguousarray(np.asarray(t.data)[:ROWS]))
            raw = np.concatenate(raws)
            from gguf import GGML_QUANT_SIZES
            block_size, block_bytes = GGML_QUANT_SIZES[GGMLQuantizationType[name]]
            n_elems = raw.size // block_bytes * block_size
            out[f"{name}/raw"] = raw
            out[f"{name}/n"] = np.array(n_elems)
            print(f"{name}: {raw.nbytes} bytes, {n_elems} elements")
    dst = ROOT / "tests" / "golden" / "kquant_samples.npz"
    dst.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(dst, **out)
    print(f"wrote {dst}")


if __name__ == "__main__":
    main()
