"""Embedder: sentence vectors from an encoder model (the engine's bert family): texts or
token sequences in, one vector of n_embd floats per sequence out."""
from __future__ import annotations

import ctypes
import threading
from typing import TYPE_CHECKING

from . import native
from .errors import _check
from .native import c_int32

if TYPE_CHECKING:
    import numpy as np

    from .model import Model

POOLINGS = {"mean": 1, "cls": 2, "last": 3}


class Embedder:
    """The engine's embedding context on a model (its own threads; no KV cache).

    pooling: "mean", "cls" or "last"; None: the file's (pooling_type). A text-generation
    model is refused (UnsupportedModelError): Ember embeds with encoder models only."""

    def __init__(self, model: Model, n_threads: int | None = None, n_batch: int = 0,
                 pooling: str | None = None, isa: str | None = None):
        if pooling is not None and pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {', '.join(POOLINGS)}")
        self.model = model
        self._lib = native.lib()
        self._handle = None
        self._lock = threading.Lock()  # one thread at a time per embedder (ember.h)
        self._cancel = c_int32(0)
        params = self._lib.ember_embedder_default_params()
        params.n_threads = n_threads or model.n_threads or 0
        params.n_batch = n_batch
        params.isa = native.ISA_LEVELS[isa or model.isa]
        params.pooling = POOLINGS[pooling] if pooling else -1
        handle = ctypes.c_void_p()
        status = self._lib.ember_embedder_create(model._model, ctypes.byref(params), ctypes.byref(handle))
        _check(status, self._lib.ember_model_last_error(model._model) if status else None)
        self._handle = handle
        self._lib.ember_embedder_set_cancel_flag(handle, ctypes.pointer(self._cancel))
        self.n_embd = int(self._lib.ember_embedder_n_embd(handle))
        self.n_seq_max = int(self._lib.ember_embedder_n_seq_max(handle))
        self.pooling = native.POOLING_NAMES.get(int(self._lib.ember_embedder_pooling(handle)), "?")

    # ---- lifetime ------------------------------------------------------------
    def close(self) -> None:
        with self._lock:
            if self._handle:
                self._lib.ember_embedder_free(self._handle)
                self._handle = None

    def __enter__(self) -> Embedder:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def cancel(self) -> None:
        """Asks a running embed() to stop (any thread): it raises CancelledError."""
        self._cancel.value = 1

    # ---- tokens --------------------------------------------------------------
    def tokenize(self, text: str, max_tokens: int | None = None) -> list[int]:
        """[CLS] pieces [SEP] (the file's special tokens); with max_tokens, the pieces cut so
        the whole fits, the closing token kept (as sentence-transformers truncates)."""
        ids = self.model.tokenize(text, add_special=True)
        if max_tokens is not None and len(ids) > max_tokens:
            closing = [ids[-1]] if self.model.eos_id >= 0 and ids[-1] == self.model.eos_id else []
            ids = ids[:max_tokens - len(closing)] + closing
        return ids

    # ---- vectors ---------------------------------------------------------------
    def embed_tokens(self, sequences: list[list[int]], normalize: bool = True) -> np.ndarray:
        """[len(sequences), n_embd] float32: one vector per token sequence (unit length when
        normalize). A sequence longer than n_seq_max raises ContextFullError, an empty one or
        a bad id EmberError; nothing is computed then."""
        import numpy as np

        out = np.zeros((len(sequences), self.n_embd), dtype=np.float32)
        if not sequences:
            return out
        lens = [len(s) for s in sequences]
        flat = [t for s in sequences for t in s]
        tokens = (c_int32 * max(1, len(flat)))(*flat)
        seq_lens = (c_int32 * len(lens))(*lens)
        with self._lock:
            if not self._handle:
                raise ValueError("the embedder is closed")
            self._cancel.value = 0
            status = self._lib.ember_embed(self._handle, tokens, seq_lens, len(lens), bool(normalize),
                                           out.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), out.size)
            _check(status, self._lib.ember_embedder_last_error(self._handle) if status else None)
        return out

    def embed(self, texts: list[str], normalize: bool = True, max_tokens: int | None = None) -> np.ndarray:
        """[len(texts), n_embd] float32 vectors of texts; max_tokens cuts longer texts (None:
        a text past n_seq_max tokens raises ContextFullError)."""
        return self.embed_tokens([self.tokenize(t, max_tokens) for t in texts], normalize)


def is_embedding_model(model: Model) -> bool:
    """Whether the engine makes embeddings with this model (an encoder, not a chat model)."""
    return int(native.lib().ember_model_pooling(model._model)) >= 0


__all__ = ["POOLINGS", "Embedder", "is_embedding_model"]
