"""The Pythonic API over the native engine: Model, Context, Session and SamplingParams."""
from __future__ import annotations

import codecs
import ctypes
import json
import os
import random
import threading
import weakref
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from . import native
from .native import c_int32

if TYPE_CHECKING:
    import numpy as np  # imported where used: chatting needs no numpy (start-up time, memory)


_default_placement: list = ["auto", -1]


def set_default_placement(backend: str | None = None, gpu_layers: int | None = None) -> None:
    """Where models opened without backend=/gpu_layers= run (the CLI's --backend and
    --gpu-layers, the app's settings): "auto", "cpu", "cuda", "cuda:1"; -1 as many layers
    as fit, 0 none, N the last N (the output head counted as one)."""
    if backend is not None:
        _default_placement[0] = backend
    if gpu_layers is not None:
        _default_placement[1] = gpu_layers


@dataclass
class BackendDevice:
    """A row of backend_devices(): a usable device, or a backend that cannot run here."""
    backend: str        # "cpu", "cuda", "test": what Model(backend=...) takes
    label: str          # "CPU", "CUDA"
    device: int         # -1 for an unusable backend
    usable: bool
    score: int
    name: str           # "NVIDIA H200", the CPU's model name
    memory_total: int   # bytes (0: unknown)
    memory_free: int
    reason: str         # why it cannot be used ("" when it can)
    path: str           # its library ("" for the CPU)

    @property
    def selector(self) -> str:
        """The Model(backend=...) value that picks this device."""
        return self.backend if self.backend == "cpu" else f"{self.backend}:{self.device}"


def backend_devices() -> list[BackendDevice]:
    """The CPU and every GPU backend this install has, usable or with the reason why not."""
    lib = native.lib()
    rows = []
    for i in range(int(lib.ember_backend_device_count())):
        d = native.BackendDevice()
        _check(lib.ember_backend_device_get(i, ctypes.byref(d)))
        rows.append(BackendDevice(
            d.backend.decode(), d.label.decode(), int(d.device), bool(d.usable), int(d.score),
            d.name.decode("utf-8", "replace"), int(d.memory_total), int(d.memory_free),
            d.reason.decode("utf-8", "replace"), d.path.decode("utf-8", "replace")))
    return rows


def supported_isas() -> list[str]:
    """Instruction-set levels this CPU can run the kernels at (for tests and settings)."""
    lib = native.lib()
    return [name for name, v in native.ISA_LEVELS.items() if v >= 0 and lib.ember_isa_supported(v)]


def default_threads() -> int:
    """The threads a context uses when none are asked for (the engine's count of physical
    cores)."""
    import re
    m = re.search(r"threads=(\d+)", native.decode_str(native.lib().ember_system_info()))
    return int(m.group(1)) if m else (os.cpu_count() or 1)


def supported_architectures() -> dict[str, str]:
    """The model architectures the engine runs: GGUF ``general.architecture`` name ->
    the models users know it as (from the engine's architecture table)."""
    text = native.decode_str(native.lib().ember_architectures())
    return dict(line.split("\t", 1) for line in text.splitlines() if line)


class EmberError(Exception):
    """An error reported by the engine, with its status code and message."""

    def __init__(self, status: int, message: str):
        self.status = status
        self.message = message
        super().__init__(message or native.decode_str(native.lib().ember_status_name(status)))


class CancelledError(EmberError):
    """The operation was cancelled (load, prefill or generation)."""


class ContextFullError(EmberError):
    """The context window has no room for more tokens."""


class FileReadError(EmberError):
    """The file could not be opened or read."""


class ModelFormatError(EmberError):
    """The file is not a valid GGUF model (its header or tensor table is broken)."""


class UnsupportedModelError(EmberError):
    """A valid file the engine cannot run (architecture, tensor type, version)."""


class EngineMemoryError(EmberError):
    """Not enough memory (weights, KV cache or working buffers)."""


