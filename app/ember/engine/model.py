"""Model: a GGUF file opened through the engine (metadata, tokenizer, weights, contexts)."""
from __future__ import annotations

import ctypes
import json
import os
import threading
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from . import native
from .context import Context, DecodeGate
from .errors import _check
from .native import c_int32
from .sampling import GenerationStats, SamplingParams
from .session import Session
from .system import _default_placement

if TYPE_CHECKING:
    import numpy as np  # imported where used: chatting needs no numpy (start-up time, memory)


@dataclass(frozen=True)
class TensorInfo:
    name: str
    type_name: str
    shape: tuple[int, ...]
    offset: int
    n_bytes: int


class Model:
    """A GGUF model loaded through Ember's engine.

    The context (KV cache) is created on first use with n_ctx tokens;
    vocab_only/metadata_only open just the tokenizer or just the header.
    """

    def __init__(self, path: str | os.PathLike, n_ctx: int | None = None,
                 n_threads: int | None = None, n_batch: int = 512, *,
                 vocab_only: bool = False, metadata_only: bool = False, isa: str = "auto",
                 progress: Callable[[float], bool | None] | None = None,
                 cancel: threading.Event | None = None, backend: str | None = None,
                 gpu_layers: int | None = None):
        self.path = Path(path)
        # where its contexts run: "auto", "cpu", "cuda", "cuda:1", ...; layers on the device
        # (-1: as many as fit); None: the process default (set_default_placement)
        self.backend = backend or _default_placement[0]
        self.gpu_layers = _default_placement[1] if gpu_layers is None else gpu_layers
        self.n_ctx_requested = n_ctx or 0
        self.n_threads = n_threads or 0
        self.n_batch = n_batch
        if isa not in native.ISA_LEVELS:
            raise ValueError(f"isa must be one of {', '.join(native.ISA_LEVELS)}")
        self.isa = isa
        self._lib = native.lib()
        self._model = None
        self._default: Context | None = None
        self._contexts: weakref.WeakSet[Context] = weakref.WeakSet()
        self._metadata: dict | None = None
        self._lock = threading.RLock()

        params = self._lib.ember_model_default_params()
        params.vocab_only = vocab_only
        params.metadata_only = metadata_only
        load_cancel = c_int32(0)
        params.cancel = ctypes.pointer(load_cancel)
        if progress is not None or cancel is not None:
            def on_progress(fraction, _user):
                if cancel is not None and cancel.is_set():
                    return False
                if progress is not None:
                    return progress(float(fraction)) is not False
                return True
            self._progress_cb = native.PROGRESS_FN(on_progress)  # kept alive while loading
            params.progress = self._progress_cb
        handle = ctypes.c_void_p()
        status = self._lib.ember_model_load(os.fsencode(self.path), ctypes.byref(params),
                                            ctypes.byref(handle))
        _check(status)
        self._model = handle

    # ---- lifetime ------------------------------------------------------------
    def close(self) -> None:
        """Frees the model and every context still open on it (they cannot outlive it)."""
        with self._lock:
            for ctx in list(self._contexts):
                ctx.close()
            self._default = None
            if self._model:
                self._lib.ember_model_free(self._model)
                self._model = None

    def __enter__(self) -> Model:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    # ---- description -----------------------------------------------------------
    @property
    def arch(self) -> str:
        return native.decode_str(self._lib.ember_model_arch(self._model))

    @property
    def ftype(self) -> str:
        return native.decode_str(self._lib.ember_model_ftype_name(self._model))

    @property
    def n_params(self) -> int:
        return int(self._lib.ember_model_n_params(self._model))

    @property
    def n_vocab(self) -> int:
        return int(self._lib.ember_model_n_vocab(self._model))

    @property
    def n_ctx_train(self) -> int:
        return int(self._lib.ember_model_n_ctx_train(self._model))

    @property
    def n_embd(self) -> int:
        return int(self._lib.ember_model_n_embd(self._model))

    @property
    def n_layer(self) -> int:
        return int(self._lib.ember_model_n_layer(self._model))

    @property
    def file_size(self) -> int:
        return int(self._lib.ember_model_file_size(self._model))

    @property
    def gguf_version(self) -> int:
        return int(self._lib.ember_model_gguf_version(self._model))

    def layout_progress(self, wait: bool = False) -> float:
        """How much of the background copy of the weights into the kernels' layout is done
        (1.0 when finished or when none is made); wait: return once it is finished."""
        return float(self._lib.ember_model_layout_progress(self._model, bool(wait)))

    @property
    def metadata(self) -> dict:
        """Every GGUF key and its value (arrays as lists), in file order."""
        if self._metadata is None:
            out = {}
            key, vtype, value = ctypes.c_char_p(), c_int32(), ctypes.c_char_p()
            for i in range(self._lib.ember_model_meta_count(self._model)):
                _check(self._lib.ember_model_meta_get(self._model, i, ctypes.byref(key),
                                                      ctypes.byref(vtype), ctypes.byref(value)))
                out[native.decode_str(key.value)] = json.loads(native.decode_str(value.value))
            self._metadata = out
        return self._metadata

    def tensors(self) -> list[TensorInfo]:
        info = native.TensorInfo()
        out = []
        for i in range(self._lib.ember_model_tensor_count(self._model)):
            _check(self._lib.ember_model_tensor_get(self._model, i, ctypes.byref(info)))
            out.append(TensorInfo(native.decode_str(info.name), native.decode_str(info.type_name),
                                  tuple(info.ne[: info.n_dims]), info.offset, info.n_bytes))
        return out

    def dequantize_tensor(self, name: str) -> np.ndarray:
        """A weight as float32, shaped like numpy/gguf-py (slowest dimension first)."""
        import numpy as np
        t = next((t for t in self.tensors() if t.name == name), None)
        if t is None:
            raise KeyError(name)
        out = np.empty(tuple(reversed(t.shape)), dtype=np.float32)
        _check(self._lib.ember_model_tensor_dequantize(
            self._model, name.encode(), out.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), out.size))
        return out

    # ---- vocabulary ------------------------------------------------------------
    @property
    def bos_id(self) -> int:
        return int(self._lib.ember_token_bos(self._model))

    @property
    def add_bos(self) -> bool:
        """Whether tokenize(add_special=True) puts BOS first (the vocab's setting)."""
        return bool(self._lib.ember_vocab_add_bos(self._model))

    @property
    def add_eos(self) -> bool:
        """Whether tokenize(add_special=True) puts EOS last (BERT's [SEP])."""
        return bool(self._lib.ember_vocab_add_eos(self._model))

    @property
    def eos_id(self) -> int:
        return int(self._lib.ember_token_eos(self._model))

    @property
    def eot_id(self) -> int:
        return int(self._lib.ember_token_eot(self._model))

    def is_eog(self, token: int) -> bool:
        return bool(self._lib.ember_token_is_eog(self._model, token))

    def token_text(self, token: int) -> str:
        return native.decode_str(self._lib.ember_token_text(self._model, token))

    def tokenize(self, text: str, add_special: bool = True, parse_special: bool = False) -> list[int]:
        data = text.encode("utf-8")
        cap = len(data) + 16
        buf = (c_int32 * cap)()
        n = c_int32()
        # No lock: the model's last-error strings are per thread (test_api_threads), so
        # slots on several threads tokenize at once.
        status = self._lib.ember_tokenize(self._model, data, len(data), add_special,
                                          parse_special, buf, cap, ctypes.byref(n))
        if status == native.ERR_BUFFER_TOO_SMALL:
            cap = n.value
            buf = (c_int32 * cap)()
            status = self._lib.ember_tokenize(self._model, data, len(data), add_special,
                                              parse_special, buf, cap, ctypes.byref(n))
        message = self._lib.ember_last_error() if status else None
        _check(status, message)
        return list(buf[: n.value])

    def _bytes_call(self, fn, *args) -> bytes:
        cap = 256
        while True:
            buf = ctypes.create_string_buffer(cap)
            n = c_int32()
            status = fn(self._model, *args, buf, cap, ctypes.byref(n))
            message = self._lib.ember_last_error() if status else None
            if status == native.ERR_BUFFER_TOO_SMALL:
                cap = n.value
                continue
            _check(status, message)
            return buf.raw[: n.value]

    def token_to_piece(self, token: int, special: bool = False) -> bytes:
        """The raw bytes of one token (may be part of a UTF-8 character)."""
        return self._bytes_call(self._lib.ember_token_to_piece, token, special)

    def detokenize(self, ids: list[int], remove_special: bool = False,
                   unparse_special: bool = False) -> str:
        arr = (c_int32 * len(ids))(*ids)
        data = self._bytes_call(self._lib.ember_detokenize, arr, len(ids), remove_special,
                                unparse_special)
        return data.decode("utf-8", errors="replace")

    # ---- evaluation (delegated to the default Context) ----------------------------
    @property
    def context(self) -> Context:
        """The context Model.decode/generate/... use, created on first use with the
        model's n_ctx, n_batch, n_threads and isa."""
        with self._lock:
            if self._default is None:
                self._default = Context(self)
            return self._default

    def new_context(self, n_ctx: int | None = None, n_threads: int | None = None,
                    n_batch: int | None = None, gate: DecodeGate | None = None,
                    progress: Callable[[float], bool | None] | None = None) -> Context:
        """Another context on this model's weights (its own KV cache, cancel flag and
        threads): several contexts can decode at once from different threads. progress
        hears how far the copy of the offloaded weights to the GPU is (not called when
        everything runs on the CPU); returning False cancels."""
        return Context(self, n_ctx=n_ctx, n_threads=n_threads, n_batch=n_batch, gate=gate,
                       progress=progress)

    def prompt_ids(self, prompt: str, parse_special: bool = True) -> list[int]:
        """Token ids of a prompt text, the one rule every caller uses (the chat's fitting
        counts these ids and feeds them; generate() applies it to a text prompt): BOS is
        added unless the text (a rendered chat template) starts with it already, and
        special-token text is parsed unless parse_special is off (raw text, where a
        user's "<|im_end|>" is plain characters)."""
        bos = self.bos_id
        has_bos = bos >= 0 and bool(self.token_text(bos)) and prompt.startswith(self.token_text(bos))
        return self.tokenize(prompt, add_special=not has_bos, parse_special=parse_special)

    @property
    def n_ctx(self) -> int:
        return self.context.n_ctx

    @property
    def n_past(self) -> int:
        return self._default.n_past if self._default else 0

    @property
    def rewind_limit(self) -> int:
        return self._default.rewind_limit if self._default else 0

    def set_profiling(self, on: bool) -> None:
        self.context.set_profiling(on)

    def profile(self) -> list[tuple[str, int, float]]:
        return self.context.profile()

    def decode(self, ids: list[int], pos0: int, all_logits: bool = False) -> None:
        self.context.decode(ids, pos0, all_logits)

    def read_bandwidth(self, seconds: float = 0.25) -> tuple[float, int]:
        return self.context.read_bandwidth(seconds)

    def logits(self, i: int = -1) -> np.ndarray:
        return self.context.logits(i)

    def eval_logits(self, ids: list[int], first: int = 0) -> np.ndarray:
        return self.context.eval_logits(ids, first)

    def cancel(self) -> None:
        """Asks a running decode/generation on the default context to stop (any thread)."""
        if self._default is not None:
            self._default.cancel()

    def generate(self, prompt: str | list[int], max_tokens: int = 128,
                 params: SamplingParams | None = None, *, stats: GenerationStats | None = None,
                 reuse_prefix: bool = True) -> Iterator[str]:
        """Yields text pieces as they are generated; stops at end-of-generation tokens,
        max_tokens, a full context, or cancel()."""
        session = Session(self, reuse_prefix=reuse_prefix)
        yield from session.generate(prompt, max_tokens, params, stats=stats)
