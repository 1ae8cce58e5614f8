"""The tool fields of a chat request, checked: `tools`, `tool_choice`, `parallel_tool_calls`,
and the tool parts of messages (an assistant's `tool_calls`, a `tool` message's result),
turned into what chat templates expect (arguments as objects, each result named)."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from .errors import bad_request

_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,128}")  # OpenAI allows 64, Anthropic 128 (MCP names)


@dataclass
class ToolRequest:
    tools: list[dict]  # OpenAI's shape, as templates take them
    choice: str  # "auto", "none", "required" or "function" (then `name`)
    name: str | None = None
    parallel: bool = True


def _kind(v: Any) -> str:
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "array",
            dict: "object", type(None): "null"}.get(type(v), type(v).__name__)


def _tool(t: Any, i: int) -> dict:
    where = f"tools[{i}]"
    if not isinstance(t, dict):
        raise bad_request(f"{where} must be an object, not {_kind(t)}.", where, "invalid_type")
    if t.get("type") != "function":
        raise bad_request(f"{where}.type must be 'function', not {t.get('type')!r}.",
                          f"{where}.type", "invalid_value")
    f = t.get("function")
    if not isinstance(f, dict):
        raise bad_request(f"{where}.function must be an object.", f"{where}.function",
                          "invalid_type")
    name = f.get("name")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise bad_request(f"{where}.function.name must be 1 to 128 letters, digits, '_', '.' "
                          f"or '-', not {name!r}.", f"{where}.function.name", "invalid_value")
    desc = f.get("description")
    if desc is not None and not isinstance(desc, str):
        raise bad_request(f"{where}.function.description must be a string.",
                          f"{where}.function.description", "invalid_type")
    params = f.get("parameters")
    if params is not None:
        if not isinstance(params, dict):
            raise bad_request(f"{where}.function.parameters must be a JSON schema object, not "
                              f"{_kind(params)}.", f"{where}.function.parameters",
                              "invalid_type")
        if params.get("type", "object") != "object":
            raise bad_request(f"{where}.function.parameters must describe an object (type "
                              f"'object'), not {params.get('type')!r}.",
                              f"{where}.function.parameters", "invalid_value")
        props = params.get("properties")
        if props is not None and not isinstance(props, dict):
            raise bad_request(f"{where}.function.parameters.properties must be an object.",
                              f"{where}.function.parameters", "invalid_value")
    # templates read these without asking whether they are there (gpt-oss' reads
    # tool.description, most walk parameters.properties): always given, empty if need be
    params = {"type": "object", **(params or {})}
    params.setdefault("properties", {})
    return {"type": "function",
            "function": {"name": name, "description": desc or "", "parameters": params}}


def parse_tools(body: dict) -> ToolRequest | None:
    """None when the request has no tools (tool_choice alone is then a 400, as OpenAI's)."""
    tools = body.get("tools")
    choice = body.get("tool_choice")
    parallel = body.get("parallel_tool_calls")
    if parallel is not None and not isinstance(parallel, bool):
        raise bad_request("'parallel_tool_calls' must be a boolean.", "parallel_tool_calls",
                          "invalid_type")
    if tools is None or tools == []:
        if choice not in (None, "none", "auto"):
            raise bad_request("'tool_choice' needs 'tools'.", "tool_choice", "invalid_value")
        return None
    if not isinstance(tools, list):
        raise bad_request(f"'tools' must be an array, not {_kind(tools)}.", "tools",
                          "invalid_type")
    checked = [_tool(t, i) for i, t in enumerate(tools)]
    names = [t["function"]["name"] for t in checked]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise bad_request(f"'tools' names the function '{dup}' twice.", "tools",
                          "invalid_value")
    req = ToolRequest(checked, "auto", parallel=parallel is not False)
    if choice is None or choice in ("auto", "none", "required"):
        req.choice = choice or "auto"
        return req
    if isinstance(choice, dict) and choice.get("type") == "function" \
            and isinstance(choice.get("function"), dict):
        name = choice["function"].get("name")
        if name not in names:
            raise bad_request(f"'tool_choice' names the function {name!r}, which is not in "
                              f"'tools' ({', '.join(names)}).", "tool_choice", "invalid_value")
        req.choice, req.name = "function", name
        return req
    raise bad_request("'tool_choice' must be 'none', 'auto', 'required' or {\"type\": "
                      "\"function\", \"function\": {\"name\": ...}}.", "tool_choice",
                      "invalid_value")


def assistant_tool_calls(calls: Any, i: int) -> list[dict]:
    """An assistant message's tool_calls as templates render them: arguments an object."""
    where = f"messages[{i}].tool_calls"
    if not isinstance(calls, list):
        raise bad_request(f"{where} must be an array.", where, "invalid_type")
    out = []
    for j, c in enumerate(calls):
        f = c.get("function") if isinstance(c, dict) else None
        if not isinstance(f, dict) or not isinstance(f.get("name"), str):
            raise bad_request(f"{where}[{j}] must be {{\"type\": \"function\", \"function\": "
                              f"{{\"name\", \"arguments\"}}}}.", f"{where}[{j}]", "invalid_type")
        args = f.get("arguments", "{}")
        if isinstance(args, str):
            try:
                args = json.loads(args) if args.strip() else {}
            except ValueError:
                raise bad_request(f"{where}[{j}].function.arguments is not valid JSON.",
                                  f"{where}[{j}].function.arguments", "invalid_value") from None
        if not isinstance(args, dict):
            raise bad_request(f"{where}[{j}].function.arguments must be a JSON object.",
                              f"{where}[{j}].function.arguments", "invalid_value")
        call_id = c.get("id")
        if call_id is not None and not isinstance(call_id, str):
            raise bad_request(f"{where}[{j}].id must be a string.", f"{where}[{j}].id",
                              "invalid_type")
        out.append({"id": call_id or f"call_{i}_{j}", "type": "function",
                    "function": {"name": f["name"], "arguments": args}})
    return out


def name_tool_results(messages: list[dict]) -> None:
    """Gives each tool result the name of the call it answers (templates that print it)."""
    names: dict[str, str] = {}
    for m in messages:
        for c in m.get("tool_calls") or ():
            names[c["id"]] = c["function"]["name"]
        if m["role"] == "tool" and "name" not in m and m.get("tool_call_id") in names:
            m["name"] = names[m["tool_call_id"]]
