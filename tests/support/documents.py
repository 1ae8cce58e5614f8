"""A fast deterministic embedder, so the library's tests need no model, and the document
makers (tools/make_documents.py)."""
from __future__ import annotations

import hashlib
import re

import numpy as np

from tools.make_documents import make_docx, make_pdf  # noqa: F401 (re-exported)


class HashEmbedder:
    """Bag of words hashed into `dim` buckets, L2-normalised: texts sharing words are near."""

    def __init__(self, dim: int = 64, name: str = "hash-64", on_batch=None):
        self.dim, self.name, self.on_batch = dim, name, on_batch
        self.calls = 0

    def embed(self, texts):
        self.calls += 1
        if self.on_batch is not None:
            self.on_batch(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, t in enumerate(texts):
            for w in re.findall(r"\w+", t.lower()):
                h = int.from_bytes(hashlib.blake2b(w.encode(), digest_size=4).digest(), "little")
                out[row, h % self.dim] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(norms, 1e-12)