# one class per status, so callers (the app) tell failures apart without status codes
_ERRORS = {native.ERR_CANCELLED: CancelledError, native.ERR_CONTEXT_FULL: ContextFullError,
           native.ERR_IO: FileReadError, native.ERR_FORMAT: ModelFormatError,
           native.ERR_UNSUPPORTED: UnsupportedModelError,
           native.ERR_OUT_OF_MEMORY: EngineMemoryError}


def _check(status: int, message: bytes | None = None) -> None:
    if status == native.OK:
        return
    text = native.decode_str(message if message is not None else native.lib().ember_last_error())
    raise _ERRORS.get(status, EmberError)(status, text)


def system_info() -> str:
    """The engine's build and CPU description ("ISA=avx2 active=avx2 threads=8 ...")."""
    return native.decode_str(native.lib().ember_system_info())


_sampler_defaults: dict | None = None


def _sampler_default(name: str):
    """A SamplingParams field's default, read from the C library's own defaults (once), so
    the two never drift apart. float32 values come back as the decimals they were written as."""
    def read():
        global _sampler_defaults
        if _sampler_defaults is None:
            d = native.lib().ember_sampler_default_params()
            _sampler_defaults = {
                f: (float(f"{getattr(d, f):.7g}") if isinstance(getattr(d, f), float)
                    else int(getattr(d, f)))
                for f, _ in native.SamplerParams._fields_ if f != "seed"}
        return _sampler_defaults[name]
    return field(default_factory=read)


@dataclass
class SamplingParams:
    """Sampling settings; temperature 0 means greedy. seed None draws a random seed.
    Unset fields take the engine's defaults (ember_sampler_default_params)."""

    temperature: float = _sampler_default("temperature")
    top_k: int = _sampler_default("top_k")
    top_p: float = _sampler_default("top_p")
    min_p: float = _sampler_default("min_p")
    repeat_penalty: float = _sampler_default("repeat_penalty")
    presence_penalty: float = _sampler_default("presence_penalty")
    frequency_penalty: float = _sampler_default("frequency_penalty")
    penalty_last_n: int = _sampler_default("penalty_last_n")
    seed: int | None = None

    def to_native(self) -> native.SamplerParams:
        seed = self.seed if self.seed is not None else random.getrandbits(63)
        return native.SamplerParams(self.temperature, self.top_k, self.top_p, self.min_p,
                                    self.repeat_penalty, self.presence_penalty,
                                    self.frequency_penalty, self.penalty_last_n, seed)


@dataclass(frozen=True)
class TensorInfo:
    name: str
    type_name: str
    shape: tuple[int, ...]
    offset: int
    n_bytes: int


@dataclass
class GenerationStats:
    prompt_tokens: int = 0
    prompt_evaluated: int = 0  # prompt tokens decoded (the rest came from the KV cache)
    generated_tokens: int = 0
    prompt_seconds: float = 0.0
    generation_seconds: float = 0.0
    stop_reason: str = ""  # "eog", "length", "cancelled", "context_full", "stop_string"
    token_ids: list[int] = field(default_factory=list)  # generated, end-of-generation excluded
    stop_token: int | None = None  # the end-of-generation token, when one ended it


class Sampler:
    """A native sampler chain (penalties, top-k, top-p, min-p, temperature, seeded draw)."""

    def __init__(self, params: SamplingParams):
        handle = ctypes.c_void_p()
        p = params.to_native()
        _check(native.lib().ember_sampler_create(ctypes.byref(p), ctypes.byref(handle)))
        self._h = handle

    def accept(self, token: int) -> None:
        native.lib().ember_sampler_accept(self._h, token)

    def sample(self, logits_ptr, n_vocab: int) -> int:
        out = c_int32()
        _check(native.lib().ember_sampler_sample(self._h, logits_ptr, n_vocab, ctypes.byref(out)))
        return out.value

    def close(self) -> None:
        if self._h:
            native.lib().ember_sampler_free(self._h)
            self._h = None

    def __del__(self):
        self.close()


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


