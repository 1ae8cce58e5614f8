"""JSON Schema -> GBNF: the grammar that makes a reply a JSON value the schema accepts
(response_format json_schema, llama-server's json_schema). A keyword the converter cannot
enforce is a SchemaError naming it, never silently dropped."""
from __future__ import annotations

import json
import math
import re
from typing import Any

__all__ = ["JSON_OBJECT_GBNF", "SchemaError", "gbnf_literal", "schema_to_gbnf"]


class SchemaError(ValueError):
    """The schema asks for something the grammar cannot enforce, or is malformed. path is
    where in the schema ("properties.age.minimum")."""

    def __init__(self, path: str, message: str):
        self.path = path
        super().__init__(f"{path or 'the schema'}: {message}")


# Whitespace between tokens is bounded: a small model at temperature 1 would otherwise
# spend the reply's tokens on blanks. Numbers are bounded for the same reason.
_PRIMITIVES = {
    "ws": r'( " " | "\n" [ \t]{0,16} )?',
    "char": r'[^"\\\x00-\x1F\x7F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} )',
    "string": r'"\"" char* "\""',
    "integer": r'"-"? ( "0" | [1-9] [0-9]{0,15} )',
    "number": r'integer ( "." [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,3} )?',
    "boolean": r'"true" | "false"',
    "null": r'"null"',
    "value": r'object | array | string | number | boolean | null',
    "object": r'"{" ws ( string ws ":" ws value ( ws "," ws string ws ":" ws value )* )? ws "}"',
    "array": r'"[" ws ( value ( ws "," ws value )* )? ws "]"',
}
_DEPENDS = {"string": ["char"], "number": ["integer"], "value": ["object", "array", "string",
            "number", "boolean", "null"], "object": ["ws", "string", "value"],
            "array": ["ws", "value"]}

# formats that are simple patterns (a valid value always matches; not every match is a
# real date: 2026-02-31 passes, as it does most validators' regexes)
_FORMATS = {
    "date": r'[0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [12] [0-9] | "3" [01] )',
    "time": r'( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{1,6} )? '
            r'( "Z" | [+-] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] )',
    "uuid": r'[0-9a-f]{8} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{12}',
}
_FORMATS["date-time"] = _FORMATS["date"] + ' "T" ' + _FORMATS["time"]
_FORMATS["email"] = r'[a-zA-Z0-9._+-]{1,64} "@" [a-zA-Z0-9-]{1,63} ( "." [a-zA-Z0-9-]{1,63} )+'
_FORMATS["hostname"] = r'[a-zA-Z0-9-]{1,63} ( "." [a-zA-Z0-9-]{1,63} )*'
_FORMATS["ipv4"] = r'[0-9]{1,3} "." [0-9]{1,3} "." [0-9]{1,3} "." [0-9]{1,3}'
_FORMATS["uri"] = r'[a-zA-Z] [a-zA-Z0-9+.-]{0,15} "://" [a-zA-Z0-9._~:/?#@!$&()*+,;=%-]{1,200}'

# keywords that only describe; everything else must be enforced or refused
_ANNOTATIONS = {"title", "description", "default", "examples", "$schema", "$id", "$comment",
                "deprecated", "readOnly", "writeOnly", "$defs", "definitions", "strict",
                "discriminator", "nullable_hint"}
_KEYWORDS = {
    "type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "properties", "required",
    "additionalProperties", "items", "prefixItems", "minItems", "maxItems", "minLength",
    "maxLength", "pattern", "format", "minimum", "maximum", "exclusiveMinimum",
    "exclusiveMaximum",
}
_TYPES = ("object", "array", "string", "number", "integer", "boolean", "null")
MAX_REPEAT = 10000  # the native parser's {m,n} limit

JSON_OBJECT_GBNF = "root ::= object\n" + "\n".join(
    f"{name} ::= {_PRIMITIVES[name]}" for name in
    ("object", "value", "array", "string", "char", "number", "integer", "boolean", "null", "ws"))


