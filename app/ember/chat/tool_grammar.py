"""The GBNF grammar of a forced tool call (tool_choice "required" or a named function): the
text that follows the format's forced_prefix, in that family's call syntax, with each
tool's arguments held to its JSON-schema `parameters` (json_schema.py's converter)."""
from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .json_schema import SchemaError, _Converter, gbnf_literal
from .tools import ToolFormat

__all__ = ["tool_call_gbnf"]


class _Rules:
    """One converter for every tool's schema, so that the rules of two tools never clash."""

    def __init__(self, tools: Sequence[Mapping]):
        self.conv = _Converter(True)
        self.params = {}
        self.params_root: Any = True
        for i, t in enumerate(tools):
            f = t["function"]
            self.params[f["name"]] = (i, f.get("parameters") or {"type": "object"})

    def _schema(self, schema: Any, i: int, where: str, hint: str) -> str:
        self.conv.root, self.conv.refs = self.params_root, {}
        try:
            return self.conv.expr(schema, "", hint)
        except SchemaError as e:
            raise SchemaError(f"tools[{i}].function.parameters{where}"
                              f"{'.' + e.path if e.path else ''}",
                              str(e).split(": ", 1)[-1]) from None

    def args(self, name: str) -> str:
        """The rule of name's arguments as a JSON object."""
        i, schema = self.params[name]
        self.params_root = schema  # $ref "#/..." resolves inside the tool's own parameters
        return self.conv.rule(f"{name}-args", self._schema(schema, i, "", f"{name}-args"))

    def xml_params(self, name: str, pair: Callable[[str, str], str]) -> str:
        """name's arguments as one `pair(key literal, value)` per property, in the schema's
        order (required ones always, the others maybe): the XML-like families, whose string
        values are bare text and other values JSON."""
        i, schema = self.params[name]
        self.params_root = schema
        props = schema.get("properties") or {}
        required = schema.get("required") or []
        parts = []
        for key, sub in props.items():
            value = self._xml_value(sub, i, key, f"{name}-{key}")
            item = pair(gbnf_literal(key), value)
            parts.append(item if key in required else f"( {item} )?")
        return self.conv.rule(f"{name}-params", " ".join(parts) or '""')

    def _xml_value(self, sub: Any, i: int, key: str, hint: str) -> str:
        if isinstance(sub, dict) and sub.get("type") == "string":
            if "enum" in sub:
                return self.conv.rule(hint, " | ".join(
                    gbnf_literal(str(v)) for v in sub["enum"]))
            limits = sorted(k for k in sub if k in ("pattern", "format", "minLength",
                                                    "maxLength", "const"))
            if limits:
                raise SchemaError(f"tools[{i}].function.parameters.properties.{key}."
                                  f"{limits[0]}", "cannot be enforced on this model family's "
                                  "bare-text argument values (only enum can)")
            return self.conv.rule("xml-text", "[^<]*")
        return self._schema(sub, i, f".properties.{key}", hint)

    def gbnf(self, root: str) -> str:
        lines = [f"root ::= {root}"] + [f"{k} ::= {v}" for k, v in self.conv.rules.items()]
        return "\n".join(lines) + "\n"


def _one_of(rules: _Rules, names: Sequence[str], call: Callable[[str], str]) -> str:
    return rules.conv.rule("any-call", " | ".join(f"( {call(n)} )" for n in names))


def _json_name(name: str) -> str:
    return gbnf_literal(json.dumps(name))