class DecodeGate:
    """Lets at most `width` decodes run at once, in the order they asked.

    Contexts on one model each have their own threads; when their decodes together would
    ask for more threads than the machine has, spin-waiting pools slow each other down, so
    a server hands decodes out in turns instead (FIFO, so no slot is starved)."""

    def __init__(self, width: int = 1):
        self._lock = threading.Lock()
        self._free = max(1, width)
        self._waiting: deque[threading.Event] = deque()

    def __enter__(self) -> DecodeGate:
        with self._lock:
            if self._free and not self._waiting:
                self._free -= 1
                return self
            turn = threading.Event()
            self._waiting.append(turn)
        turn.wait()
        return self

    def __exit__(self, *exc) -> None:
        with self._lock:
            if self._waiting:
                self._waiting.popleft().set()  # handed straight over: no barging
            else:
                self._free += 1


class Context:
    """A native context on a model: the KV cache, the compute threads, the tokens the
    cache holds and a cancel flag of its own. Several contexts share one model's weights.

    With a gate, each decode takes a turn at it, and a long prefill is cut into
    gate_chunk-token turns so other contexts' tokens go on in between."""

    def __init__(self, model: Model, n_ctx: int | None = None, n_threads: int | None = None,
                 n_batch: int | None = None, gate: DecodeGate | None = None,
                 gate_chunk: int = 64,
                 progress: Callable[[float], bool | None] | None = None):
        self.model = model
        self._lib = model._lib
        self.gate = gate
        self.gate_chunk = max(1, gate_chunk)
        self.cached: list[int] = []  # what the KV cache holds, in position order (see Session)
        self._cancel_flag = c_int32(0)
        self._lock = threading.RLock()  # one decode or generation at a time on this context
        params = native.ContextParams(
            model.n_ctx_requested if n_ctx is None else n_ctx,
            model.n_batch if n_batch is None else n_batch,
            model.n_threads if n_threads is None else n_threads, native.ISA_LEVELS[model.isa],
            model.backend.encode(), model.gpu_layers)
        if progress is not None:
            # the weights' copy to the device: fraction done; False cancels (CancelledError)
            def on_progress(fraction, _user):
                return progress(float(fraction)) is not False
            progress_cb = native.PROGRESS_FN(on_progress)  # alive until create returns
            params.progress = progress_cb
        handle = ctypes.c_void_p()
        status = self._lib.ember_context_create(model._model, ctypes.byref(params),
                                                ctypes.byref(handle))
        message = self._lib.ember_model_last_error(model._model)  # this thread's
        _check(status, message)
        self._ctx = handle
        self._lib.ember_context_set_cancel_flag(self._ctx, ctypes.byref(self._cancel_flag))
        model._contexts.add(self)

    def close(self) -> None:
        with self._lock:
            if self._ctx:
                self._lib.ember_context_free(self._ctx)
                self._ctx = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def _handle(self):
        if not self._ctx:
            raise EmberError(native.ERR_INVALID_ARGUMENT, "the context is closed")
        return self._ctx

    @property
    def n_ctx(self) -> int:
        return int(self._lib.ember_context_n_ctx(self._handle()))

    @property
    def n_past(self) -> int:
        return int(self._lib.ember_context_n_past(self._ctx)) if self._ctx else 0

    @property
    def backend(self) -> str:
        """Where this context runs: "CUDA: NVIDIA H200, 31/31 layers", "CPU (AVX2)"."""
        return native.decode_str(self._lib.ember_context_backend(self._handle()))

    @property
    def backend_note(self) -> str:
        """Why it does not run (all) on a device ("" when there is nothing to say)."""
        return native.decode_str(self._lib.ember_context_backend_note(self._handle()))

    @property
    def backend_name(self) -> str:
        """The backend holding its offloaded layers ("cpu" when none are)."""
        return native.decode_str(self._lib.ember_context_backend_name(self._handle()))

    @property
    def n_gpu_layers(self) -> int:
        """Layers on the device, the output head counted as one."""
        return int(self._lib.ember_context_n_gpu_layers(self._handle()))

    @property
    def rewind_limit(self) -> int:
        """The earliest position a decode may start at and keep the cache before it (models
        with sliding-window layers keep only the last window of positions in those)."""
        return int(self._lib.ember_context_rewind_limit(self._ctx)) if self._ctx else 0

    def set_profiling(self, on: bool) -> None:
        """Per-op timing of the decodes that follow (on resets the counts)."""
        self._lib.ember_context_set_profiling(self._handle(), on)

    def profile(self) -> list[tuple[str, int, float]]:
        """(kind of node, how many ran, seconds on the first thread) since set_profiling(True)."""
        text = native.decode_str(self._lib.ember_context_profile(self._handle()))
        rows = [line.split("\t") for line in text.splitlines() if line]
        return [(name, int(n), float(sec)) for name, n, sec in rows]

    def read_bandwidth(self, seconds: float = 0.25) -> tuple[float, int]:
        """(GB/s, bytes): how fast this context's threads read the weights a one-token decode
        reads, in its products' layout (fastest pass over about `seconds`), and the bytes of
        one pass. UnsupportedModelError when layers are offloaded to a device."""
        gbs, n = ctypes.c_double(0.0), ctypes.c_uint64(0)
        with self._lock:
            ctx = self._handle()
            _check(self._lib.ember_context_read_bandwidth(ctx, seconds, ctypes.byref(gbs), ctypes.byref(n)),
                   self._lib.ember_context_last_error(ctx))
        return gbs.value, n.value

    def cancel(self) -> None:
        """Asks a running decode/generation on this context to stop (safe from any thread)."""
        self._cancel_flag.value = 1

    @property
    def cancelled(self) -> bool:
        return bool(self._cancel_flag.value)

    def reset_cancel(self) -> None:
        self._cancel_flag.value = 0

    def _decode_native(self, ids: list[int], pos0: int, all_logits: bool) -> None:
        ctx = self._handle()
        arr = (c_int32 * len(ids))(*ids)
        _check(self._lib.ember_decode(ctx, arr, len(ids), pos0, all_logits),
               self._lib.ember_context_last_error(ctx))

    def decode(self, ids: list[int], pos0: int, all_logits: bool = False) -> None:
        """Evaluates ids at positions pos0..; the cache keeps positions < pos0."""
        with self._lock:
            if self.gate is None:
                self._decode_native(ids, pos0, all_logits)
                return
            step = max(len(ids), 1) if all_logits else self.gate_chunk
            for i in range(0, max(len(ids), 1), step):
                with self.gate:
                    if self._cancel_flag.value:  # cancelled while waiting for the turn
                        raise CancelledError(native.ERR_CANCELLED, "cancelled")
                    self._decode_native(ids[i:i + step], pos0 + i, all_logits)

    def logits(self, i: int = -1) -> np.ndarray:
        import numpy as np
        ptr = self._lib.ember_get_logits(self._handle(), i)
        if not ptr:
            raise EmberError(native.ERR_INVALID_ARGUMENT, f"no logits for index {i}")
        return np.ctypeslib.as_array(ptr, shape=(self.model.n_vocab,)).copy()

    def eval_logits(self, ids: list[int], first: int = 0) -> np.ndarray:
        """Teacher-forced logits from an empty cache: float32 [len(ids) - first, n_vocab],
        the rows of positions first.. (the tokens before are evaluated without logits)."""
        import numpy as np
        n_vocab = self.model.n_vocab
        first = max(0, min(first, len(ids)))
        if first == len(ids):
            return np.zeros((0, n_vocab), dtype=np.float32)
        with self._lock:
            self._cancel_flag.value = 0
            self.cached.clear()
            if first:
                self.decode(ids[:first], 0)
            self.decode(ids[first:], first, all_logits=True)
            self.cached[:] = ids
            ptr = self._lib.ember_get_logits(self._ctx, 0)
            return np.ctypeslib.as_array(ptr, shape=(len(ids) - first, n_vocab)).copy()

    def generate(self, prompt: str | list[int], max_tokens: int = 128,
                 params: SamplingParams | None = None, *, stats: GenerationStats | None = None,
                 reuse_prefix: bool = True) -> Iterator[str]:
        """Model.generate on this context."""
        yield from Session(self, reuse_prefix=reuse_prefix).generate(prompt, max_tokens, params,
                                                                     stats=stats)


