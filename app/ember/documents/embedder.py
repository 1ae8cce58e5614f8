"""What the library needs from an embedding model, so the engine's `bert` family can take
the numpy encoder's place without the library changing."""
from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Embedder(Protocol):
    name: str   # names the vector space: vectors of another name are embedded again
    dim: int

    def embed(self, texts: list[str]) -> np.ndarray:
        """[len(texts), dim] float32, each row of unit length."""
        ...


def default_embedder(model_path=None) -> Embedder:
    """The numpy MiniLM on a converted GGUF file (the library's model until the engine
    runs `bert`)."""
    from .minilm import MiniLMEmbedder

    if model_path is None:
        from ..storage.paths import models_dir
        model_path = models_dir() / "all-MiniLM-L6-v2.F16.gguf"
    return MiniLMEmbedder.from_gguf(model_path)
