"""Tool calls in model output: which format a chat template's family writes them in (Qwen and
Hermes' <tool_call> JSON, Qwen3-Coder's <tool_call> XML, GLM's arg_key pairs, <tool_calls>
JSON, Mistral's [TOOL_CALLS], Command R's actions, Llama 3.x JSON), parsing a reply into text and calls, the text that makes a reply start a call
(tool_choice "required" or a named function), and a stream filter that holds calls back."""
from __future__ import annotations

import json
import re
import secrets
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .template import ChatTemplate, ChatTemplateError

__all__ = ["TOOL_FORMATS", "ToolCall", "ToolCallStream", "ToolFormat", "ToolSupport",
           "tool_support"]


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: str  # a JSON object, as OpenAI sends it
    id: str


def _alnum_id() -> str:
    # Mistral's templates refuse any tool-call id but nine letters and digits
    alphabet = string.ascii_letters + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(9))


def _call_id() -> str:
    return "call_" + secrets.token_hex(12)


def _arguments_json(args: Any) -> str | None:
    """A call's arguments as a JSON object string; None when they are not an object."""
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            return None
    if not isinstance(args, dict):
        return None
    return json.dumps(args, ensure_ascii=False)


def _json_call(obj: Any, args_keys: Sequence[str], new_id) -> ToolCall | None:
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str) or not obj["name"]:
        return None
    for key in args_keys:
        if key in obj:
            args = _arguments_json(obj[key])
            break
    else:
        args = "{}"
    if args is None:
        return None
    call_id = obj.get("id")
    return ToolCall(obj["name"], args, call_id if isinstance(call_id, str) and call_id
                    else new_id())


def _properties(tools: Sequence[Mapping], name: str) -> dict:
    """The parameters' schemas of the tool called name ({} if it is not among tools)."""
    for t in tools:
        f = t.get("function", {})
        if f.get("name") == name and isinstance(f.get("parameters"), dict):
            return f["parameters"].get("properties") or {}
    return {}


def _json_values(text: str) -> list[Any] | None:
    """Consecutive JSON values in text, separated by whitespace or ';' (Llama 3.x writes one
    call, some fine-tunes several); None unless the whole text is such values."""
    decoder = json.JSONDecoder()
    out, i = [], 0
    while True:
        while i < len(text) and (text[i].isspace() or text[i] == ";"):
            i += 1
        if i == len(text):
            return out or None
        try:
            value, i = decoder.raw_decode(text, i)
        except ValueError:
            return None
        out.append(value)


class ToolFormat:
    """One family's way of writing calls. parse() splits a whole reply into its text and its
    calls; openers are the strings a call starts with (a stream holds them back)."""

    name = ""
    label = ""
    openers: tuple[str, ...] = ()
    new_id = staticmethod(_call_id)

    def __init__(self, source: str = ""):
        self.source = source

    @classmethod
    def detect(cls, source: str) -> bool:
        raise NotImplementedError

    def parse(self, text: str, tools: Sequence[Mapping] = ()) -> tuple[str, list[ToolCall]]:
        raise NotImplementedError

    def forced_prefix(self, name: str | None) -> str:
        """What the reply is made to start with so that it is a call (of name, if given)."""
        raise NotImplementedError

    def call_start(self, text: str) -> int | None:
        """Where in text (the reply so far) a call starts, if one does."""
        found = [i for i in (text.find(o) for o in self.openers) if i != -1]
        return min(found) if found else None

    def may_start(self, text: str) -> int:
        """How many characters at the end of text might be the beginning of an opener."""
        for n in range(min(len(text), max((len(o) for o in self.openers), default=0)), 0, -1):
            if any(o.startswith(text[-n:]) for o in self.openers):
                return n
        return 0


