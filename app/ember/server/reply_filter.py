"""A chat reply as the client is given it: the reasoning apart (reasoning_content, thinking
blocks), tool calls held back and parsed, harmony's channels sorted; one interface over
chat's ReplySplitter + ToolCallStream and HarmonyStream, streamed or whole."""
from __future__ import annotations

from ..chat.harmony import HarmonyStream
from ..chat.reasoning_split import ReplySplitter
from ..chat.tools import ToolCall, ToolCallStream


class ReplyFilter:
    def __init__(self, *, splitter: ReplySplitter | None = None,
                 tools: ToolCallStream | None = None, harmony: HarmonyStream | None = None,
                 parallel: bool = True):
        self.splitter = splitter
        self.tools = tools
        self.harmony = harmony
        self.parallel = parallel  # parallel_tool_calls false: the first call alone
        self.calls: list[ToolCall] = []

    def _through_tools(self, parts) -> list[tuple[str, str]]:
        out = []
        for kind, text in parts:
            if kind == "answer" and self.tools is not None:
                text = self.tools.feed(text)
            if text:
                out.append((kind, text))
        return out

    def feed(self, piece: str) -> list[tuple[str, str]]:
        """("thought" | "answer", text) pieces ready to send."""
        if self.harmony is not None:
            return [p for p in self.harmony.feed(piece) if p[1]]
        parts = self.splitter.feed(piece) if self.splitter is not None else [("answer", piece)]
        return self._through_tools(parts)

    def finish(self) -> list[tuple[str, str]]:
        """The pieces held back; self.calls is set."""
        if self.harmony is not None:
            out = [p for p in self.harmony.finish() if p[1]]
            calls = self.harmony.calls
        else:
            out = self._through_tools(self.splitter.finish() if self.splitter else ())
            calls = []
            if self.tools is not None:
                rest, calls = self.tools.finish()
                if rest:
                    out.append(("answer", rest))
        self.calls = calls if self.parallel else calls[:1]
        return out

    @property
    def has_reasoning(self) -> bool:
        if self.harmony is not None:
            return self.harmony.has_thoughts
        return self.splitter is not None and self.splitter.has_block

    def whole(self, text: str) -> tuple[str | None, str | None, list[ToolCall]]:
        """A whole reply: (reasoning, None without any; content, None when it is only
        calls; calls)."""
        parts = self.feed(text) + self.finish()
        reasoning = "".join(t for k, t in parts if k == "thought")
        content = "".join(t for k, t in parts if k == "answer")
        if self.calls:
            content = content.strip() or None
        return (reasoning if self.has_reasoning else None), content, self.calls
