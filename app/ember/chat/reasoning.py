"""Reasoning ("thinking") blocks in replies: ``<think>...</think>`` before the answer.

Reasoning models (Qwen3, QwQ, DeepSeek-R1 and its distills...) write their chain of
thought between ``<think>`` and ``</think>`` and then the answer.  Some chat templates
open the block themselves (the generation prompt ends with ``<think>\\n``), so the reply
starts inside the thoughts and only the closing tag is generated.

Two views of the same rule, both pure Python (the app and the terminal chat share them):

- ``split_reply(text)``: the whole reply so far -> thoughts, answer, and whether the
  thoughts are still open.  It is a function of the text alone, so a streamed reply
  split into chunks any which way gives the same result as the finished one, and a
  stored reply reloads the same way it was shown.
- ``ReasoningStream``: incremental, for output that cannot be taken back (a terminal):
  ``feed(chunk)`` returns ``(kind, text)`` pieces, holding back a tail that could still
  turn out to be a tag.

Only a block at the start of the reply counts (leading whitespace aside): ``<think>``
later in an answer is answer text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "THINK_CLOSE",
    "THINK_OPEN",
    "ReasoningStream",
    "Reply",
    "normalize_reply",
    "prompt_opens_thinking",
    "split_reply",
    "strip_thoughts",
    "strip_thoughts_from_history",
]

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"


@dataclass(frozen=True)
class Reply:
    """A reply split into its reasoning and its answer."""

    thoughts: str  # without the tags, surrounding whitespace stripped
    answer: str  # what the model says to the user (after a block: leading whitespace stripped)
    thinking: bool = False  # the thoughts are not closed yet (still streaming, or cut off)
    has_block: bool = False  # the reply has a reasoning block (even an empty one)

    @property
    def has_thoughts(self) -> bool:
        """There is reasoning worth showing (an empty ``<think></think>`` is not)."""
        return bool(self.thoughts) or self.thinking


def _is_partial_open(s: str) -> bool:
    """s is a proper, non-empty prefix of ``<think>`` (the tag may still be arriving)."""
    return 0 < len(s) < len(THINK_OPEN) and THINK_OPEN.startswith(s)


def _partial_suffix(s: str, tag: str) -> int:
    """Length of the longest end of s that is a proper prefix of tag."""
    for k in range(min(len(tag) - 1, len(s)), 0, -1):
        if tag.startswith(s[-k:]):
            return k
    return 0


def split_reply(text: str, *, opened: bool = False, streaming: bool = False) -> Reply:
    """Split a reply (complete or streamed so far) into thoughts and answer.

    ``opened``: the prompt already opened the thought block (``prompt_opens_thinking``),
    so the reply starts inside it.  ``streaming``: more text may follow, so a tail that
    could be the start of a tag is held back instead of shown.

    A ``</think>`` with no ``<think>`` before it also closes an implicit block that
    started with the reply: that is what a template that opens the block leaves when
    the reply is stored on its own.
    """
    body = text.lstrip()
    if body.startswith(THINK_OPEN):
        inner, opened = body[len(THINK_OPEN):], True
    elif opened:
        inner = text
    else:
        close = text.find(THINK_CLOSE)
        if close != -1 and THINK_OPEN not in text[:close]:
            inner, opened = text, True
        elif streaming and (not body or _is_partial_open(body)):
            return Reply("", "", thinking=False)  # "", "  <thi": wait for the next piece
        else:
            answer = text
            if streaming:
                cut = _partial_suffix(answer, THINK_CLOSE)
                # "...</thi" may still become the close of an implicit block
                if cut and THINK_OPEN not in answer:
                    answer = answer[: len(answer) - cut]
            return Reply("", answer)  # no block: the text as it is (raw mode relies on it)
    close = inner.find(THINK_CLOSE)
    if close == -1:
        thoughts = inner
        if streaming:
            cut = _partial_suffix(thoughts, THINK_CLOSE)
            thoughts = thoughts[: len(thoughts) - cut]
        return Reply(thoughts.strip(), "", thinking=True, has_block=True)
    return Reply(inner[:close].strip(), inner[close + len(THINK_CLOSE):].lstrip(),
                 thinking=False, has_block=True)


def strip_thoughts(text: str) -> str:
    """The answer of a finished reply, without its reasoning block.

    A reply cut off inside its thoughts has no answer: the result is empty."""
    return split_reply(text).answer


def prompt_opens_thinking(prompt_text: str) -> bool:
    """The rendered prompt ends inside an open ``<think>`` block (DeepSeek-R1 style
    templates add ``<think>\\n`` to the generation prompt), so the reply starts inside it.
    Qwen3's ``<think>\\n\\n</think>\\n\\n`` (thinking switched off) is closed: False."""
    tail = prompt_text.rstrip()
    return tail.endswith(THINK_OPEN)


