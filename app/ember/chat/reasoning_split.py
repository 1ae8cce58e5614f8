"""A reply's reasoning apart from its answer, for an API that returns them in two fields
(OpenAI-style `reasoning_content`): streamed pieces in, ("thought" | "answer", text) out,
the same whole or however the reply is cut. A reply without a reasoning block passes
through untouched (not even its leading whitespace is trimmed)."""
from __future__ import annotations

from .reasoning import THINK_OPEN, ReasoningStream, _is_partial_open


class ReplySplitter:
    def __init__(self, opened: bool = False):
        """opened: the prompt opened the block (prompt_opens_thinking), so the reply
        starts inside it."""
        self._stream = ReasoningStream(opened=True) if opened else None
        self._raw = False  # decided: no block, the text as it is
        self._held = ""
        self.has_block = opened

    def feed(self, piece: str) -> list[tuple[str, str]]:
        if self._stream is not None:
            return self._stream.feed(piece)
        if self._raw:
            return [("answer", piece)] if piece else []
        self._held += piece
        body = self._held.lstrip()
        if body.startswith(THINK_OPEN):
            self._stream, self.has_block = ReasoningStream(), True
            held, self._held = self._held, ""
            return self._stream.feed(held)
        if not body or _is_partial_open(body):
            return []  # undecided
        self._raw = True
        held, self._held = self._held, ""
        return [("answer", held)]

    def finish(self) -> list[tuple[str, str]]:
        if self._stream is not None:
            return self._stream.finish()
        held, self._held = self._held, ""
        return [("answer", held)] if held else []

    def split(self, text: str) -> tuple[str | None, str]:
        """A whole reply: (the thoughts, None without a block; the answer)."""
        thoughts, answer = [], []
        for kind, t in [*self.feed(text), *self.finish()]:
            (thoughts if kind == "thought" else answer).append(t)
        return ("".join(thoughts) if self.has_block else None), "".join(answer)