def tool_call_gbnf(fmt: ToolFormat, tools: Sequence[Mapping], name: str | None,
                   parallel: bool = True) -> str | None:
    """The grammar (root "root") of the reply after fmt.forced_prefix(name): one call of
    name, or with name None one call of any tool (several when parallel, in the families
    that write several). None: the format is not known here. Raises SchemaError for a tool
    schema the converter cannot enforce."""
    rules = _Rules(tools)
    names = [name] if name is not None else list(rules.params)
    many = parallel and name is None
    kind = fmt.name

    if kind == "hermes":
        def call(n):
            return f'"{{\\"name\\": " {_json_name(n)} ", \\"arguments\\": " {rules.args(n)} "}}"'
        if name is not None:
            return rules.gbnf(f'{rules.args(name)} "}}\\n</tool_call>"')
        one = _one_of(rules, names, call)
        more = f' ( "\\n<tool_call>\\n" {one} "\\n</tool_call>" )*' if many else ""
        return rules.gbnf(f'{one} "\\n</tool_call>"{more}')

    if kind in ("qwen-xml", "glm"):
        if kind == "qwen-xml":
            def params(n):
                return rules.xml_params(n, lambda k, v: f'"<parameter=" {k} ">\\n" {v} '
                                                        f'"\\n</parameter>\\n"')
            body_end, head, opener = '"</function>\\n</tool_call>"', '">\\n"', \
                '"\\n<tool_call>\\n<function="'
        else:
            def params(n):
                return rules.xml_params(n, lambda k, v: f'"<arg_key>" {k} "</arg_key>\\n'
                                                        f'<arg_value>" {v} "</arg_value>\\n"')
            body_end, head, opener = '"</tool_call>"', '"\\n"', '"\\n<tool_call>"'
        if name is not None:  # Qwen's prefix ends in the function's tag, GLM's in its name
            named_head = "" if kind == "qwen-xml" else head
            return rules.gbnf(f"{named_head} {params(name)} {body_end}")
        one = _one_of(rules, names, lambda n: f"{gbnf_literal(n)} {head} {params(n)} "
                                              f"{body_end}")
        return rules.gbnf(f"{one} ( {opener} {one} )*" if many else one)

    def json_list(call, sep: str, close: str, named_tail: str) -> str:
        """`[call, call...]close` families; named: the rest of the one call after its
        arguments' opening (named_tail after the arguments)."""
        if name is not None:
            return rules.gbnf(f'{rules.args(name)} {named_tail}')
        one = _one_of(rules, names, call)
        more = f" ( {gbnf_literal(sep)} {one} )*" if many else ""
        return rules.gbnf(f'"[" {one}{more} {close}')

    def name_arguments(n):
        return f'"{{\\"name\\": " {_json_name(n)} ", \\"arguments\\": " {rules.args(n)} "}}"'

    if kind == "tool-calls-json":
        return json_list(name_arguments, ", ", '"]</tool_calls>"', '"}]</tool_calls>"')

    if kind == "command-r":
        def action(n):
            return (f'"{{\\"tool_call_id\\": \\"" [0-9]{{1,3}} "\\", \\"tool_name\\": " '
                    f'{_json_name(n)} ", \\"parameters\\": " {rules.args(n)} "}}"')
        if name is not None:
            return rules.gbnf(f'{rules.args(name)} "}}\\n]"')
        one = _one_of(rules, names, action)
        more = f' ( ",\\n    " {one} )*' if many else ""
        return rules.gbnf(f'"[\\n    " {one}{more} "\\n]"')

    if kind == "mistral":
        if "[ARGS]" in fmt.source:  # [TOOL_CALLS]NAME[ARGS]{...}, once per call
            if name is not None:
                return rules.gbnf(f'"[ARGS]" {rules.args(name)}')
            one = _one_of(rules, names, lambda n: f'{gbnf_literal(n)} "[ARGS]" {rules.args(n)}')
            return rules.gbnf(f'{one} ( "[TOOL_CALLS]" {one} )*' if many else one)
        return json_list(name_arguments, ", ", '"]"', '"}]"')

    if kind == "llama3":  # one call a turn (the 3.x templates render one)
        if name is not None:
            return rules.gbnf(f'{rules.args(name)} "}}"')
        one = _one_of(rules, names, lambda n: f'{gbnf_literal(json.dumps(n)[1:])} '
                                              f'", \\"parameters\\": " {rules.args(n)} "}}"')
        return rules.gbnf(one)

    if kind == "harmony":  # one commentary message; <|call|> (a stop) ends it
        if name is not None:
            return rules.gbnf(rules.args(name))
        one = _one_of(rules, names, lambda n: f'{gbnf_literal(n)} " <|constrain|>json'
                                              f'<|message|>" {rules.args(n)}')
        return rules.gbnf(one)

    return None