class HermesFormat(ToolFormat):
    """<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>, one block per call:
    Qwen2.5, Hermes 2 Pro / 3, MiMo, Granite 4, Reka."""

    name, label = "hermes", "Hermes/Qwen <tool_call> JSON"
    openers = ("<tool_call>",)
    _block = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL)

    @classmethod
    def detect(cls, source: str) -> bool:
        # Qwen3-Coder's XML, GLM's arg_key pairs and MiniMax's invoke tags share the tag
        return "<tool_call>" in source and not any(
            other in source for other in ("<function=", "<arg_key>", "<invoke"))

    def _call(self, body: str, tools) -> ToolCall | None:
        values = _json_values(body.strip())
        return _json_call(values[0], ("arguments", "parameters"), self.new_id) \
            if values and len(values) == 1 else None

    def parse(self, text, tools=()):
        calls, content, last = [], [], 0
        for m in self._block.finditer(text):
            call = self._call(m.group(1), tools)
            if call is None:
                return text, []  # not a call after all: the reply stays text
            content.append(text[last:m.start()])
            calls.append(call)
            last = m.end()
        content.append(text[last:])
        return "".join(content), calls

    def forced_prefix(self, name):
        return "<tool_call>\n" if name is None else \
            f'<tool_call>\n{{"name": {json.dumps(name)}, "arguments": '


class QwenXmlFormat(HermesFormat):
    """<tool_call>\\n<function=NAME>\\n<parameter=KEY>\\nVALUE\\n</parameter>...</function>
    \\n</tool_call>: Qwen3-Coder, Qwen3.5, StepFun. Values are text; the tool's schema says
    which are JSON (numbers, booleans, objects)."""

    name, label = "qwen-xml", "Qwen3-Coder <tool_call> XML"
    _function = re.compile(r"\s*<function=([^>\s]+)>(.*?)(?:</function>\s*|\Z)", re.DOTALL)
    _parameter = re.compile(r"<parameter=([^>\s]+)>\n?(.*?)\n?(?:</parameter>|\Z)", re.DOTALL)

    @classmethod
    def detect(cls, source: str) -> bool:
        return "<tool_call>" in source and "<function=" in source

    @staticmethod
    def _value(text: str, schema: Any) -> Any:
        kind = schema.get("type") if isinstance(schema, dict) else None
        if kind == "string":
            return text
        if kind == "boolean" and text.lower() in ("true", "false"):
            return text.lower() == "true"
        try:
            return json.loads(text)
        except ValueError:
            return text

    def _call(self, body, tools):
        m = self._function.match(body)
        if m is None or body[m.end():].strip():
            return None
        name = m.group(1)
        props = _properties(tools, name)
        args = {k: self._value(v, props.get(k)) for k, v in self._parameter.findall(m.group(2))}
        return ToolCall(name, json.dumps(args, ensure_ascii=False), self.new_id())

    def forced_prefix(self, name):
        return "<tool_call>\n<function=" if name is None else \
            f"<tool_call>\n<function={name}>\n"


class GlmFormat(ToolFormat):
    """<tool_call>NAME<arg_key>KEY</arg_key><arg_value>VALUE</arg_value>...</tool_call>, with
    or without line breaks between: GLM-4.5 / 4.6, Ling, Laguna. Values typed by the schema."""

    name, label = "glm", "GLM <tool_call> arg_key/arg_value"
    openers = ("<tool_call>",)
    _block = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL)
    _head = re.compile(r"\s*([^\s<]+)\s*")
    _pair = re.compile(r"<arg_key>(.*?)</arg_key>\s*<arg_value>(.*?)</arg_value>\s*", re.DOTALL)

    @classmethod
    def detect(cls, source: str) -> bool:
        return "<tool_call>" in source and "<arg_key>" in source

    def _call(self, body: str, tools) -> ToolCall | None:
        m = self._head.match(body)
        if m is None:
            return None
        name, pos, args = m.group(1), m.end(), {}
        props = _properties(tools, name)
        while pos < len(body):
            pair = self._pair.match(body, pos)
            if pair is None:
                return None
            key = pair.group(1).strip()
            args[key] = QwenXmlFormat._value(pair.group(2), props.get(key))
            pos = pair.end()
        return ToolCall(name, json.dumps(args, ensure_ascii=False), self.new_id())

    parse = HermesFormat.parse

    def forced_prefix(self, name):
        return "<tool_call>" if name is None else f"<tool_call>{name}"