class Session:
    """Generation over a context (a Model's default one, or a Context) that remembers which
    tokens are in the KV cache, so a following prompt that shares a prefix only evaluates
    what is new."""

    def __init__(self, target: Model | Context, reuse_prefix: bool = True):
        self.context = target.context if isinstance(target, Model) else target
        self.model = self.context.model
        self.reuse_prefix = reuse_prefix

    @property
    def cached(self) -> list[int]:
        """Tokens whose keys/values are in the context's KV cache, in position order."""
        return self.context.cached

    def _prefill(self, ids: list[int]) -> int:
        """Evaluates ids, reusing the cached common prefix; returns tokens evaluated."""
        ctx = self.context
        cached = self.cached
        common = 0
        if self.reuse_prefix:
            limit = min(len(cached), len(ids) - 1)  # always evaluate at least the last token
            while common < limit and cached[common] == ids[common]:
                common += 1
            if common < ctx.rewind_limit:
                common = 0  # the sliding-window layers no longer hold what precedes it
        del cached[common:]
        try:
            ctx.decode(ids[common:], common)
        finally:
            cached[:] = ids[: ctx.n_past]
        return len(ids) - common

    def generate(self, prompt: str | list[int], max_tokens: int = 128,
                 params: SamplingParams | None = None, *,
                 stats: GenerationStats | None = None,
                 cancel: threading.Event | None = None,
                 penalize_prompt: bool = True,
                 on_token: Callable[[int, np.ndarray], None] | None = None) -> Iterator[str]:
        """Yields text pieces. cancel: an event another thread may set before generation
        starts (set later, Context.cancel() is what stops it); the context's flag is reset
        here, so a cancel that came earlier would otherwise be lost. penalize_prompt: the
        prompt's tokens count in the penalties' history (llama.cpp's way); without it only
        generated tokens do (OpenAI's presence and frequency penalties). on_token: called
        with each generated token (end-of-generation excluded) and a copy of the model's
        logits it was drawn from, before its text is yielded (the server's logprobs)."""
        import time

        ctx = self.context
        m = self.model
        params = params or SamplingParams()
        ids = m.prompt_ids(prompt) if isinstance(prompt, str) else list(prompt)
        if not ids:
            raise EmberError(native.ERR_INVALID_ARGUMENT, "the prompt is empty")
        stats = stats if stats is not None else GenerationStats()
        stats.prompt_tokens = len(ids)
        sampler = Sampler(params)
        for t in ids if penalize_prompt else ():
            sampler.accept(t)
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        n_vocab = m.n_vocab
        ctx.reset_cancel()
        if cancel is not None and cancel.is_set():
            ctx.cancel()
        with ctx._lock:
            t0 = time.perf_counter()
            try:
                stats.prompt_evaluated = self._prefill(ids)
            except CancelledError:
                stats.stop_reason = "cancelled"
                return
            stats.prompt_seconds = time.perf_counter() - t0
            t1 = time.perf_counter()
            try:
                for _ in range(max_tokens):
                    if ctx.cancelled:
                        stats.stop_reason = "cancelled"
                        break
                    ptr = ctx._lib.ember_get_logits(ctx._ctx, -1)
                    if on_token is not None:  # the sampler may change the row in place
                        import numpy as np
                        row = np.ctypeslib.as_array(ptr, shape=(n_vocab,)).copy()
                    token = sampler.sample(ptr, n_vocab)
                    if m.is_eog(token):
                        stats.stop_reason = "eog"
                        stats.stop_token = token
                        break
                    sampler.accept(token)
                    if on_token is not None:
                        on_token(token, row)
                    stats.token_ids.append(token)
                    stats.generated_tokens += 1
                    text = decoder.decode(m.token_to_piece(token))
                    if text:
                        yield text
                    if len(stats.token_ids) == max_tokens:
                        stats.stop_reason = "length"
                        break
                    pos = ctx.n_past
                    if pos >= ctx.n_ctx:
                        stats.stop_reason = "context_full"
                        break
                    try:
                        ctx.decode([token], pos)
                    except CancelledError:
                        stats.stop_reason = "cancelled"
                        break
                    self.cached.append(token)
                else:
                    stats.stop_reason = "length"
                # bytes still held are the start of a character the reply was cut inside
                # (max_tokens, a stop): dropped, as "\ufffd" would show a character never
                # written; invalid bytes met earlier were already replaced
                decoder.reset()
            finally:
                stats.generation_seconds = time.perf_counter() - t1
                sampler.close()


