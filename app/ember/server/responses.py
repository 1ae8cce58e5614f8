"""The JSON shapes OpenAI clients parse: whole answers, streamed chunks (server-sent
events) and usage, for chat.completion and text_completion."""
from __future__ import annotations

import json
import secrets
import time

from .. import __version__
from ..chat.tools import ToolCall
from .errors import error_body
from .jobs import Finish
from .logprobs import content

FINGERPRINT = f"ember-{__version__}"


def usage(f: Finish) -> dict:
    return usage_of([f])


def usage_of(finishes: list[Finish]) -> dict:
    """The usage of one request's choices: the prompt once (as OpenAI counts it with n > 1),
    the completions of them all."""
    f = finishes[0]
    completion = sum(x.completion_tokens for x in finishes)
    return {"prompt_tokens": f.prompt_tokens, "completion_tokens": completion,
            "total_tokens": f.prompt_tokens + completion,
            "prompt_tokens_details": {"cached_tokens": f.cached_tokens}}


def sse(data: dict | str) -> bytes:
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False,
                                                          separators=(",", ":"))
    return f"data: {text}\n\n".encode()


def _reason(f: Finish, tool_calls: bool) -> str:
    # a reply cut by max_tokens stays "length": its calls may be incomplete
    return "tool_calls" if tool_calls and f.reason == "stop" else f.reason


def _tool_call(c: ToolCall) -> dict:
    return {"id": c.id, "type": "function",
            "function": {"name": c.name, "arguments": c.arguments}}


class Answer:
    """One request's answer: the id and creation time every chunk repeats."""

    def __init__(self, chat: bool, model: str, include_usage: bool = False):
        self.chat = chat
        self.model = model
        self.include_usage = include_usage
        self.id = ("chatcmpl-" if chat else "cmpl-") + secrets.token_hex(12)
        self.created = int(time.time())
        self.object = "chat.completion" if chat else "text_completion"

    def _head(self, obj: str) -> dict:
        return {"id": self.id, "object": obj, "created": self.created, "model": self.model,
                "system_fingerprint": FINGERPRINT}

    def _choice(self, index: int, text: str | None, f: Finish,
                logprobs: list[dict] | None = None, tool_calls: list[ToolCall] | None = None,
                reasoning: str | None = None) -> dict:
        if not self.chat:
            return {"index": index, "text": text, "logprobs": None, "finish_reason": f.reason}
        message = {"role": "assistant", "content": text}
        if reasoning is not None:
            message["reasoning_content"] = reasoning
        if tool_calls:
            message["tool_calls"] = [_tool_call(c) for c in tool_calls]
        return {"index": index, "message": message,
                "logprobs": None if logprobs is None else content(logprobs),
                "finish_reason": _reason(f, bool(tool_calls))}

    def whole(self, text: str | None, f: Finish, logprobs: list[dict] | None = None,
              tool_calls: list[ToolCall] | None = None, *,
              reasoning: str | None = None) -> dict:
        return self.whole_choices([(text, f, logprobs, tool_calls, reasoning)])

    def whole_choices(self, results: list[tuple]) -> dict:
        """results: (text, Finish, logprobs, tool calls, reasoning) per choice, in order."""
        choices = [self._choice(i, *r) for i, r in enumerate(results)]
        return {**self._head(self.object), "choices": choices,
                "usage": usage_of([r[1] for r in results])}

    def failure(self, message: str) -> dict:
        return error_body(message, "server_error")

    def _chunk(self, choice: dict) -> dict:
        obj = "chat.completion.chunk" if self.chat else "text_completion"
        out = {**self._head(obj), "choices": [choice]}
        if self.include_usage:
            out["usage"] = None  # as OpenAI: null on every chunk but the last
        return out

    def first_chunk(self, index: int = 0) -> dict | None:
        """Chat streams open with the role (clients build the message from it)."""
        if not self.chat:
            return None
        return self._chunk({"index": index, "delta": {"role": "assistant", "content": ""},
                            "logprobs": None, "finish_reason": None})

    def text_chunk(self, text: str, logprobs: list[dict] | None = None, *,
                   reasoning: bool = False, index: int = 0) -> dict:
        if self.chat:
            delta = {"reasoning_content": text} if reasoning else {"content": text}
            return self._chunk({"index": index, "delta": delta,
                                "logprobs": None if logprobs is None else content(logprobs),
                                "finish_reason": None})
        return self._chunk({"index": index, "text": text, "logprobs": None,
                            "finish_reason": None})

    def tool_call_chunks(self, calls: list[ToolCall], index: int = 0) -> list[dict]:
        """Each call as OpenAI streams one: its id and name first, then its arguments."""
        out = []
        for i, c in enumerate(calls):
            for part in ({"index": i, "id": c.id, "type": "function",
                          "function": {"name": c.name, "arguments": ""}},
                         {"index": i, "function": {"arguments": c.arguments}}):
                out.append(self._chunk({"index": index, "delta": {"tool_calls": [part]},
                                        "logprobs": None, "finish_reason": None}))
        return out

    def final_chunk(self, f: Finish, tool_calls: bool = False, index: int = 0) -> dict:
        """A choice's content-free chunk with its finish_reason."""
        if self.chat:
            return self._chunk({"index": index, "delta": {}, "logprobs": None,
                                "finish_reason": _reason(f, tool_calls)})
        return self._chunk({"index": index, "text": "", "logprobs": None,
                            "finish_reason": f.reason})

    def usage_chunk(self, finishes: list[Finish]) -> dict:
        """include_usage: the last chunk, no choices, the usage of them all."""
        obj = "chat.completion.chunk" if self.chat else "text_completion"
        return {**self._head(obj), "choices": [], "usage": usage_of(finishes)}