def gbnf_literal(text: str) -> str:
    """text as a GBNF string literal."""
    out = ['"']
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02X}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _json_literal(value: Any) -> str:
    return gbnf_literal(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def schema_to_gbnf(schema: Any) -> str:
    """The GBNF grammar (root rule "root") of the JSON texts schema accepts. Properties
    come in the schema's order, required ones first; without additionalProperties an
    object with properties gets no others (what a strict schema says, and a valid subset of
    what a lax one allows). Raises SchemaError."""
    return _Converter(schema).run()


class _Converter:
    def __init__(self, root: Any):
        self.root = root
        self.rules: dict[str, str] = {}
        self.refs: dict[str, str] = {}

    def run(self) -> str:
        if not isinstance(self.root, (dict, bool)):
            raise SchemaError("", f"a schema must be an object or a boolean, not "
                                  f"{type(self.root).__name__}")
        body = self.expr(self.root, "", "root")
        self.rules["root"] = body
        # root first, then the rest in the order they were made
        lines = [f"root ::= {body}"] + [f"{k} ::= {v}" for k, v in self.rules.items()
                                          if k != "root"]
        return "\n".join(lines) + "\n"

    # ---- rules ---------------------------------------------------------------
    def prim(self, name: str) -> str:
        if name not in self.rules:
            self.rules[name] = _PRIMITIVES[name]
            for dep in _DEPENDS.get(name, ()):
                self.prim(dep)
        return name

    def rule(self, hint: str, body: str) -> str:
        base = re.sub(r"[^a-zA-Z0-9-]+", "-", hint).strip("-") or "r"
        if base in _PRIMITIVES or base == "root":
            base += "-x"
        name, i = base, 1
        while name in self.rules and self.rules[name] != body:
            i += 1
            name = f"{base}-{i}"
        self.rules[name] = body
        return name

    # ---- schemas -------------------------------------------------------------
    def expr(self, schema: Any, path: str, hint: str) -> str:
        """A GBNF expression (often a rule's name) for the values schema accepts."""
        if schema is True or schema == {}:
            return self.prim("value")
        if schema is False:
            raise SchemaError(path, "the schema 'false' accepts no value")
        if not isinstance(schema, dict):
            raise SchemaError(path, f"a schema must be an object or a boolean, not "
                                    f"{type(schema).__name__}")
        unknown = sorted(k for k in schema if k not in _KEYWORDS and k not in _ANNOTATIONS)
        if unknown:
            raise SchemaError(_join(path, unknown[0]),
                              f"the keyword '{unknown[0]}' is not supported by Ember's "
                              f"constrained decoding (it supports "
                              f"{', '.join(sorted(_KEYWORDS))})")
        if "$ref" in schema:
            rest = {k: v for k, v in schema.items() if k not in _ANNOTATIONS and k != "$ref"}
            if rest:
                return self.expr({"allOf": [{"$ref": schema["$ref"]}, rest]}, path, hint)
            return self.ref(schema["$ref"], _join(path, "$ref"))
        if "allOf" in schema:
            return self.expr(self.merge_all_of(schema, path), path, hint)
        for key in ("anyOf", "oneOf"):
            if key in schema:
                subs = schema[key]
                if not isinstance(subs, list) or not subs:
                    raise SchemaError(_join(path, key), "must be a non-empty array of schemas")
                rest = {k: v for k, v in schema.items() if k != key and k not in _ANNOTATIONS}
                alts = []
                for i, sub in enumerate(subs):
                    merged = sub if not rest else {"allOf": [rest, sub]}
                    alts.append(self.expr(merged, f"{_join(path, key)}[{i}]",
                                          f"{hint}-{i}"))
                return self.rule(hint, " | ".join(alts))
        if "const" in schema:
            if not _of_type(schema["const"], schema.get("type")):
                raise SchemaError(_join(path, "const"), "is not of the schema's type")
            return _json_literal(schema["const"])
        if "enum" in schema:
            values = schema["enum"]
            if not isinstance(values, list) or not values:
                raise SchemaError(_join(path, "enum"), "must be a non-empty array")
            values = [v for v in values if _of_type(v, schema.get("type"))]
            if not values:
                raise SchemaError(_join(path, "enum"), "holds no value of the schema's type")
            return self.rule(hint, " | ".join(_json_literal(v) for v in values))
        kind = schema.get("type")
        if kind is None:
            kind = _implied_type(schema)
        if isinstance(kind, list):
            if not kind:
                raise SchemaError(_join(path, "type"), "must not be an empty array")
            return self.rule(hint, " | ".join(
                self.typed(t, schema, path, f"{hint}-{t}") for t in kind))
        return self.typed(kind, schema, path, hint)

    def typed(self, kind: Any, schema: dict, path: str, hint: str) -> str:
        if kind not in _TYPES:
            raise SchemaError(_join(path, "type"), f"unknown type {kind!r} (one of "
                                                   f"{', '.join(_TYPES)})")
        if kind == "object":
            return self.object(schema, path, hint)
        if kind == "array":
            return self.array(schema, path, hint)
        if kind == "string":
            return self.string(schema, path, hint)
        bounds = [k for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
                  if k in schema]
        if bounds and kind != "integer":
            raise SchemaError(_join(path, bounds[0]), f"bounds are supported on integers only, "
                                                      f"not on {kind}")
        if bounds:
            return self.integer_range(schema, path, hint)
        return self.prim(kind)

    def integer_range(self, schema: dict, path: str, hint: str) -> str:
        lo = hi = None
        for key, step in (("minimum", 0), ("exclusiveMinimum", 1), ("maximum", 0),
                          ("exclusiveMaximum", -1)):
            if key not in schema:
                continue
            v = schema[key]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v:
                raise SchemaError(_join(path, key), "must be a number")
            if abs(v) >= 10**15:
                raise SchemaError(_join(path, key), "is beyond the integers written (15 digits)")
            if "inimum" in key:
                b = math.ceil(v) + (step if v == math.ceil(v) else 0)
                lo = b if lo is None else max(lo, b)
            else:
                b = math.floor(v) + (step if v == math.floor(v) else 0)
                hi = b if hi is None else min(hi, b)
        if lo is not None and hi is not None and lo > hi:
            raise SchemaError(_join(path, "maximum"), "leaves no integer above the minimum")
        return self.rule(hint, _int_range(lo, hi))

    def ref(self, ref: Any, path: str) -> str:
        if not isinstance(ref, str) or not ref.startswith("#"):
            raise SchemaError(path, f"only local references ('#/$defs/Name') are supported, "
                                    f"not {ref!r}")
        if ref in self.refs:
            return self.refs[ref]
        target: Any = self.root
        for part in ref[1:].split("/")[1:] if ref != "#" else []:
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(target, dict) or part not in target:
                raise SchemaError(path, f"the reference {ref!r} points at nothing")
            target = target[part]
        name = self.rule("ref-" + ref.rsplit("/", 1)[-1], f"pending {ref}")  # it may recurse
        self.refs[ref] = name
        self.rules[name] = self.expr(target, ref, name + "-body")
        return name

    def merge_all_of(self, schema: dict, path: str) -> dict:
        """allOf of object schemas as one object schema (properties and required joined)."""
        parts = schema["allOf"]
        if not isinstance(parts, list) or not parts:
            raise SchemaError(_join(path, "allOf"), "must be a non-empty array of schemas")
        merged: dict = {k: v for k, v in schema.items() if k != "allOf"}
        # additionalProperties only sees its own schema's properties: each schema that has
        # it (the outer one too) must name every property of the merge, or none is allowed
        closed = []
        if merged.get("additionalProperties", True) is not True:
            closed.append((path, set(merged.get("properties", {}))))
        for i, part in enumerate(parts):
            where = f"{_join(path, 'allOf')}[{i}]"
            while isinstance(part, dict) and "$ref" in part:
                extra = {k: v for k, v in part.items() if k != "$ref"}
                part = {**self.resolve(part["$ref"], where), **extra}
            if not isinstance(part, dict):
                raise SchemaError(where, "must be a schema object")
            if part.get("additionalProperties", True) is not True:
                closed.append((where, set(part.get("properties", {}))))
            for key, value in part.items():
                if key in _ANNOTATIONS:
                    continue
                if key == "properties":
                    merged["properties"] = {**merged.get("properties", {}), **value}
                elif key == "required":
                    merged["required"] = list(dict.fromkeys(merged.get("required", []) +
                                                            list(value)))
                elif key == "allOf":
                    merged = self.merge_all_of({**merged, "allOf": value}, where)
                elif key == "additionalProperties" and key in merged:
                    if value is False or merged[key] is False:
                        merged[key] = False
                    elif merged[key] != value:
                        raise SchemaError(where, "allOf: the parts' additionalProperties "
                                                 "differ")
                elif key in merged and merged[key] != value:
                    raise SchemaError(where, f"allOf: '{key}' differs between the parts; only "
                                             f"object parts that add properties are merged")
                else:
                    merged[key] = value
        if merged.get("type", "object") != "object":
            raise SchemaError(_join(path, "allOf"), "only allOf of object schemas is supported")
        names = set(merged.get("properties", {}))
        for where, own in closed:
            if names - own:
                raise SchemaError(_join(where, "additionalProperties"),
                                  f"beside allOf it refuses '{sorted(names - own)[0]}', which "
                                  f"another part of the allOf defines: no object could match")
        merged["type"] = "object"
        return merged

    def resolve(self, ref: Any, path: str) -> Any:
        if not isinstance(ref, str) or not ref.startswith("#"):
            raise SchemaError(path, f"only local references are supported, not {ref!r}")
        target: Any = self.root
        for part in ref[1:].split("/")[1:] if ref != "#" else []:
            if not isinstance(target, dict) or part not in target:
                raise SchemaError(path, f"the reference {ref!r} points at nothing")
            target = target[part]
        return target

    def object(self, schema: dict, path: str, hint: str) -> str:
        props = schema.get("properties", {})
        if not isinstance(props, dict):
            raise SchemaError(_join(path, "properties"), "must be an object")
        required = schema.get("required", [])
        if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
            raise SchemaError(_join(path, "required"), "must be an array of strings")
        missing = [r for r in required if r not in props]
        extra_schema = schema.get("additionalProperties", None if props else True)
        if missing and extra_schema in (None, False):
            raise SchemaError(_join(path, "required"), f"'{missing[0]}' is required but not "
                                                       f"among the properties")
        ws = self.prim("ws")
        pairs = []  # (expression of one "key": value pair, required)
        for name in [r for r in required if r in props] + [p for p in props
                                                            if p not in required]:
            value = self.expr(props[name], _join(path, f"properties.{name}"),
                              f"{hint}-{name}")
            pairs.append((f'{_json_literal(name)} {ws} ":" {ws} {value}', name in required))
        for name in missing:  # required through additionalProperties
            value = self.expr(extra_schema if isinstance(extra_schema, dict) else True,
                              _join(path, "additionalProperties"), f"{hint}-{name}")
            pairs.insert(len([p for p in pairs if p[1]]),
                         (f'{_json_literal(name)} {ws} ":" {ws} {value}', True))
        extra = None
        if extra_schema not in (None, False):
            value = self.expr(extra_schema if isinstance(extra_schema, dict) else True,
                              _join(path, "additionalProperties"), f"{hint}-additional")
            extra = self.rule(f"{hint}-additional-kv",
                              f'{self.prim("string")} {ws} ":" {ws} {value}')
        n_req = sum(1 for _, r in pairs if r)
        sep = f'{ws} "," {ws}'
        body = f" {sep} ".join(p for p, _ in pairs[:n_req])
        optional = [p for p, r in pairs if not r]
        # after[i]: the optional pairs from i on, each with its comma (something came before)
        # first[i]: the same when nothing came before (the first one present has no comma)
        after_next = f"( {sep} {extra} )*" if extra else ""
        first_next = f"( {extra} ( {sep} {extra} )* )?" if extra else ""
        for i in range(len(optional) - 1, -1, -1):
            a = self.rule(f"{hint}-after-{i}", f"( {sep} {optional[i]} )? {after_next}".strip())
            if not n_req:
                f = self.rule(f"{hint}-first-{i}",
                              f"{optional[i]} {after_next} | {first_next}".strip()
                              if first_next else f"( {optional[i]} {after_next} )?")
                first_next = f
            after_next = a
        inner = (f"{body} {after_next}" if n_req else first_next).strip()
        return self.rule(hint, f'"{{" {ws} {inner} {ws} "}}"' if inner else f'"{{" {ws} "}}"')

    def array(self, schema: dict, path: str, hint: str) -> str:
        lo = _count(schema, "minItems", path, 0)
        hi = _count(schema, "maxItems", path, None)
        if hi is not None and hi < lo:
            raise SchemaError(_join(path, "maxItems"), "is below minItems")
        prefix = schema.get("prefixItems", [])
        if not isinstance(prefix, list):
            raise SchemaError(_join(path, "prefixItems"), "must be an array of schemas")
        items = schema.get("items", True)
        if isinstance(items, list):  # the older tuple form
            prefix, items = items, schema.get("additionalItems", True)
        if hi is not None and hi < len(prefix):
            raise SchemaError(_join(path, "maxItems"), "is below the number of prefixItems "
                                                       "(all of which are written)")
        ws = self.prim("ws")
        sep = f'{ws} "," {ws}'
        seq = [self.expr(s, f"{_join(path, 'prefixItems')}[{i}]", f"{hint}-{i}")
               for i, s in enumerate(prefix)]
        lo_rest = max(0, lo - len(prefix))
        hi_rest = None if hi is None else hi - len(prefix)
        if items is False:
            if lo_rest:
                raise SchemaError(_join(path, "minItems"), "asks for more items than "
                                                           "prefixItems with items false allow")
            hi_rest = 0
        parts = f" {sep} ".join(seq)
        if hi_rest != 0:
            item = self.expr(items, _join(path, "items"), f"{hint}-item")
            if hi_rest is not None and hi_rest > MAX_REPEAT:
                raise SchemaError(_join(path, "maxItems"), f"above {MAX_REPEAT}")
            if lo_rest > MAX_REPEAT:
                raise SchemaError(_join(path, "minItems"), f"above {MAX_REPEAT}")
            if seq:  # every further item follows a comma
                rep = _repeat(f"( {sep} {item} )", lo_rest, hi_rest)
                parts = f"{parts} {rep}"
            else:
                more = _repeat(f"( {sep} {item} )", max(lo_rest - 1, 0),
                               None if hi_rest is None else hi_rest - 1)
                parts = f"{item} {more}".strip()
                if lo_rest == 0:
                    parts = f"( {parts} )?"
        inner = parts.strip()
        return self.rule(hint, f'"[" {ws} {inner} {ws} "]"' if inner else f'"[" {ws} "]"')

    def string(self, schema: dict, path: str, hint: str) -> str:
        lo = _count(schema, "minLength", path, 0)
        hi = _count(schema, "maxLength", path, None)
        if hi is not None and hi < lo:
            raise SchemaError(_join(path, "maxLength"), "is below minLength")
        fmt = schema.get("format")
        pattern = schema.get("pattern")
        if fmt is not None and pattern is not None:
            raise SchemaError(_join(path, "format"), "format and pattern together are not "
                                                     "supported")
        if fmt is not None:
            if fmt not in _FORMATS:
                raise SchemaError(_join(path, "format"), f"the format {fmt!r} is not supported "
                                                         f"(supported: {', '.join(_FORMATS)})")
            if "minLength" in schema or "maxLength" in schema:
                raise SchemaError(_join(path, "format"), "format with minLength/maxLength is "
                                                         "not supported")
            return self.rule(f"{hint}-{fmt}", f'"\\"" {_FORMATS[fmt]} "\\""')
        if pattern is not None:
            if "minLength" in schema or "maxLength" in schema:
                raise SchemaError(_join(path, "pattern"), "pattern with minLength/maxLength is "
                                                          "not supported")
            if not isinstance(pattern, str):
                raise SchemaError(_join(path, "pattern"), "must be a string")
            return self.rule(f"{hint}-pattern",
                             f'"\\"" {_Pattern(pattern, _join(path, "pattern")).gbnf()} "\\""')
        if lo == 0 and hi is None:
            return self.prim("string")
        if max(lo, hi or 0) > MAX_REPEAT:
            raise SchemaError(_join(path, "maxLength" if hi else "minLength"),
                              f"above {MAX_REPEAT}")
        char = self.prim("char")
        reps = f"{{{lo},}}" if hi is None else f"{{{lo},{hi}}}"
        return self.rule(hint, f'"\\"" {char}{reps} "\\""')


_MAX_DIGITS = 16  # as the integer rule writes them


def _digits_range(a: str, b: str) -> str:
    """GBNF for the digit strings of one length from a to b (a <= b, leading zeros kept)."""
    if not a:
        return ""
    if a == b:
        return gbnf_literal(a)
    n = len(a) - 1
    tail = f" [0-9]{{{n}}}" if n else ""
    if a[0] == b[0]:
        return f"{gbnf_literal(a[0])} ( {_digits_range(a[1:], b[1:])} )"
    if a[1:] == "0" * n and b[1:] == "9" * n:
        return f"[{a[0]}-{b[0]}]{tail}"
    alts = []
    lo_first = a[1:] == "0" * n
    hi_last = b[1:] == "9" * n
    d_lo = int(a[0]) if lo_first else int(a[0]) + 1
    d_hi = int(b[0]) if hi_last else int(b[0]) - 1
    if not lo_first:
        alts.append(f"{gbnf_literal(a[0])} ( {_digits_range(a[1:], '9' * n)} )")
    if d_lo <= d_hi:
        alts.append(f"[{d_lo}-{d_hi}]{tail}")
    if not hi_last:
        alts.append(f"{gbnf_literal(b[0])} ( {_digits_range('0' * n, b[1:])} )")
    return " | ".join(alts)


def _natural_range(lo: int, hi: int | None) -> list[str]:
    """Alternatives for the integers lo..hi (0 <= lo; hi None: no bound) as JSON writes
    them (no leading zeros), one per number of digits."""
    alts = []
    top = hi if hi is not None else 10**_MAX_DIGITS - 1
    for n in range(len(str(lo)), len(str(top)) + 1):
        a = max(lo, 10 ** (n - 1) if n > 1 else 0)
        b = min(top, 10**n - 1)
        if a <= b:
            alts.append(f"( {_digits_range(str(a), str(b))} )")
    return alts


def _int_range(lo: int | None, hi: int | None) -> str:
    alts = []
    if hi is None or hi >= 0:  # the non-negative part
        alts += _natural_range(max(lo or 0, 0) if lo is not None else 0, hi)
    if lo is None or lo < 0:  # the negative part: -x for x in ...
        x_lo = 1 if hi is None or hi >= 0 else -hi
        x_hi = None if lo is None else -lo
        alts += [f'"-" {a}' for a in _natural_range(x_lo, x_hi)]
    return " | ".join(alts)


def _of_type(value: Any, kind: Any) -> bool:
    """value is of the JSON type kind (a name, a list of names, or None for any)."""
    if kind is None:
        return True
    if isinstance(kind, list):
        return any(_of_type(value, k) for k in kind)
    if isinstance(value, bool):
        return kind == "boolean"
    if isinstance(value, int):
        return kind in ("integer", "number")
    if isinstance(value, float):
        return kind == "number" or (kind == "integer" and value.is_integer())
    return {str: "string", type(None): "null", list: "array", dict: "object"}.get(
        type(value)) == kind


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _count(schema: dict, key: str, path: str, default: int | None) -> int | None:
    v = schema.get(key, default)
    if v is default:
        return v
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise SchemaError(_join(path, key), "must be a non-negative integer")
    return v


def _repeat(x: str, lo: int, hi: int | None) -> str:
    if hi is None:
        return f"{x}{{{lo},}}" if lo else f"{x}*"
    if hi == 0:
        return ""
    return f"{x}{{{lo},{hi}}}"


def _implied_type(schema: dict) -> Any:
    """A schema without "type" whose keywords say what it is ({"properties": ...})."""
    if any(k in schema for k in ("properties", "required", "additionalProperties")):
        return "object"
    if any(k in schema for k in ("items", "prefixItems", "minItems", "maxItems")):
        return "array"
    if any(k in schema for k in ("minLength", "maxLength", "pattern", "format")):
        return "string"
    return list(_TYPES[:-1]) + ["null"]


_PATTERN_CLASSES = {"d": "0-9", "w": "a-zA-Z0-9_", "s": " "}  # a tab would need an escape


class _Pattern:
    """The simple regular expressions a pattern may be: literal characters, classes
    ([a-z], [^,], \\d \\w \\s), '.', groups with '|', and * + ? {m,n}. The value is written
    as a match of the whole pattern (^ and $ are optional: a whole match is a valid value
    whether or not the pattern is anchored). Characters JSON must escape (", \\ and
    controls) are not emitted by a class or '.', so a match never needs an escape."""

    _SAFE_NEG = '"\\\\\\x00-\\x1F\\x7F'  # what negated classes and '.' exclude

    def __init__(self, pattern: str, path: str):
        self.p = pattern
        self.i = 0
        self.path = path

    def fail(self, what: str):
        raise SchemaError(self.path, f"{what} in {self.p!r}: only simple patterns (literals, "
                                     f"classes, groups, | and quantifiers) are supported")

    def gbnf(self) -> str:
        if self.p.startswith("^"):
            self.i = 1
        out = self.alternatives()
        if self.i < len(self.p) and self.p[self.i] == "$" and self.i == len(self.p) - 1:
            self.i += 1
        if self.i != len(self.p):
            self.fail(f"unsupported {self.p[self.i]!r} at {self.i}")
        return f"( {out} )"

    def alternatives(self) -> str:
        alts = [self.sequence()]
        while self.i < len(self.p) and self.p[self.i] == "|":
            self.i += 1
            alts.append(self.sequence())
        return " | ".join(a or '""' for a in alts)

    def sequence(self) -> str:
        items = []
        while self.i < len(self.p) and self.p[self.i] not in "|)":
            if self.p[self.i] == "$" and self.i == len(self.p) - 1:
                break
            atom = self.atom()
            items.append(atom + self.quantifier())
        return " ".join(items)

    def quantifier(self) -> str:
        if self.i >= len(self.p):
            return ""
        c = self.p[self.i]
        if c in "*+?":
            self.i += 1
            if self.i < len(self.p) and self.p[self.i] in "?+":
                self.i += 1  # lazy / possessive: the same set of matches
            return c
        if c == "{":
            m = re.match(r"\{(\d+)(,(\d*))?\}", self.p[self.i:])
            if not m:
                self.fail("a malformed {m,n}")
            self.i += m.end()
            lo = int(m.group(1))
            hi = m.group(3)
            if max(lo, int(hi) if hi else 0) > MAX_REPEAT:
                self.fail(f"a count above {MAX_REPEAT}")
            if m.group(2) is None:
                return f"{{{lo}}}"
            return f"{{{lo},{hi}}}" if hi else f"{{{lo},}}"
        return ""

    def atom(self) -> str:
        c = self.p[self.i]
        if c == "(":
            self.i += 1
            if self.p.startswith("?:", self.i):
                self.i += 2
            elif self.p.startswith("?", self.i):
                self.fail("a group extension (?...)")
            inner = self.alternatives()
            if self.i >= len(self.p) or self.p[self.i] != ")":
                self.fail("an unclosed group")
            self.i += 1
            return f"( {inner} )"
        if c == "[":
            return self.char_class()
        if c == ".":
            self.i += 1
            return f"[^\\n{self._SAFE_NEG}]"
        if c == "\\":
            return self.escape(in_class=False)
        if c in "*+?{":
            self.fail(f"a quantifier {c!r} with nothing before it")
        if c in "^$":
            self.fail(f"an anchor {c!r} inside the pattern")
        self.i += 1
        return self.literal_char(c)

    def literal_char(self, c: str) -> str:
        if c == '"':
            return '"\\\\\\""'  # the two characters \" of the JSON text
        if c == "\\":
            return '"\\\\\\\\"'
        if ord(c) < 0x20:
            return f'"\\\\u{ord(c):04x}"'
        return gbnf_literal(c)

    def escape(self, in_class: bool) -> str:
        self.i += 1
        if self.i >= len(self.p):
            self.fail("a trailing backslash")
        c = self.p[self.i]
        self.i += 1
        if c in _PATTERN_CLASSES:
            return _PATTERN_CLASSES[c] if in_class else f"[{_PATTERN_CLASSES[c]}]"
        if c in "DWS":
            self.fail(f"\\{c}")
        if c in ".^$*+?()[]{}|/-\\":
            if in_class:
                return _class_char(c)
            return self.literal_char(c)
        if c in "nt":
            self.fail(f"\\{c} (a control character needs a JSON escape)")
        self.fail(f"the escape \\{c}")

    def char_class(self) -> str:
        self.i += 1
        negated = self.i < len(self.p) and self.p[self.i] == "^"
        if negated:
            self.i += 1
        body = ""
        first = True
        while self.i < len(self.p) and (self.p[self.i] != "]" or first):
            first = False
            c = self.p[self.i]
            if c == "\\":
                body += self.escape(in_class=True)
                continue
            if c in '"\\' or ord(c) < 0x20:
                self.fail(f"a class holding {c!r} (it needs a JSON escape)")
            ranged = c == "-" and body and self.i + 1 < len(self.p) and self.p[self.i + 1] != "]"
            body += "-" if ranged else _class_char(c)
            self.i += 1
        if self.i >= len(self.p):
            self.fail("an unclosed class")
        self.i += 1
        if negated:
            return f"[^{body}{self._SAFE_NEG}]"
        return f"[{body}]"


def _class_char(c: str) -> str:
    return "\\" + c if c in "]\\^-[" else c