# ---- element types (reference kernels; used by tests and tools) -----------------------

def type_name(type_id: int) -> str | None:
    name = native.lib().ember_type_name(type_id)
    return name.decode() if name else None


def dequantize(type_id: int, data: bytes | np.ndarray, n: int) -> np.ndarray:
    """n float32 values from the raw blocks of a GGUF element type."""
    import numpy as np
    src = np.frombuffer(data, dtype=np.uint8) if isinstance(data, bytes) else \
        np.ascontiguousarray(data).view(np.uint8)
    lib = native.lib()
    bs, bb = lib.ember_type_block_size(type_id), lib.ember_type_block_bytes(type_id)
    if bs == 0 or n % bs or src.size < n // bs * bb:
        raise ValueError(f"{n} elements do not fit type {type_id} in {src.size} bytes")
    out = np.empty(n, dtype=np.float32)
    _check(lib.ember_dequantize(type_id, src.ctypes.data, out.ctypes.data_as(
        ctypes.POINTER(ctypes.c_float)), n))
    return out


def quantize(type_id: int, values: np.ndarray) -> bytes:
    """Reference quantization of float32 values to a GGUF element type's blocks."""
    import numpy as np
    x = np.ascontiguousarray(values, dtype=np.float32).ravel()
    lib = native.lib()
    bs, bb = lib.ember_type_block_size(type_id), lib.ember_type_block_bytes(type_id)
    if bs == 0 or x.size % bs:
        raise ValueError(f"{x.size} elements are not whole blocks of type {type_id}")
    out = np.empty(x.size // bs * bb, dtype=np.uint8)
    _check(lib.ember_quantize(type_id, x.ctypes.data_as(ctypes.POINTER(ctypes.c_float)),
                              out.ctypes.data, x.size))
    return out.tobytes()


def type_block(type_id: int) -> tuple[int, int]:
    """(elements per block, bytes per block) of a GGUF element type; (0, 0) if unknown."""
    lib = native.lib()
    return int(lib.ember_type_block_size(type_id)), int(lib.ember_type_block_bytes(type_id))


def quantize_into(type_id: int, values: np.ndarray, out: np.ndarray) -> None:
    """Reference quantization of contiguous float32 values into out's bytes (no copy). The
    native call releases the GIL, so threads can quantize separate slices at once."""
    lib = native.lib()
    bs, bb = lib.ember_type_block_size(type_id), lib.ember_type_block_bytes(type_id)
    if values.dtype.name != "float32" or not values.flags.c_contiguous or not out.flags.c_contiguous:
        raise ValueError("quantize_into needs contiguous float32 input and a contiguous output")
    if bs == 0 or values.size % bs or out.nbytes < values.size // bs * bb:
        raise ValueError(f"{values.size} elements do not fit type {type_id} in {out.nbytes} bytes")
    _check(lib.ember_quantize(type_id, values.ctypes.data_as(ctypes.POINTER(ctypes.c_float)),
                              out.ctypes.data, values.size))
