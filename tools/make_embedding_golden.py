"""Makes tests/golden/embeddings_minilm.npz: llama.cpp's sentence vectors of all-MiniLM-L6-v2 as
tools/convert_minilm.py converts it (F32 and F16), for tests/engine/test_bert.py.

llama.cpp is a dev-only yardstick (the llama-cpp-python 0.3.36 sdist's vendored tree, built
as tests/golden/README.md says); the fixture is committed and the tests only read it. Per
file and pooling (the file's mean, and CLS) it records every text's token ids as llama.cpp
tokenizes them (add_special) and its L2-normalised embedding, with the converted file's
sha256 so a test can tell a stale fixture from a wrong engine.

    export LLAMA_CPP_LIB_PATH=.../llama_cpp_python-0.3.36/build/bin
    export PYTHONPATH=.../llama_cpp_python-0.3.36
    python tools/make_embedding_golden.py
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
import types
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

OUT = ROOT / "tests" / "golden" / "embeddings_minilm.npz"

# short and long, plain and hard (accents, CJK, punctuation), and one near the position
# table's end (512), where a wrong position row would show
TEXTS = [
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The girl is carrying a baby.",
    "A man is riding a horse.",
    "Two men pushed carts through the woods.",
    "Héllo wörld! It's 3.14 — naïve café, 東京 $100 U.S.A. e-mail: foo@bar.com",
    "The tenant may keep one cat or one small dog, with the landlord's written consent. " * 6,
    " ".join(f"word{i % 37} and more" for i in range(125)),
]
POOLINGS = {"mean": 1, "cls": 2}  # llama.cpp's LLAMA_POOLING_TYPE_*


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-o", "--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    # llama_cpp imports diskcache for a cache class this script does not use
    sys.modules.setdefault("diskcache", types.ModuleType("diskcache"))
    import llama_cpp

    from tools import fetch_assets
    from tools.convert_minilm import convert

    arrays: dict[str, np.ndarray] = {}
    meta = {"llama_cpp_python": llama_cpp.__version__, "texts": TEXTS, "files": {},
            "settings": "Llama(path, embedding=True, n_ctx=512, n_batch=512, n_ubatch=512, "
                        "n_threads=2, pooling_type=P); tokenize(add_bos=True, special=False); "
                        "embed(normalize=True)"}
    with tempfile.TemporaryDirectory() as tmp:
        for outtype in ("f32", "f16"):
            path = convert(fetch_assets.minilm_dir(), Path(tmp) / f"minilm.{outtype}.gguf", outtype)
            meta["files"][outtype] = {"sha256": sha256(path), "size": path.stat().st_size}
            for pooling, code in POOLINGS.items():
                llm = llama_cpp.Llama(str(path), embedding=True, n_ctx=512, n_batch=512, n_ubatch=512,
                                      n_threads=2, pooling_type=code, verbose=False)
                ids = [llm.tokenize(t.encode("utf-8"), add_bos=True, special=False) for t in TEXTS]
                vecs = np.asarray(llm.embed(TEXTS, normalize=True), dtype=np.float32)
                assert vecs.shape == (len(TEXTS), 384), vecs.shape
                key = f"{outtype}_{pooling}"
                arrays[f"{key}_vectors"] = vecs
                if pooling == "mean":
                    lens = np.array([len(x) for x in ids], dtype=np.int32)
                    arrays[f"{outtype}_lens"] = lens
                    arrays[f"{outtype}_tokens"] = np.concatenate([np.asarray(x, np.int32) for x in ids])
                llm.close()
    arrays["meta"] = np.frombuffer(json.dumps(meta, ensure_ascii=False).encode("utf-8"), dtype=np.uint8)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(args.out, **arrays)
    print(f"{args.out}: {', '.join(sorted(arrays))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
