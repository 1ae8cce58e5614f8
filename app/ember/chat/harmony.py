"""gpt-oss' harmony replies: messages on channels, one after another (`<|channel|>analysis
<|message|>...<|end|><|start|>assistant<|channel|>final<|message|>...`), the analysis channel
the reasoning, final (and commentary without a recipient) the answer, a commentary message
`to=functions.NAME` a tool call. The text must carry the special tokens (the engine's
special_text); the stop (<|return|>, <|call|>) that ends the reply is never in it."""
from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence

from .tools import ToolCall, ToolFormat, _call_id

START, CHANNEL, MESSAGE, END = "<|start|>", "<|channel|>", "<|message|>", "<|end|>"
_RECIPIENT = re.compile(r"to=functions\.([^\s<]+)")
_CHANNEL = re.compile(re.escape(CHANNEL) + r"\s*(\w+)")


def _held(text: str, tags: Sequence[str]) -> int:
    """How many characters at the end of text may be the start of one of tags."""
    for n in range(min(len(text), max(len(t) for t in tags)), 0, -1):
        if any(t.startswith(text[-n:]) for t in tags):
            return n
    return 0


class HarmonyStream:
    """Text in, ("thought" | "answer", text) pieces out; the calls in `calls` once finished.
    prefix: what the prompt made the reply start with (a forced call's header)."""

    def __init__(self, tools: bool = True, prefix: str = "", split: bool = True):
        self.tools = tools  # calls are parsed (else their text is answer text)
        # analysis is "thought"; else it is left out, as harmony's analysis channel is not
        # for users (and a client that takes no reasoning wants the final answer alone)
        self.split = split
        self.buf = prefix
        self.in_body = False
        self.kind = "answer"
        self.call_name: str | None = None
        self.call_body = ""
        self.calls: list[ToolCall] = []
        self.has_thoughts = False
        self.seen_message = False

    def _open(self, header: str) -> None:
        recipient = _RECIPIENT.search(header)
        channel = _CHANNEL.search(header)
        self.call_name = recipient.group(1) if recipient and self.tools else None
        analysis = channel is not None and channel.group(1) == "analysis"
        self.kind = ("thought" if self.split else "hidden") if analysis else "answer"
        self.has_thoughts |= self.kind == "thought"
        self.in_body, self.seen_message = True, True

    def _close(self) -> None:
        if self.call_name is not None:
            body = self.call_body.strip()
            try:
                args = json.loads(body) if body else {}
            except ValueError:
                args = None
            if isinstance(args, dict):
                self.calls.append(ToolCall(self.call_name, json.dumps(args, ensure_ascii=False),
                                           _call_id()))
        self.in_body, self.call_name, self.call_body = False, None, ""

    def _emit(self, out: list, text: str) -> None:
        if not text or self.kind == "hidden":
            return
        if self.call_name is not None:
            self.call_body += text
        elif out and out[-1][0] == self.kind:
            out[-1] = (self.kind, out[-1][1] + text)
        else:
            out.append((self.kind, text))

    def feed(self, piece: str) -> list[tuple[str, str]]:
        self.buf += piece
        out: list[tuple[str, str]] = []
        while True:
            if not self.in_body:
                i = self.buf.find(MESSAGE)
                if i == -1:
                    return out  # a header still arriving
                self._open(self.buf[:i])
                self.buf = self.buf[i + len(MESSAGE):]
                continue
            ends = [j for j in (self.buf.find(END), self.buf.find(START)) if j != -1]
            if ends:
                j = min(ends)
                self._emit(out, self.buf[:j])
                self.buf = self.buf[j + (len(END) if self.buf.startswith(END, j) else 0):]
                self._close()
                continue
            keep = _held(self.buf, (END, START))
            self._emit(out, self.buf[:len(self.buf) - keep])
            self.buf = self.buf[len(self.buf) - keep:]
            return out

    def finish(self) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        if self.in_body:
            self._emit(out, self.buf)
            self._close()
        elif not self.seen_message and self.buf.strip():
            out.append(("answer", self.buf))  # not harmony after all: the text as it is
        self.buf = ""
        return out


class HarmonyFormat(ToolFormat):
    """The tool side of harmony (ToolFormat's interface, for tool_support and the tests)."""

    name, label = "harmony", "gpt-oss harmony"
    openers = (START, CHANNEL)

    @classmethod
    def detect(cls, source: str) -> bool:
        return CHANNEL in source and MESSAGE in source and "<|call|>" in source

    def parse(self, text: str, tools: Sequence[Mapping] = ()) -> tuple[str, list[ToolCall]]:
        stream = HarmonyStream()
        parts = stream.feed(text) + stream.finish()
        return "".join(t for k, t in parts if k == "answer"), stream.calls

    def forced_prefix(self, name: str | None) -> str:
        if name is None:
            return f"{CHANNEL}commentary to=functions."
        return f"{CHANNEL}commentary to=functions.{name} <|constrain|>json{MESSAGE}"
