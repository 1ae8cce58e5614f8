"""Anthropic's Messages API (POST /v1/messages, /v1/messages/count_tokens) on the same
generation path: a request is translated into a chat request (so it is checked by the same
code), the answer rendered as Anthropic's message, content blocks and stream events."""
from __future__ import annotations

import json
import secrets
from typing import Any

from .constraints import response_format
from .errors import ApiError, bad_request
from .jobs import Finish
from .protocol import GenerationRequest, parse_chat

MAX_STOP_SEQUENCES = 16

# an HTTP status as the error type Anthropic's clients know
_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error",
                403: "permission_error", 404: "not_found_error", 413: "request_too_large",
                429: "rate_limit_error", 503: "overloaded_error"}


def error_body(status: int, message: str) -> dict:
    return {"type": "error", "error": {"type": _ERROR_TYPES.get(status, "api_error"),
                                       "message": message}}


def _text(content: Any, where: str) -> str:
    """A string, or text blocks: their text."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for i, block in enumerate(content):
            if not isinstance(block, dict) or block.get("type") != "text" \
                    or not isinstance(block.get("text"), str):
                raise bad_request(f"{where}[{i}]: only text blocks are supported here.",
                                  f"{where}[{i}]", "unsupported_content")
            out.append(block["text"])
        return "".join(out)
    raise bad_request(f"{where} must be a string or an array of content blocks.", where,
                      "invalid_type")


def _openai_messages(body: dict) -> list[dict]:
    """Anthropic's system and messages as an OpenAI chat: tool_use blocks become an
    assistant's tool_calls, tool_result blocks tool messages (before the user's text)."""
    out: list[dict] = []
    system = body.get("system")
    if system is not None:
        out.append({"role": "system", "content": _text(system, "system")})
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise bad_request("'messages' must be a non-empty array.", "messages",
                          "missing_required_parameter" if messages is None else "invalid_value")
    for i, m in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(m, dict) or m.get("role") not in ("user", "assistant"):
            raise bad_request(f"{where}.role must be 'user' or 'assistant'.", f"{where}.role",
                              "invalid_value")
        content = m.get("content")
        if isinstance(content, str):
            out.append({"role": m["role"], "content": content})
            continue
        if not isinstance(content, list):
            raise bad_request(f"{where}.content must be a string or an array of content "
                              f"blocks.", f"{where}.content", "invalid_type")
        texts, calls = [], []
        for j, block in enumerate(content):
            kind = block.get("type") if isinstance(block, dict) else None
            bwhere = f"{where}.content[{j}]"
            if kind == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
            elif kind in ("thinking", "redacted_thinking") and m["role"] == "assistant":
                continue  # earlier reasoning is never fed back
            elif kind == "tool_use" and m["role"] == "assistant":
                if not isinstance(block.get("name"), str) or not isinstance(block.get("id"), str):
                    raise bad_request(f"{bwhere}: a tool_use block needs an id and a name.",
                                      bwhere, "invalid_value")
                args = block.get("input", {})
                if not isinstance(args, dict):
                    raise bad_request(f"{bwhere}.input must be an object.", f"{bwhere}.input",
                                      "invalid_type")
                calls.append({"id": block["id"], "type": "function", "function": {
                    "name": block["name"], "arguments": json.dumps(args, ensure_ascii=False)}})
            elif kind == "tool_result" and m["role"] == "user":
                if not isinstance(block.get("tool_use_id"), str):
                    raise bad_request(f"{bwhere}.tool_use_id must be a string.",
                                      f"{bwhere}.tool_use_id", "invalid_type")
                result = _text(block.get("content", ""), f"{bwhere}.content")
                if block.get("is_error"):
                    result = f"Error: {result}"
                out.append({"role": "tool", "tool_call_id": block["tool_use_id"],
                            "content": result})
            else:
                raise bad_request(f"{bwhere}: content blocks of type {kind!r} are not "
                                  f"supported in a {m['role']} message.", bwhere,
                                  "unsupported_content")
        if texts or calls or m["role"] == "assistant":
            msg: dict = {"role": m["role"], "content": "".join(texts)}
            if calls:
                msg["tool_calls"] = calls
            out.append(msg)
    return out


def _openai_tools(body: dict) -> dict:
    tools = body.get("tools")
    if tools is None:
        return {}
    if not isinstance(tools, list):
        raise bad_request("'tools' must be an array.", "tools", "invalid_type")
    converted = []
    for i, t in enumerate(tools):
        if not isinstance(t, dict) or t.get("type") not in (None, "custom"):
            raise bad_request(f"tools[{i}]: only client tools ({{\"name\", \"description\", "
                              f"\"input_schema\"}}) are supported, not server tools.",
                              f"tools[{i}]", "unsupported_parameter")
        f = {"name": t.get("name"), "parameters": t.get("input_schema")}
        if "description" in t:
            f["description"] = t["description"]
        converted.append({"type": "function", "function": f})
    out: dict = {"tools": converted}
    choice = body.get("tool_choice")
    if choice is not None:
        kind = choice.get("type") if isinstance(choice, dict) else None
        if kind == "tool":
            out["tool_choice"] = {"type": "function", "function": {"name": choice.get("name")}}
        elif kind in ("auto", "any", "none"):
            out["tool_choice"] = {"auto": "auto", "any": "required", "none": "none"}[kind]
        else:
            raise bad_request("'tool_choice.type' must be auto, any, tool or none.",
                              "tool_choice", "invalid_value")
        if choice.get("disable_parallel_tool_use") is True:
            out["parallel_tool_calls"] = False
    return out


def parse_messages(body: dict, model_ids: tuple[str, ...], strict: bool,
                   n_vocab: int, *, count_only: bool = False) -> GenerationRequest:
    thinking = body.get("thinking")
    kind = thinking.get("type") if isinstance(thinking, dict) else None
    if thinking is not None and kind not in ("enabled", "adaptive", "disabled"):
        raise bad_request("'thinking.type' must be enabled, adaptive or disabled.", "thinking",
                          "invalid_value")
    config = body.get("output_config")
    # structured output: {"type": "json_schema", "schema": {...}}, as response_format's
    constraint = response_format(config.get("format"), "output_config.format") \
        if isinstance(config, dict) else None
    chat = {"messages": _openai_messages(body), **_openai_tools(body)}
    if "model" in body:
        chat["model"] = body["model"]
    for name in ("temperature", "top_p", "top_k", "stream"):
        if name in body:
            chat[name] = body[name]
    if not count_only:
        max_tokens = body.get("max_tokens")
        if max_tokens is None:
            raise bad_request("'max_tokens' is required.", "max_tokens",
                              "missing_required_parameter")
        chat["max_tokens"] = max_tokens
    req = parse_chat(chat, model_ids, strict, n_vocab)
    req.constraint = constraint
    stops = body.get("stop_sequences")
    if stops is not None:
        if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops):
            raise bad_request("'stop_sequences' must be an array of strings.", "stop_sequences",
                              "invalid_type")
        if len(stops) > MAX_STOP_SEQUENCES:
            raise bad_request(f"'stop_sequences' may hold at most {MAX_STOP_SEQUENCES} strings.",
                              "stop_sequences", "invalid_value")
        req.stop = tuple(dict.fromkeys(s for s in stops if s))
    # thinking on: a reasoning block of the reply becomes a thinking block (whether the model
    # thinks is its template's and its own affair; budget_tokens is not enforced apart from
    # max_tokens); off: the reply's text as it is
    req.reasoning_format = "deepseek" if kind in ("enabled", "adaptive") else "none"
    return req


class MessageAnswer:
    """One request's Anthropic answer: the message, or its stream of events."""

    def __init__(self, model: str, stops: tuple[str, ...]):
        self.model = model
        self.stops = stops  # the request's own stop_sequences
        self.id = "msg_" + secrets.token_hex(12)
        self.block = -1  # the index of the last content block (-1: none yet)
        self.open_kind: str | None = None  # "thinking" or "text" while that block is open

    def _reason(self, f: Finish, calls: list) -> tuple[str, str | None]:
        if calls and f.reason == "stop":
            return "tool_use", None
        if f.reason == "length":
            return "max_tokens", None
        if f.stop_string is not None and f.stop_string in self.stops:
            return "stop_sequence", f.stop_string
        return "end_turn", None

    @staticmethod
    def _usage(f: Finish) -> dict:
        return {"input_tokens": f.prompt_tokens, "output_tokens": f.completion_tokens,
                "cache_read_input_tokens": f.cached_tokens,
                "cache_creation_input_tokens": 0}

    @staticmethod
    def _tool_block(c) -> dict:
        return {"type": "tool_use", "id": c.id, "name": c.name, "input": json.loads(c.arguments)}

    def whole(self, text: str | None, f: Finish, logprobs=None, calls=None, *,
              reasoning: str | None = None) -> dict:
        calls = calls or []
        content = [{"type": "thinking", "thinking": reasoning, "signature": ""}] \
            if reasoning else []
        content += [{"type": "text", "text": text}] if text else []
        content += [self._tool_block(c) for c in calls]
        reason, sequence = self._reason(f, calls)
        return {"id": self.id, "type": "message", "role": "assistant", "model": self.model,
                "content": content, "stop_reason": reason, "stop_sequence": sequence,
                "usage": self._usage(f)}

    def failure(self, message: str) -> dict:
        return error_body(500, message)

    # -- streaming: (event name, data) pairs --------------------------------------------------

    def start(self, prompt_tokens: int) -> list[tuple[str, dict]]:
        return [("message_start", {"type": "message_start", "message": {
            "id": self.id, "type": "message", "role": "assistant", "model": self.model,
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": prompt_tokens, "output_tokens": 0}}})]

    def _close(self) -> list[tuple[str, dict]]:
        if self.open_kind is None:
            return []
        self.open_kind = None
        return [("content_block_stop", {"type": "content_block_stop", "index": self.block})]

    def _delta(self, kind: str, delta: dict) -> list[tuple[str, dict]]:
        out = []
        if self.open_kind != kind:
            out += self._close()
            self.block += 1
            self.open_kind = kind
            start = {"type": "thinking", "thinking": "", "signature": ""} if kind == "thinking" \
                else {"type": "text", "text": ""}
            out.append(("content_block_start", {"type": "content_block_start",
                                                "index": self.block, "content_block": start}))
        out.append(("content_block_delta", {"type": "content_block_delta", "index": self.block,
                                            "delta": delta}))
        return out

    def text(self, text: str) -> list[tuple[str, dict]]:
        return self._delta("text", {"type": "text_delta", "text": text})

    def thinking(self, text: str) -> list[tuple[str, dict]]:
        return self._delta("thinking", {"type": "thinking_delta", "thinking": text})

    def finish(self, f: Finish, calls: list) -> list[tuple[str, dict]]:
        out = self._close()
        for c in calls:
            self.block += 1
            out += [("content_block_start", {"type": "content_block_start", "index": self.block,
                                             "content_block": {"type": "tool_use", "id": c.id,
                                                               "name": c.name, "input": {}}}),
                    ("content_block_delta", {"type": "content_block_delta", "index": self.block,
                                             "delta": {"type": "input_json_delta",
                                                       "partial_json": c.arguments}}),
                    ("content_block_stop", {"type": "content_block_stop", "index": self.block})]
        reason, sequence = self._reason(f, calls)
        out += [("message_delta", {"type": "message_delta",
                                   "delta": {"stop_reason": reason, "stop_sequence": sequence},
                                   "usage": {"output_tokens": f.completion_tokens}}),
                ("message_stop", {"type": "message_stop"})]
        return out


def as_anthropic(e: ApiError) -> dict:
    return error_body(e.status, e.message)
