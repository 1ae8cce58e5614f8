"""The reply loop shared by the app, the terminal chat and the server: generate from a
fitted prompt's ids, cut the text at the stop strings (never showing a partial one), and
stop when the request's cancel token says so."""
from __future__ import annotations

import threading
from collections.abc import Iterator

from .fitting import BuiltPrompt
from .stops import StopScanner


class CancelToken:
    """One request's Stop, the one cancel type of the app, the terminal chat and the
    server. cancel() is safe from any thread: it marks the request and cancels what the
    request runs on, if anything is attached (an engine Context, interrupted mid-prefill
    too; an endpoint's stream). A token cancelled before generation starts is still
    honoured: the engine resets its flag at the start, the token stays; a target attached
    after a cancel is cancelled at once."""

    def __init__(self, context=None):
        self.event = threading.Event()
        self._lock = threading.Lock()
        self.context = context  # anything with cancel(): a Context, a stream (or None)

    def attach(self, target) -> None:
        """What cancel() interrupts from now on (None: nothing, the request is over)."""
        with self._lock:
            self.context = target
            if target is not None and self.event.is_set():
                target.cancel()

    def cancel(self) -> None:
        with self._lock:
            self.event.set()  # first: generate() looks at it after resetting the context's flag
            target = self.context
        if target is not None:
            target.cancel()

    @property
    def cancelled(self) -> bool:
        return self.event.is_set()


def stream_reply(session, built: BuiltPrompt, params, stats,
                 token: CancelToken | None = None, **generate_options) -> Iterator[str]:
    """Yields the reply's text: the one reply loop (app, terminal chat, server). session:
    an engine Session; stats: its GenerationStats, whose stop_reason ends as "eog",
    "length", "context_full", "stop_string" or "cancelled". generate_options go to
    Session.generate (the server's penalize_prompt and on_token)."""
    token = token or CancelToken()
    if token.cancelled:
        stats.stop_reason = "cancelled"
        return
    scanner = StopScanner(built.stop_strings)
    gen = session.generate(built.ids, built.max_tokens, params, stats=stats,
                           cancel=token.event, **generate_options)
    try:
        for piece in gen:
            text, stopped = scanner.feed(piece)
            if text:
                yield text
            if stopped:
                stats.stop_reason = "stop_string"
                stats.stop_string = scanner.matched
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
