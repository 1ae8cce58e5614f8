"""The request fields that constrain a reply's text (OpenAI's response_format, llama-server's
grammar and json_schema, /v1/responses' text.format) as one GBNF grammar, or a 400 naming
the field."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..chat.json_schema import JSON_OBJECT_GBNF, SchemaError, schema_to_gbnf
from ..engine import EmberError, Grammar, Model
from .errors import ApiError, bad_request


@dataclass(frozen=True)
class Constraint:
    gbnf: str
    param: str  # the request field it came from, which its errors name


def _from_schema(schema: Any, param: str) -> Constraint:
    try:
        return Constraint(schema_to_gbnf(schema), param)
    except SchemaError as e:
        raise bad_request(f"'{param}' cannot be enforced: {e}", param, "invalid_value") from None


def response_format(fmt: Any, param: str = "response_format") -> Constraint | None:
    """OpenAI's {"type": "text" | "json_object" | "json_schema", "json_schema": {"name",
    "schema", "strict"}}; llama-server's "schema" beside the type is taken too. /v1/responses
    puts name and schema beside the type (text.format)."""
    if fmt is None:
        return None
    kind = fmt.get("type") if isinstance(fmt, dict) else None
    if not isinstance(kind, str):
        raise bad_request(f"'{param}' must be an object with a 'type'.", param, "invalid_type")
    if kind == "text":
        return None
    if kind == "json_object":
        if fmt.get("schema") is not None:
            return _from_schema(fmt["schema"], param)
        return Constraint(JSON_OBJECT_GBNF, param)
    if kind == "json_schema":
        spec = fmt.get("json_schema")
        if spec is None and "schema" in fmt:
            spec = fmt  # llama-server's and /v1/responses' flat shape
        if not isinstance(spec, dict):
            raise bad_request(f"'{param}.json_schema' must be an object with the 'schema'.",
                              param, "invalid_type")
        if "schema" not in spec:
            raise bad_request(f"'{param}.json_schema.schema' is required.", param,
                              "missing_required_parameter")
        return _from_schema(spec["schema"], param)
    raise bad_request(f"'{param}.type' must be text, json_object or json_schema, not "
                      f"'{kind}'.", param, "invalid_value")


def request_constraint(body: dict) -> Constraint | None:
    """The one constraint a chat or completion body asks for (None: free text)."""
    found = []
    grammar = body.get("grammar")
    if grammar is not None and grammar != "":
        if not isinstance(grammar, str):
            raise bad_request("'grammar' must be a string of GBNF rules.", "grammar",
                              "invalid_type")
        found.append(Constraint(grammar, "grammar"))
    schema = body.get("json_schema")
    if schema is not None and schema != {}:
        found.append(_from_schema(schema, "json_schema"))
    fmt = response_format(body.get("response_format"))
    if fmt is not None:
        found.append(fmt)
    if len(found) > 1:
        raise bad_request(f"Give one of 'grammar', 'json_schema' and 'response_format', not "
                          f"{' and '.join(repr(c.param) for c in found)}.", found[1].param,
                          "invalid_value")
    return found[0] if found else None


def compile_grammar(constraint: Constraint, model: Model) -> Grammar:
    """The engine's grammar for a constraint; a grammar the engine refuses (syntax, an
    undefined or left-recursive rule) is a 400 with the engine's line and column."""
    try:
        return Grammar(constraint.gbnf, model)
    except EmberError as e:
        what = "grammar" if constraint.param == "grammar" else \
            f"grammar made from '{constraint.param}'"
        raise ApiError(400, f"The {what} is invalid: {e.message}", param=constraint.param,
                       code="invalid_value") from None
