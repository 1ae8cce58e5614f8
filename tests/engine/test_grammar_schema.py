"""JSON Schema -> GBNF (chat/json_schema.py): the grammar accepts valid instances and
refuses invalid ones (jsonschema is the judge), unsupported keywords are errors naming
them, and the starter model sampled at temperature 1 under each grammar writes JSON that
json.loads reads and the schema validates, seed after seed."""
from __future__ import annotations

import json

import jsonschema
import pytest
from ember.chat.json_schema import JSON_OBJECT_GBNF, SchemaError, schema_to_gbnf
from ember.engine import GenerationStats, Grammar, Model, SamplingParams, Session

pytestmark = pytest.mark.native

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 24},
        "age": {"type": "integer"},
        "email": {"type": "string", "pattern": "^[a-z]{1,8}@[a-z]{1,8}\\.(com|org)$"},
        "pets": {"type": "array", "items": {"enum": ["cat", "dog", "fish"]}, "maxItems": 3},
        "born": {"type": "string", "format": "date"},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}
TREE = {
    "$defs": {"node": {"type": "object", "properties": {
        "value": {"type": "number"},
        "children": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}},
        "required": ["value"], "additionalProperties": False}},
    "$ref": "#/$defs/node",
}
MIXED = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "format": "uuid"},
        "kind": {"const": "event"},
        "when": {"anyOf": [{"type": "string", "format": "time"}, {"type": "null"}]},
        "point": {"type": "array", "prefixItems": [{"type": "number"}, {"type": "number"}],
                  "items": False},
        "ok": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 6},
                 "minItems": 1, "maxItems": 2},
    },
    "required": ["id", "kind", "when", "point", "ok", "tags"],
    "additionalProperties": False,
}
MERGED = {
    "allOf": [
        {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
        {"properties": {"b": {"oneOf": [{"type": "boolean"}, {"type": "string",
                                                            "maxLength": 3}]}},
         "required": ["b"]},
    ],
}
OPEN = {"type": "object", "additionalProperties": {"type": "integer"}}
SCHEMAS = {"person": PERSON, "tree": TREE, "mixed": MIXED, "merged": MERGED, "open": OPEN}

INSTANCES = {
    "person": ['{"name": "Ann", "age": 3}', '{"name":"Bo","age":-1,"pets":["cat"],'
               '"born":"2001-02-03","email":"bo@ex.org"}',
               '{"age": 3, "name": "Ann"}', '{"name": "", "age": 3}', '{"name": "A", "age": 3.5}',
               '{"name": "A", "age": 3, "x": 1}', '{"name": "A", "age": 3, "email": "A@b.com"}',
               '{"name": "A", "age": 3, "pets": ["cow"]}', '{"name": "A"}'],
    "tree": ['{"value": 1, "children": [{"value": 2.5e1}, {"value": -3, "children": []}]}',
             '{"value": 1, "children": [{"value": 1}, {"value": 1}, {"value": 1}]}',
             '{"children": []}', '{"value": "1"}'],
    "mixed": ['{"id": "0f8fad5b-d9cb-469f-a165-70867728950e", "kind": "event", "when": null, '
              '"point": [1, 2], "ok": true, "tags": ["a"]}',
              '{"id": "0f8fad5b-d9cb-469f-a165-70867728950e", "kind": "event", "when": '
              '"12:30:00Z", "point": [1.5, -2], "ok": false, "tags": ["a", "bc"]}',
              '{"id": "x", "kind": "event", "when": null, "point": [1, 2], "ok": true, '
              '"tags": ["a"]}',
              '{"id": "0f8fad5b-d9cb-469f-a165-70867728950e", "kind": "other", "when": null, '
              '"point": [1, 2], "ok": true, "tags": ["a"]}',
              '{"id": "0f8fad5b-d9cb-469f-a165-70867728950e", "kind": "event", "when": null, '
              '"point": [1, 2, 3], "ok": true, "tags": ["a"]}',
              '{"id": "0f8fad5b-d9cb-469f-a165-70867728950e", "kind": "event", "when": null, '
              '"point": [1, 2], "ok": true, "tags": []}'],
    "merged": ['{"a": 1, "b": true}', '{"a": 1, "b": "xyz"}', '{"a": 1, "b": "wxyz"}',
               '{"a": 1}', '{"b": true, "a": 1}'],
    "open": ['{}', '{"x": 1, "y": -2}', '{"x": "1"}', '{"x": 1,}'],
}


def _valid(schema, text: str) -> bool:
    try:
        jsonschema.validate(json.loads(text), schema)
        return True
    except (ValueError, jsonschema.ValidationError):
        return False


@pytest.mark.parametrize("name", list(SCHEMAS))
def test_grammar_accepts_only_valid_instances(name):
    schema = SCHEMAS[name]
    g = Grammar(schema_to_gbnf(schema))
    accepted = 0
    for text in INSTANCES[name]:
        if g.matches(text):
            accepted += 1
            assert _valid(schema, text), text  # never an invalid one
    assert g.matches(INSTANCES[name][0])  # and the plain valid one
    assert accepted < len(INSTANCES[name])


def test_required_first_then_optional_in_order():
    g = Grammar(schema_to_gbnf({"type": "object", "properties": {
        "a": {"type": "integer"}, "b": {"type": "integer"}, "c": {"type": "integer"}},
        "required": ["c"]}))
    for good in ['{"c":1}', '{"c":1,"a":2}', '{"c":1,"b":2}', '{"c":1,"a":2,"b":3}']:
        assert g.matches(good), good
    for bad in ['{"a":2,"c":1}', '{"c":1,"b":2,"a":3}', '{"c":1,}', '{}']:
        assert not g.matches(bad), bad
    opt = Grammar(schema_to_gbnf({"type": "object", "properties": {
        "a": {"type": "integer"}, "b": {"type": "integer"}}}))
    for good in ['{}', '{"a":1}', '{"b":1}', '{"a":1, "b":2}']:
        assert opt.matches(good), good
    for bad in ['{,"b":1}', '{"a":1,}', '{"b":1,"a":2}']:
        assert not opt.matches(bad), bad


def test_enum_values_of_another_type_are_left_out():
    g = Grammar(schema_to_gbnf({"type": "string", "enum": ["a", 1, None, "b"]}))
    assert g.matches('"a"') and g.matches('"b"')
    assert not g.matches("1") and not g.matches("null")


def test_formats_written_as_patterns():
    for fmt, good, bad in [("email", "ann.b@mail.example.org", "ann@"),
                           ("uri", "https://example.com/a?b=1", "example.com"),
                           ("hostname", "a-b.example", "a b"), ("ipv4", "10.0.0.1", "10.0.1"),
                           ("date-time", "2026-12-07T01:02:03.5+01:00", "2026-12-07 01:02")]:
        g = Grammar(schema_to_gbnf({"type": "string", "format": fmt}))
        assert g.matches(json.dumps(good)), fmt
        assert not g.matches(json.dumps(bad)), fmt


@pytest.mark.parametrize("lo, hi", [(0, None), (1, None), (None, 0), (None, -1), (-5, 5),
                                    (7, 7), (10, 99), (13, 4567), (-1234, -17), (-3, 12000),
                                    (99, 100), (-20001, -19999)])
def test_integer_bounds_are_exact(lo, hi):
    schema = {"type": "integer"}
    if lo is not None:
        schema["minimum"] = lo
    if hi is not None:
        schema["maximum"] = hi
    g = Grammar(schema_to_gbnf(schema))
    first = (lo if lo is not None else (hi or 0) - 1500) - 40
    last = (hi if hi is not None else (lo or 0) + 1500) + 40
    for i in range(first, last + 1):
        assert g.matches(str(i)) == ((lo is None or i >= lo) and (hi is None or i <= hi)), i
    assert not g.matches("-0") and not g.matches("007")


def test_exclusive_and_fractional_bounds():
    g = Grammar(schema_to_gbnf({"type": "integer", "exclusiveMinimum": 2, "maximum": 5.5}))
    assert [i for i in range(-3, 10) if g.matches(str(i))] == [3, 4, 5]


def test_json_object_grammar():
    g = Grammar(JSON_OBJECT_GBNF)
    assert g.matches('{"a": {"b": [1, 2.5, "x", null, true]}}')
    assert not g.matches('[1]') and not g.matches('"x"') and not g.matches('{"a": }')


@pytest.mark.parametrize("schema, where", [
    ({"type": "number", "minimum": 0}, "minimum"),
    ({"type": "integer", "minimum": 5, "exclusiveMaximum": 5}, "maximum"),
    ({"type": "object", "properties": {"n": {"type": "number", "multipleOf": 2}}},
     "properties.n.multipleOf"),
    ({"type": "string", "format": "idn-email"}, "format"),
    ({"type": "string", "enum": [1, 2]}, "enum"),
    ({"type": "integer", "const": "x"}, "const"),
    ({"type": "string", "pattern": "^(?=a)b$"}, "pattern"),
    ({"type": "string", "pattern": "a\\Sb"}, "pattern"),
    ({"$ref": "#/$defs/missing"}, "$ref"),
    ({"$ref": "https://example.com/s.json"}, "$ref"),
    ({"type": "thing"}, "type"),
    ({"type": "object", "properties": {"a": {}}, "required": ["b"],
      "additionalProperties": False}, "required"),
    ({"type": "array", "minItems": 3, "maxItems": 2}, "maxItems"),
    ({"allOf": [{"type": "string"}, {"type": "integer"}]}, "allOf"),
    # additionalProperties sees only its own schema's properties: {"a": 1} would fail it
    ({"allOf": [{"properties": {"a": {}}}], "additionalProperties": False},
     "additionalProperties"),
    ("not a schema", "schema"),
])
def test_unsupported_or_malformed_is_an_error_naming_the_keyword(schema, where):
    with pytest.raises(SchemaError) as e:
        schema_to_gbnf(schema)
    assert where in str(e.value), str(e.value)


@pytest.fixture(scope="module")
def model(starter_model_path):
    with Model(starter_model_path, n_ctx=512, n_threads=2) as m:
        yield m


PROMPTS = {"person": "A person as JSON:", "tree": "A small tree of numbers as JSON:",
           "mixed": "An event record as JSON:", "merged": "JSON:", "open": "Counts as JSON:"}


@pytest.mark.parametrize("name", ["person", "tree", "mixed", "merged"])
def test_the_model_writes_valid_json_under_the_grammar(model, name):
    schema = SCHEMAS[name]
    grammar = Grammar(schema_to_gbnf(schema), model)
    finished = 0
    for seed in range(4):
        stats = GenerationStats()
        text = "".join(Session(model).generate(
            PROMPTS[name], 160, SamplingParams(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0,
                                               seed=seed),
            grammar=grammar, stats=stats))
        if stats.stop_reason == "length":
            # cut off by max_tokens: still a prefix the grammar accepts
            check = Grammar(schema_to_gbnf(schema))
            check.accept_text(text)
            continue
        assert stats.stop_reason == "eog", stats.stop_reason
        jsonschema.validate(json.loads(text), schema)
        finished += 1
    assert finished >= 2