class ToolCallsJsonFormat(ToolFormat):
    """<tool_calls>[{"name", "arguments"}, ...]</tool_calls> (Apriel) or one JSON object a line
    inside <tool_calls> (MiniMax-M1)."""

    name, label = "tool-calls-json", "<tool_calls> JSON"
    openers = ("<tool_calls>",)

    @classmethod
    def detect(cls, source: str) -> bool:
        return "<tool_calls>" in source

    def parse(self, text, tools=()):
        start = text.find("<tool_calls>")
        if start == -1:
            return text, []
        end = text.find("</tool_calls>", start)
        body = text[start + len("<tool_calls>"):end if end != -1 else len(text)]
        values = _json_values(body.strip())
        objects = [o for v in values or [] for o in (v if isinstance(v, list) else [v])]
        calls = [_json_call(o, ("arguments", "parameters"), self.new_id) for o in objects]
        if not calls or None in calls:
            return text, []
        after = text[end + len("</tool_calls>"):] if end != -1 else ""
        return text[:start] + after, calls

    def forced_prefix(self, name):
        if name is None:
            return "<tool_calls>"
        return f'<tool_calls>[{{"name": {json.dumps(name)}, "arguments": '


class CommandRFormat(ToolFormat):
    """<|START_ACTION|>[{"tool_call_id", "tool_name", "parameters"}, ...]<|END_ACTION|>:
    Command R7B."""

    name, label = "command-r", "Command R <|START_ACTION|>"
    openers = ("<|START_ACTION|>",)

    @classmethod
    def detect(cls, source: str) -> bool:
        return "<|START_ACTION|>" in source

    def parse(self, text, tools=()):
        start = text.find("<|START_ACTION|>")
        if start == -1:
            return text, []
        end = text.find("<|END_ACTION|>", start)
        body = text[start + len("<|START_ACTION|>"):end if end != -1 else len(text)]
        values = _json_values(body.strip())
        if not values or not isinstance(values[0], list) or len(values) != 1:
            return text, []
        calls = []
        for o in values[0]:
            if not isinstance(o, dict):
                return text, []
            call = _json_call({"name": o.get("tool_name"), "id": None, **o},
                              ("parameters", "arguments"), self.new_id)
            if call is None:
                return text, []
            calls.append(call)
        after = text[end + len("<|END_ACTION|>"):] if end != -1 else ""
        return (text[:start] + after, calls) if calls else (text, [])

    def forced_prefix(self, name):
        if name is None:
            return "<|START_ACTION|>"
        return (f'<|START_ACTION|>[\n    {{"tool_call_id": "0", "tool_name": {json.dumps(name)}, '
                f'"parameters": ')


class Llama3Format(ToolFormat):
    """The whole reply is {"name": ..., "parameters": {...}} (Llama 3.1-3.3's JSON tool
    calling), maybe after <|python_tag|>."""

    name, label = "llama3", "Llama 3.x JSON"
    openers = ("<|python_tag|>",)

    @classmethod
    def detect(cls, source: str) -> bool:
        return "<|start_header_id|>" in source and '"parameters"' in source

    def call_start(self, text):
        stripped = text.lstrip()
        if stripped.startswith("{"):
            return len(text) - len(stripped)
        return super().call_start(text)

    def may_start(self, text):
        if not text.strip():
            return len(text)  # a reply that has said nothing yet may still open with "{"
        return super().may_start(text)

    def parse(self, text, tools=()):
        body = text.strip()
        start = body.find("<|python_tag|>")
        before = ""
        if start != -1:
            before, body = body[:start], body[start + len("<|python_tag|>"):]
        elif not body.startswith("{"):
            return text, []
        values = _json_values(body)
        calls = [_json_call(v, ("parameters", "arguments"), self.new_id) for v in values or []]
        if not calls or None in calls:
            return text, []
        return before, calls

    def forced_prefix(self, name):
        return '{"name": "' if name is None else f'{{"name": {json.dumps(name)}, "parameters": '


