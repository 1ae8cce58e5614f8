"""OpenAI's Responses API (POST /v1/responses), which newer SDKs and agents default to: a
request is translated into a chat request (the same checks, template and slots), the answer
rendered as a response object with message and function_call output items, or as its stream
of typed events. Nothing is stored: previous_response_id is a 400."""
from __future__ import annotations

import secrets
import time
from typing import Any

from .constraints import response_format
from .errors import bad_request, error_body
from .jobs import Finish
from .protocol import GenerationRequest, check_reasoning_effort, parse_chat
from .unhonoured import unsupported

_ROLES = ("user", "assistant", "system", "developer")


def _content_text(content: Any, where: str) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for i, part in enumerate(content):
            kind = part.get("type") if isinstance(part, dict) else None
            if kind in ("input_text", "output_text", "text") and isinstance(part.get("text"), str):
                out.append(part["text"])
            else:
                raise bad_request(f"{where}[{i}]: content parts of type {kind!r} are not "
                                  f"supported (text only).", f"{where}[{i}]",
                                  "unsupported_content")
        return "".join(out)
    raise bad_request(f"{where} must be a string or an array of content parts.", where,
                      "invalid_type")


def _messages(body: dict) -> list[dict]:
    """instructions and input as an OpenAI chat: function_call items become an assistant's
    tool_calls, function_call_output items tool messages."""
    out: list[dict] = []
    instructions = body.get("instructions")
    if instructions is not None:
        if not isinstance(instructions, str):
            raise bad_request("'instructions' must be a string.", "instructions", "invalid_type")
        out.append({"role": "system", "content": instructions})
    items = body.get("input")
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    if not isinstance(items, list) or not items:
        raise bad_request("'input' must be a string or a non-empty array of items.", "input",
                          "missing_required_parameter" if items is None else "invalid_value")
    for i, item in enumerate(items):
        where = f"input[{i}]"
        if not isinstance(item, dict):
            raise bad_request(f"{where} must be an object.", where, "invalid_type")
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role")
            if role not in _ROLES:
                raise bad_request(f"{where}.role must be one of {', '.join(_ROLES)}.",
                                  f"{where}.role", "invalid_value")
            out.append({"role": role, "content": _content_text(item.get("content"),
                                                               f"{where}.content")})
        elif kind == "function_call":
            call = {"id": item.get("call_id"), "type": "function",
                    "function": {"name": item.get("name"), "arguments": item.get("arguments")}}
            last = out[-1] if out else None
            if last is not None and last["role"] == "assistant":
                # the text and the calls after it, or parallel calls: one turn
                last.setdefault("tool_calls", []).append(call)
            else:
                out.append({"role": "assistant", "content": "", "tool_calls": [call]})
        elif kind == "function_call_output":
            output = item.get("output")
            out.append({"role": "tool", "tool_call_id": item.get("call_id"),
                        "content": output if isinstance(output, str)
                        else _content_text(output, f"{where}.output")})
        elif kind == "reasoning":
            continue  # earlier reasoning is never fed back
        else:
            raise bad_request(f"{where}: items of type {kind!r} are not supported.", where,
                              "unsupported_content")
    return out


def _tools(body: dict) -> dict:
    tools = body.get("tools")
    out: dict = {}
    if tools is not None:
        if not isinstance(tools, list):
            raise bad_request("'tools' must be an array.", "tools", "invalid_type")
        converted = []
        for i, t in enumerate(tools):
            if not isinstance(t, dict) or t.get("type") != "function":
                kind = t.get("type") if isinstance(t, dict) else None
                raise bad_request(f"tools[{i}]: only function tools are supported, not "
                                  f"{kind!r} (no built-in tools run here).", f"tools[{i}]",
                                  "unsupported_parameter")
            f = {k: t[k] for k in ("name", "description", "parameters") if k in t}
            converted.append({"type": "function", "function": f})
        out["tools"] = converted
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") == "function":
        out["tool_choice"] = {"type": "function", "function": {"name": choice.get("name")}}
    elif choice is not None:
        out["tool_choice"] = choice
    if "parallel_tool_calls" in body:
        out["parallel_tool_calls"] = body["parallel_tool_calls"]
    return out


def parse_responses(body: dict, model_ids: tuple[str, ...], strict: bool,
                    n_vocab: int) -> GenerationRequest:
    if body.get("previous_response_id") is not None:
        raise unsupported("previous_response_id", "responses are not stored: send the whole "
                                                  "conversation in 'input'")
    if body.get("conversation") is not None:
        raise unsupported("conversation", "conversations are not stored")
    if body.get("background") is True:
        raise unsupported("background", "responses are answered in the request")
    fmt = (body.get("text") or {}).get("format") if isinstance(body.get("text"), dict) else None
    constraint = response_format(fmt, "text.format")
    if body.get("top_logprobs"):
        raise unsupported("top_logprobs", "log-probabilities come with /v1/chat/completions")
    chat = {"messages": _messages(body), **_tools(body)}
    for name in ("model", "temperature", "top_p", "stream"):
        if name in body:
            chat[name] = body[name]
    if body.get("max_output_tokens") is not None:
        chat["max_tokens"] = body["max_output_tokens"]
        if isinstance(chat["max_tokens"], int) and chat["max_tokens"] < 1:
            raise bad_request("'max_output_tokens' must be at least 1.", "max_output_tokens",
                              "invalid_value")
    req = parse_chat(chat, model_ids, strict, n_vocab)
    req.constraint = constraint
    reasoning = body.get("reasoning")
    effort = reasoning.get("effort") if isinstance(reasoning, dict) else None
    if effort is not None:
        # agents send it whatever the model: honoured where the template reads it
        req.reasoning_effort = check_reasoning_effort(effort)
        req.reasoning_optional = True
    return req


