"""Context: a KV cache and its threads on a model's weights; DecodeGate, which shares the
machine's cores between a model's contexts."""
from __future__ import annotations

import ctypes
import threading
from collections import deque
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from . import native
from .errors import CancelledError, EmberError, _check
from .native import c_int32
from .sampling import GenerationStats, SamplingParams
from .session import Session

if TYPE_CHECKING:
    import numpy as np  # imported where used: chatting needs no numpy (start-up time, memory)

    from .model import Model


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

    def restart_point(self, pos: int) -> int:
        """The latest position at or before pos a decode may start at and keep what precedes
        it: pos itself with plain attention caches, else rewind_limit's rule (sliding-window
        layers) or a recurrent-state snapshot's position (Qwen3.5), 0 at worst."""
        return int(self._lib.ember_context_restart_point(self._ctx, int(pos))) if self._ctx else 0

    @property
    def n_snapshots(self) -> int:
        """Recurrent-state snapshots held now (0 for models without recurrent layers)."""
        return int(self._lib.ember_context_n_snapshots(self._ctx)) if self._ctx else 0

    @property
    def state_bytes(self) -> int:
        """Bytes of one copy of the recurrent layers' state (0 without them)."""
        return int(self._lib.ember_context_state_bytes(self._ctx)) if self._ctx else 0

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