def normalize_reply(generated: str, opened: bool) -> str:
    """The reply as stored: when the prompt opened the block, the opening tag is put in
    front so the stored text says by itself where the thoughts are."""
    if opened and not generated.lstrip().startswith(THINK_OPEN):
        return THINK_OPEN + generated
    return generated


def strip_thoughts_from_history(messages: Sequence[Mapping[str, Any]]) -> list[dict]:
    """A copy of a chat in which earlier assistant turns keep only their answers, so
    reasoning is never fed back to the model whatever its template does with it.

    An assistant message at the very end is left alone: that is a reply being
    continued, and its thoughts are part of what it continues from."""
    out = []
    last = len(messages) - 1
    for i, m in enumerate(messages):
        m = dict(m)
        content = m.get("content")
        if m.get("role") == "assistant" and isinstance(content, str) and i != last:
            m["content"] = strip_thoughts(content)
        out.append(m)
    return out


class ReasoningStream:
    """Incremental splitter for output that cannot be taken back (a terminal).

    ``feed(chunk)`` returns a list of ``("thought" | "answer", text)`` pieces in
    order; ``finish()`` releases what was held back.  The pieces joined per kind
    equal ``split_reply`` of the whole text (except for whitespace at the borders of
    the block, which is trimmed here too), however the text is chunked — with one
    exception that needs hindsight: a ``</think>`` with no opening tag cannot move
    text already printed as answer, so pass ``opened=True`` when the prompt opened
    the block.
    """

    def __init__(self, opened: bool = False) -> None:
        # "start": nothing decided yet; "thought": inside the block; "answer": after it
        self.state = "thought" if opened else "start"
        self._buf = ""
        self._lead = True  # strip leading whitespace of the current section
        self.thoughts = ""
        self.answer = ""

    @property
    def thinking(self) -> bool:
        return self.state == "thought"

    def _emit(self, out: list, kind: str, text: str) -> None:
        if self._lead:
            text = text.lstrip()
            if not text:
                return
            self._lead = False
        if not text:
            return
        if kind == "thought":
            self.thoughts += text
        else:
            self.answer += text
        if out and out[-1][0] == kind:
            out[-1] = (kind, out[-1][1] + text)
        else:
            out.append((kind, text))

    def feed(self, chunk: str) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        self._buf += chunk
        while True:
            if self.state == "start":
                body = self._buf.lstrip()
                if body.startswith(THINK_OPEN):
                    self._buf = body[len(THINK_OPEN):]
                    self.state, self._lead = "thought", True
                    continue
                if not body or _is_partial_open(body):
                    return out  # undecided: hold it
                self.state = "answer"
                continue
            if self.state == "thought":
                close = self._buf.find(THINK_CLOSE)
                if close != -1:
                    # thoughts end here: their trailing whitespace is not shown
                    self._emit(out, "thought", self._buf[:close].rstrip())
                    self._buf = self._buf[close + len(THINK_CLOSE):]
                    self.state, self._lead = "answer", True
                    continue
                keep = _partial_suffix(self._buf, THINK_CLOSE)
                text = self._buf[: len(self._buf) - keep]
                # whitespace at the end may be the block's last: hold it with the tag
                stripped = text.rstrip()
                keep += len(text) - len(stripped)
                self._emit(out, "thought", stripped)
                self._buf = self._buf[len(self._buf) - keep:] if keep else ""
                return out
            # answer
            self._emit(out, "answer", self._buf)
            self._buf = ""
            return out

    def finish(self) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        rest, self._buf = self._buf, ""
        if self.state == "thought":
            self._emit(out, "thought", rest.rstrip())
        elif rest.strip():
            self._emit(out, "answer", rest)
        return out
