"""The engine's errors as exceptions: one class per failure a caller may want to tell apart."""
from __future__ import annotations

from typing import TYPE_CHECKING

from . import native

if TYPE_CHECKING:
    pass  # imported where used: chatting needs no numpy (start-up time, memory)


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