class ResponseAnswer:
    """One request's response object, whole or as its stream of events."""

    def __init__(self, model: str, body: dict):
        self.model = model
        self.id = "resp_" + secrets.token_hex(12)
        self.created = int(time.time())
        self.body = body
        self.sequence = 0
        self.message_id = "msg_" + secrets.token_hex(12)
        self.output: list[dict] = []
        self.said = ""  # the message text so far
        self.text_open = False

    def _response(self, status: str, f: Finish | None = None) -> dict:
        b = self.body
        out = {
            "id": self.id, "object": "response", "created_at": self.created, "status": status,
            "error": None, "incomplete_details": None, "instructions": b.get("instructions"),
            "max_output_tokens": b.get("max_output_tokens"), "model": self.model,
            "output": self.output if status != "in_progress" else [],
            "parallel_tool_calls": b.get("parallel_tool_calls", True),
            "previous_response_id": None, "reasoning": {"effort": None, "summary": None},
            "store": False, "temperature": b.get("temperature"),
            "text": {"format": _text_format(b)}, "tool_choice": b.get("tool_choice", "auto"),
            "tools": b.get("tools", []), "top_p": b.get("top_p"), "truncation": "disabled",
            "usage": None, "metadata": b.get("metadata") or {},
        }
        if f is not None:
            out["usage"] = {"input_tokens": f.prompt_tokens,
                            "input_tokens_details": {"cached_tokens": f.cached_tokens},
                            "output_tokens": f.completion_tokens,
                            "output_tokens_details": {"reasoning_tokens": 0},
                            "total_tokens": f.prompt_tokens + f.completion_tokens}
            if f.reason == "length":
                out["incomplete_details"] = {"reason": "max_output_tokens"}
        return out

    def _message_item(self, status: str) -> dict:
        content = [] if status == "in_progress" else [
            {"type": "output_text", "text": self.said, "annotations": [], "logprobs": []}]
        return {"type": "message", "id": self.message_id, "status": status,
                "role": "assistant", "content": content}

    @staticmethod
    def _call_item(c, status: str = "completed") -> dict:
        return {"type": "function_call", "id": "fc_" + secrets.token_hex(12), "call_id": c.id,
                "name": c.name, "arguments": c.arguments if status == "completed" else "",
                "status": status}

    @staticmethod
    def _status(f: Finish) -> str:
        return "incomplete" if f.reason == "length" else "completed"

    def whole(self, text: str | None, f: Finish, logprobs=None, calls=None, *,
              reasoning: str | None = None) -> dict:
        self.said = text or ""
        if text:
            self.output.append(self._message_item("completed"))
        self.output += [self._call_item(c) for c in calls or ()]
        return self._response(self._status(f), f)

    def failure(self, message: str) -> dict:
        return error_body(message, "server_error")

    # -- streaming: (event name, data) pairs --------------------------------------------------

    def _event(self, kind: str, **data) -> tuple[str, dict]:
        event = {"type": kind, "sequence_number": self.sequence, **data}
        self.sequence += 1
        return kind, event

    def start(self, prompt_tokens: int) -> list[tuple[str, dict]]:
        return [self._event("response.created", response=self._response("in_progress")),
                self._event("response.in_progress", response=self._response("in_progress"))]

    def text(self, piece: str) -> list[tuple[str, dict]]:
        out = []
        where = {"item_id": self.message_id, "output_index": 0, "content_index": 0}
        if not self.text_open:
            self.text_open = True
            out += [self._event("response.output_item.added", output_index=0,
                                item=self._message_item("in_progress")),
                    self._event("response.content_part.added", **where, part={
                        "type": "output_text", "text": "", "annotations": []})]
        self.said += piece
        out.append(self._event("response.output_text.delta", **where, delta=piece,
                               logprobs=[]))
        return out

    def finish(self, f: Finish, calls: list) -> list[tuple[str, dict]]:
        out = []
        if self.text_open:
            where = {"item_id": self.message_id, "output_index": 0, "content_index": 0}
            item = self._message_item("completed")
            out += [self._event("response.output_text.done", **where, text=self.said,
                                logprobs=[]),
                    self._event("response.content_part.done", **where,
                                part=item["content"][0]),
                    self._event("response.output_item.done", output_index=0, item=item)]
            self.output.append(item)
        for c in calls:
            index = len(self.output)
            item = self._call_item(c)
            out += [self._event("response.output_item.added", output_index=index,
                                item={**item, "arguments": "", "status": "in_progress"}),
                    self._event("response.function_call_arguments.delta", item_id=item["id"],
                                output_index=index, delta=c.arguments),
                    self._event("response.function_call_arguments.done", item_id=item["id"],
                                output_index=index, arguments=c.arguments, name=c.name),
                    self._event("response.output_item.done", output_index=index, item=item)]
            self.output.append(item)
        status = self._status(f)
        out.append(self._event(f"response.{status}", response=self._response(status, f)))
        return out


def _text_format(body: dict) -> dict:
    """The request's text.format, as OpenAI echoes it (text when none was asked for)."""
    text = body.get("text")
    fmt = text.get("format") if isinstance(text, dict) else None
    return fmt if isinstance(fmt, dict) else {"type": "text"}


def request_echo(body: dict) -> dict:
    """The request fields a response repeats (tools as sent, sampling, limits, the text
    format)."""
    keys = ("instructions", "max_output_tokens", "temperature", "top_p", "tools",
            "tool_choice", "parallel_tool_calls", "metadata", "text")
    return {k: body[k] for k in keys if k in body and not (k == "tools" and body[k] is None)}

