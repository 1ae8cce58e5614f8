"""Sampling settings, the native sampler chain, and the counts a generation reports."""
from __future__ import annotations

import ctypes
import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from . import native
from .errors import _check
from .native import c_int32

if TYPE_CHECKING:
    pass  # imported where used: chatting needs no numpy (start-up time, memory)


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
    stop_string: str | None = None  # the stop string that ended it (chat.stream_reply's)
    # speculative decoding (engine/speculative.py): tokens drafted and verified, those the
    # target accepted, and how drafts were made or why there were none ("" without it)
    draft_tokens: int = 0
    draft_accepted: int = 0
    speculative: str = ""

    @property
    def acceptance_rate(self) -> float:
        """Accepted drafted tokens over drafted ones (0 with none drafted)."""
        return self.draft_accepted / self.draft_tokens if self.draft_tokens else 0.0


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

    def distribution(self, logits_ptr, n_vocab: int):
        """(ids, probs): the distribution sample() would draw from for this row (penalties
        over the accepted history, top-k, top-p, min-p, temperature; greedy: the first
        maximum with probability 1), read without drawing. Fresh int32 / float32 arrays."""
        import numpy as np
        if getattr(self, "_ids", None) is None or self._ids.size < n_vocab:
            self._ids = np.empty(n_vocab, dtype=np.int32)
            self._probs = np.empty(n_vocab, dtype=np.float32)
        n = c_int32()
        _check(native.lib().ember_sampler_distribution(
            self._h, logits_ptr, n_vocab, self._ids.ctypes.data_as(ctypes.POINTER(c_int32)),
            self._probs.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), n_vocab, ctypes.byref(n)))
        k = min(n.value, n_vocab)
        return self._ids[:k].copy(), self._probs[:k].copy()

    @staticmethod
    def row_pointer(row):
        """A float32 numpy row as the logits pointer sample() takes (the row must live
        as long as the pointer is used)."""
        return row.ctypes.data_as(ctypes.POINTER(ctypes.c_float))

    def close(self) -> None:
        if self._h:
            native.lib().ember_sampler_free(self._h)
            self._h = None

    def __del__(self):
        self.close()
