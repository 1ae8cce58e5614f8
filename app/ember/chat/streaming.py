"""The reply loop shared by the app and the terminal chat: generate from a fitted prompt,
cut the text at the template's stop strings (never showing a partial one), and stop when
the request's cancel token says so."""
from __future__ import annotations

import threading
from collections.abc import Iterator

from .fitting import BuiltPrompt
from .stops import StopScanner


class CancelToken:
    """One request's Stop. cancel() is safe from any thread: it marks the request and
    interrupts the context it runs on (mid-prefill too). A token set before generation
    starts is still honoured: the engine resets its flag at the start, the token stays."""

    def __init__(self, context=None):
        self.event = threading.Event()
        self.context = context  # an engine Context (or None: checked between pieces only)

    def cancel(self) -> None:
        self.event.set()  # first: generate() looks at it after resetting the context's flag
        if self.context is not None:
            self.context.cancel()

    @property
    def cancelled(self) -> bool:
        return self.event.is_set()


def stream_reply(session, built: BuiltPrompt, params, stats,
                 token: CancelToken | None = None) -> Iterator[str]:
    """Yields the reply's text. session: an engine Session; stats: its GenerationStats,
    whose stop_reason ends as "eog", "length", "context_full", "stop_string" or
    "cancelled"."""
    token = token or CancelToken()
    if token.cancelled:
        stats.stop_reason = "cancelled"
        return
    scanner = StopScanner(built.stop_strings)
    gen = session.generate(built.ids, built.max_tokens, params, stats=stats,
                           cancel=token.event)
    try:
        for piece in gen:
            text, stopped = scanner.feed(piece)
            if text:
                yield text
            if stopped:
                stats.stop_reason = "stop_string"
                return
            if token.cancelled:
                break
        else:
            tail = scanner.flush()
            if tail:
                yield tail
    finally:
        gen.close()
        if token.cancelled and stats.stop_reason not in ("eog", "stop_string"):
            stats.stop_reason = "cancelled"