class MistralFormat(ToolFormat):
    """[TOOL_CALLS][{"name": ..., "arguments": {...}, "id": ...}] (Mistral Nemo and older), or
    [TOOL_CALLS]NAME[CALL_ID]ID[ARGS]{...} once per call (Mistral Small 3.2, Devstral)."""

    name, label = "mistral", "Mistral [TOOL_CALLS]"
    openers = ("[TOOL_CALLS]",)
    new_id = staticmethod(_alnum_id)
    _named = re.compile(r"\s*([^\[\]\s{]+)\s*(?:\[CALL_ID\]\s*([A-Za-z0-9_-]+)\s*)?\[ARGS\]")

    @classmethod
    def detect(cls, source: str) -> bool:
        return "[TOOL_CALLS]" in source

    def _calls(self, body: str) -> list[ToolCall] | None:
        body = body.strip()
        if body.startswith("["):
            values = _json_values(body)
            if not values or not all(isinstance(v, list) for v in values):
                return None
            calls = [_json_call(o, ("arguments", "parameters"), self.new_id)
                     for v in values for o in v]
            return None if not calls or None in calls else calls
        calls = []
        decoder = json.JSONDecoder()
        for part in body.split("[TOOL_CALLS]"):
            m = self._named.match(part)
            if m is None:
                return None
            try:
                args, end = decoder.raw_decode(part, m.end())
            except ValueError:
                return None
            if part[end:].strip() or not isinstance(args, dict):
                return None
            calls.append(ToolCall(m.group(1), json.dumps(args, ensure_ascii=False),
                                  m.group(2) or self.new_id()))
        return calls

    def parse(self, text, tools=()):
        start = text.find("[TOOL_CALLS]")
        if start == -1:
            return text, []
        calls = self._calls(text[start + len("[TOOL_CALLS]"):])
        return (text, []) if calls is None else (text[:start], calls)

    def forced_prefix(self, name):
        if name is None:
            return "[TOOL_CALLS]"
        if "[ARGS]" in self.source:
            return f"[TOOL_CALLS]{name}"  # the model goes on with [CALL_ID]... or [ARGS]
        return f'[TOOL_CALLS][{{"name": {json.dumps(name)}, "arguments": '


class LfmFormat(ToolFormat):
    """<|tool_call_start|>[name(key='value', n=3), other(...)]<|tool_call_end|>: a Python list
    of calls with keyword arguments (LFM2, LFM2.5; their templates write string values in
    single quotes and objects as JSON). Read with the ast module: only literals (and JSON's
    true / false / null) are accepted as values, nothing is evaluated."""

    name, label = "lfm", "LFM2 <|tool_call_start|> Python calls"
    openers = ("<|tool_call_start|>",)
    _names = {"true": True, "false": False, "null": None, "True": True, "False": False, "None": None}

    @classmethod
    def detect(cls, source: str) -> bool:
        # LFM2.5-Instruct's template lists the tools but renders no calls of its own
        return "<|tool_call_start|>" in source or "<|tool_list_start|>" in source or \
            ("List of tools: [" in source and "<|im_start|>" in source)

    @classmethod
    def _value(cls, node):
        import ast
        if isinstance(node, ast.Constant) and not isinstance(node.value, bytes):
            return node.value
        if isinstance(node, ast.Name) and node.id in cls._names:
            return cls._names[node.id]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)) \
                and isinstance(node.operand, ast.Constant) and isinstance(node.operand.value, (int, float)) \
                and not isinstance(node.operand.value, bool):
            return -node.operand.value if isinstance(node.op, ast.USub) else node.operand.value
        if isinstance(node, (ast.List, ast.Tuple)):
            return [cls._value(e) for e in node.elts]
        if isinstance(node, ast.Dict):
            out = {}
            for k, v in zip(node.keys, node.values):
                key = cls._value(k) if k is not None else None
                if not isinstance(key, str):
                    raise ValueError("a key that is not a string")
                out[key] = cls._value(v)
            return out
        raise ValueError("not a literal")

    def _calls(self, body: str) -> list[ToolCall] | None:
        import ast
        try:
            tree = ast.parse(body.strip(), mode="eval").body
        except (SyntaxError, ValueError, RecursionError):
            return None
        items = tree.elts if isinstance(tree, (ast.List, ast.Tuple)) else [tree]
        calls = []
        for c in items:
            if not isinstance(c, ast.Call) or c.args:
                return None
            func = c.func
            parts = []
            while isinstance(func, ast.Attribute):  # a dotted name (namespace.tool)
                parts.append(func.attr)
                func = func.value
            if not isinstance(func, ast.Name):
                return None
            name = ".".join([func.id, *reversed(parts)])
            try:
                args = {k.arg: self._value(k.value) for k in c.keywords if k.arg is not None}
            except (ValueError, RecursionError):
                return None
            if len(args) != len(c.keywords):
                return None  # **kwargs
            calls.append(ToolCall(name, json.dumps(args, ensure_ascii=False), self.new_id()))
        return calls or None

    def parse(self, text, tools=()):
        start = text.find("<|tool_call_start|>")
        if start == -1:
            return text, []
        end = text.find("<|tool_call_end|>", start)
        body = text[start + len("<|tool_call_start|>"):end if end != -1 else len(text)]
        calls = self._calls(body)
        if calls is None:
            return text, []
        after = text[end + len("<|tool_call_end|>"):] if end != -1 else ""
        return text[:start] + after, calls

    def forced_prefix(self, name):
        return "<|tool_call_start|>[" if name is None else f"<|tool_call_start|>[{name}("


