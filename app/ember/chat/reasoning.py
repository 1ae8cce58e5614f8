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

Harmony (gpt-oss) replies are messages on channels instead: the generation prompt ends with
``<|start|>assistant``, and the model writes ``<|channel|>analysis<|message|>...<|end|>``
(its reasoning: the thoughts), then ``<|start|>assistant<|channel|>final<|message|>...``
(the answer), ended by ``<|return|>``, ``<|end|>`` or ``<|call|>``.  A reply that starts
with a channel header is read that way (``split_harmony``); the same two views hold.
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
    "split_harmony",
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


# Harmony's markers, as text (the engine renders them: native/src/text/vocab_load.cpp)
H_START, H_CHANNEL, H_MESSAGE = "<|start|>", "<|channel|>", "<|message|>"
H_ENDS = ("<|end|>", "<|return|>", "<|call|>")
_H_BODY_ENDS = (*H_ENDS, H_START)  # a message that starts without its <|end|> ends the last
_H_OPENINGS = (H_CHANNEL, H_START + "assistant" + H_CHANNEL)


def _is_partial_harmony(s: str) -> bool:
    """s could still become the start of a harmony reply."""
    return any(0 < len(s) < len(o) and o.startswith(s) for o in _H_OPENINGS)


def _is_harmony(body: str) -> bool:
    return body.startswith(_H_OPENINGS)


def _first_of(text: str, marks: Sequence[str], start: int = 0) -> tuple[int, str]:
    """The earliest of marks in text from start: (index, mark), (-1, "") if none."""
    best, which = -1, ""
    for m in marks:
        i = text.find(m, start)
        if i != -1 and (best == -1 or i < best):
            best, which = i, m
    return best, which


def split_harmony(text: str, *, streaming: bool = False) -> Reply:
    """A harmony reply (``<|channel|>analysis<|message|>...``) split into thoughts (the
    analysis messages) and answer (the final messages, and commentary addressed to no
    tool: a preamble for the user). A message with a recipient (`` to=functions.x``, a
    tool call) is neither. ``streaming``: a tail that may be the start of a marker is held
    back. A reply may start with ``<|start|>assistant`` or directly with its channel (the
    prompt wrote ``<|start|>assistant``)."""
    thoughts: list[str] = []
    answer: list[str] = []
    has_block = thinking = False
    pos = len(text) - len(text.lstrip())
    while pos < len(text):
        if text.startswith(H_START, pos):
            pos += len(H_START)
        head_end = text.find(H_MESSAGE, pos)
        if head_end == -1:
            break  # a header still arriving (or a cut-off one): nothing to show of it
        header = text[pos:head_end]
        channel = header.split(H_CHANNEL, 1)[1] if H_CHANNEL in header else ""
        name = channel.split(" ", 1)[0].split("<|", 1)[0]
        to_tool = "to=" in header
        body_start = head_end + len(H_MESSAGE)
        end, mark = _first_of(text, _H_BODY_ENDS, body_start)
        body = text[body_start:] if end == -1 else text[body_start:end]
        if end == -1 and streaming:
            body = body[: len(body) - max(_partial_suffix(body, m) for m in _H_BODY_ENDS)]
        if name == "analysis":
            has_block = True
            thoughts.append(body)
            thinking = end == -1
        elif not to_tool and name in ("final", "commentary"):
            answer.append(body)
        if end == -1:
            break
        pos = end + (0 if mark == H_START else len(mark))
        # whatever sits between a message's end and the next <|start|> is not a message
        nxt = text.find(H_START, pos)
        if nxt == -1:
            break
        pos = nxt
    joined = "\n\n".join(t.strip() for t in thoughts if t.strip())
    return Reply(joined, "".join(answer).lstrip(), thinking=thinking, has_block=has_block)


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
    if not opened and _is_harmony(body):
        return split_harmony(text, streaming=streaming)
    if body.startswith(THINK_OPEN):
        inner, opened = body[len(THINK_OPEN):], True
    elif opened:
        inner = text
    else:
        close = text.find(THINK_CLOSE)
        if close != -1 and THINK_OPEN not in text[:close]:
            inner, opened = text, True
        elif streaming and (not body or _is_partial_open(body) or _is_partial_harmony(body)):
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
        self._harmony_thinking = False

    @property
    def thinking(self) -> bool:
        return self.state == "thought" or (self.state == "harmony" and self._harmony_thinking)

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

    def _harmony(self, reply: Reply) -> list[tuple[str, str]]:
        """The pieces a harmony reply's split has grown by since the last one (both only
        grow: split_harmony of a longer text extends the thoughts and answer it gave)."""
        out: list[tuple[str, str]] = []
        for kind, now, old in (("thought", reply.thoughts, self.thoughts),
                               ("answer", reply.answer, self.answer)):
            if len(now) > len(old) and now.startswith(old):
                out.append((kind, now[len(old):]))
        self.thoughts = reply.thoughts if reply.thoughts.startswith(self.thoughts) else self.thoughts
        self.answer = reply.answer if reply.answer.startswith(self.answer) else self.answer
        self._harmony_thinking = reply.thinking
        return out

    def feed(self, chunk: str) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        self._buf += chunk
        while True:
            if self.state == "harmony":
                return self._harmony(split_harmony(self._buf, streaming=True))
            if self.state == "start":
                body = self._buf.lstrip()
                if body.startswith(THINK_OPEN):
                    self._buf = body[len(THINK_OPEN):]
                    self.state, self._lead = "thought", True
                    continue
                if _is_harmony(body):
                    self.state = "harmony"  # the whole text is kept: split_harmony reads it
                    continue
                if not body or _is_partial_open(body) or _is_partial_harmony(body):
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
        if self.state == "harmony":
            return self._harmony(split_harmony(self._buf))
        out: list[tuple[str, str]] = []
        rest, self._buf = self._buf, ""
        if self.state == "thought":
            self._emit(out, "thought", rest.rstrip())
        elif rest.strip():
            self._emit(out, "answer", rest)
        return out
