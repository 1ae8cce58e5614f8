"""A GBNF grammar that constrains sampling: masks each logits row to the tokens whose text
can continue the reply so far, and follows the tokens drawn (ember_grammar_*)."""
from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING

from . import native
from .errors import EmberError, _check
from .native import c_int32

if TYPE_CHECKING:
    from .model import Model


class Grammar:
    """model None: a grammar that takes text only (accept_text), for checking strings."""

    def __init__(self, gbnf: str, model: Model | None = None, root: str = "root"):
        lib = native.lib()
        handle = ctypes.c_void_p()
        text = gbnf.encode("utf-8")
        _check(lib.ember_grammar_create(model._model if model is not None else None, text,
                                        len(text), root.encode("utf-8"), ctypes.byref(handle)))
        self._h = handle
        self.gbnf = gbnf

    def apply(self, logits_ptr, n_vocab: int) -> int:
        """Sets the logits of tokens that cannot continue to -inf, in place (a row of the
        caller's own: Sampler.row_pointer); returns how many tokens stay."""
        n = c_int32()
        _check(native.lib().ember_grammar_apply(self._h, logits_ptr, n_vocab, ctypes.byref(n)))
        return n.value

    def accept(self, token: int) -> None:
        _check(native.lib().ember_grammar_accept(self._h, token))

    def accept_text(self, text: str | bytes) -> None:
        data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        _check(native.lib().ember_grammar_accept_text(self._h, data, len(data)))

    def matches(self, text: str | bytes) -> bool:
        """Whether the whole of text is a sentence of the grammar (from the start; the
        state is reset before and after)."""
        self.reset()
        try:
            self.accept_text(text)
            return self.can_end
        except EmberError:
            return False
        finally:
            self.reset()

    def reset(self) -> None:
        _check(native.lib().ember_grammar_reset(self._h))

    @property
    def can_end(self) -> bool:
        """The text so far is a complete sentence (it may still go on)."""
        return bool(native.lib().ember_grammar_can_end(self._h))

    @property
    def is_done(self) -> bool:
        return bool(native.lib().ember_grammar_is_done(self._h))

    def close(self) -> None:
        if self._h:
            native.lib().ember_grammar_free(self._h)
            self._h = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