# the order matters: a template that writes <tool_call> around XML is not Hermes', nor one
# whose instructions mention <tool_call> but whose calls go in <tool_calls> (Apriel 1.5)
TOOL_FORMATS: tuple[type[ToolFormat], ...] = (QwenXmlFormat, GlmFormat, ToolCallsJsonFormat,
                                              HermesFormat, MistralFormat, CommandRFormat,
                                              LfmFormat, Llama3Format)

_PROBE_NAME = "ember_probe_tool_name"
_PROBE_TOOLS = [{"type": "function", "function": {
    "name": _PROBE_NAME, "description": "A probe.",
    "parameters": {"type": "object", "properties": {"x": {"type": "string"}}}}}]


@dataclass(frozen=True)
class ToolSupport:
    """What a model's template does with tools: renders them into the prompt (takes_tools),
    and in which format its replies' calls are parsed (format; None: not known here)."""

    takes_tools: bool
    format: ToolFormat | None

    @property
    def usable(self) -> bool:
        return self.takes_tools and self.format is not None


def tool_support(template: ChatTemplate) -> ToolSupport:
    """Probes the template: does a tool given to it reach the prompt? A built-in fallback
    format (ChatML...) never does."""
    if template.is_fallback:
        return ToolSupport(False, None)
    try:
        text = template.render([{"role": "user", "content": "Hi"}], True, tools=_PROBE_TOOLS)
    except ChatTemplateError:
        return ToolSupport(False, None)
    if _PROBE_NAME not in text:
        return ToolSupport(False, None)
    from .harmony import HarmonyFormat  # here: harmony.py builds on this module
    for fmt in (HarmonyFormat, *TOOL_FORMATS):
        if fmt.detect(template.source):
            return ToolSupport(True, fmt(template.source))
    return ToolSupport(True, None)


class ToolCallStream:
    """Text of a streamed reply in, the text that is surely not part of a call out; the
    calls come at the end (finish). prefix: what the prompt made the reply start with (a
    forced call's opening), which the parser sees but the client was never sent."""

    def __init__(self, fmt: ToolFormat, tools: Sequence[Mapping], prefix: str = ""):
        self.fmt = fmt
        self.tools = tools
        self.text = prefix
        self.prefix = len(prefix)
        self.sent = len(prefix)  # characters of self.text given out (the prefix counts)
        self.in_call = bool(prefix) and fmt.call_start(prefix) is not None

    def feed(self, piece: str) -> str:
        self.text += piece
        if self.in_call:
            return ""
        start = self.fmt.call_start(self.text[self.prefix:])
        if start is not None:
            self.in_call = True
            end = self.prefix + start
        else:
            end = len(self.text) - self.fmt.may_start(self.text[self.prefix:])
        out = self.text[self.sent:end] if end > self.sent else ""
        self.sent = max(self.sent, end)
        return out

    def finish(self) -> tuple[str, list[ToolCall]]:
        """(the text still to send, the calls). A call that does not parse is sent as text."""
        content, calls = self.fmt.parse(self.text, self.tools)
        if not calls:
            return self.text[self.sent:], []
        given = self.text[self.prefix:self.sent]
        rest = content[len(given):] if content.startswith(given) else ""
        return (rest if rest.strip() else ""), calls  # not the line breaks between calls

    def whole(self) -> tuple[str | None, list[ToolCall]]:
        """A whole answer's message: its text (None when it is only calls) and calls."""
        content, calls = self.fmt.parse(self.text, self.tools)
        if not calls:
            return self.text[self.prefix:], []
        return (content.strip() or None), calls
