"""Constrained replies through the official openai client: response_format json_schema parsed
into a pydantic model (chat and /v1/responses), json_object, llama-server's grammar and
json_schema fields on both endpoints, streamed too; a schema or grammar Ember cannot
enforce is a 400 saying why."""
from __future__ import annotations

import json

import jsonschema
import openai
import pytest
from openai import OpenAI
from pydantic import BaseModel, Field

from tests.support.server_process import ServerProcess

N_CTX = 512
ASK = [{"role": "user", "content": "Give me a person as JSON with a name and an age."}]


class Person(BaseModel):
    name: str = Field(max_length=24)
    age: int = Field(ge=0, le=120)
    pets: list[str] = Field(max_length=3)


@pytest.fixture(scope="module")
def server(starter_model_path):
    s = ServerProcess(starter_model_path, "-c", str(N_CTX))
    yield s
    s.stop()


@pytest.fixture(scope="module")
def client(server):
    return OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=300)


def test_chat_parse_into_a_pydantic_model(client):
    parsed = 0
    for seed in range(3):
        r = client.chat.completions.parse(model="m", messages=ASK, response_format=Person,
                                          temperature=1.0, seed=seed, max_tokens=200, n=2)
        for choice in r.choices:
            if choice.finish_reason == "length":
                continue
            assert choice.finish_reason == "stop"
            assert isinstance(choice.message.parsed, Person)
            assert choice.message.parsed == Person.model_validate_json(choice.message.content)
            parsed += 1
    assert parsed >= 3


def test_responses_parse_into_a_pydantic_model(client):
    parsed = 0
    for seed in range(2):
        r = client.responses.parse(model="m", input="A person as JSON.", text_format=Person,
                                   temperature=1.0, max_output_tokens=200,
                                   extra_body={"seed": seed})
        assert r.text.format.type == "json_schema"  # the format asked for, echoed
        if r.status == "completed":
            assert isinstance(r.output_parsed, Person)
            parsed += 1
    assert parsed >= 1


def test_json_object_on_both_endpoints(client):
    r = client.chat.completions.create(model="m", messages=ASK, max_tokens=120, seed=1,
                                       response_format={"type": "json_object"})
    if r.choices[0].finish_reason == "stop":
        assert isinstance(json.loads(r.choices[0].message.content), dict)
    c = client.completions.create(model="m", prompt="Data:", max_tokens=120, seed=2,
                                  extra_body={"response_format": {"type": "json_object"}})
    if c.choices[0].finish_reason == "stop":
        assert isinstance(json.loads(c.choices[0].text), dict)
    assert "stop" in (r.choices[0].finish_reason, c.choices[0].finish_reason)


def test_llama_server_grammar_and_json_schema_fields(client):
    for seed in range(3):
        c = client.completions.create(model="m", prompt="Is the sky blue? Answer:",
                                      max_tokens=8, seed=seed, temperature=1.0,
                                      extra_body={"grammar": 'root ::= " yes" | " no"'})
        assert c.choices[0].text in (" yes", " no")
        assert c.choices[0].finish_reason == "stop"
    schema = {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 4}
    r = client.chat.completions.create(model="m", messages=ASK, max_tokens=80, seed=4,
                                       extra_body={"json_schema": schema})
    assert r.choices[0].finish_reason == "stop"
    jsonschema.validate(json.loads(r.choices[0].message.content), schema)


def test_streamed_reply_is_valid_too(client):
    schema = Person.model_json_schema()
    stream = client.chat.completions.create(
        model="m", messages=ASK, max_tokens=200, seed=5, stream=True,
        response_format={"type": "json_schema", "json_schema": {"name": "person",
                                                                "schema": schema}})
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    finish = [c.choices[0].finish_reason for c in chunks if c.choices and
              c.choices[0].finish_reason]
    if finish == ["stop"]:
        Person.model_validate_json(text)
    else:
        assert finish == ["length"]


@pytest.mark.parametrize("extra, param, says", [
    ({"response_format": {"type": "json_schema", "json_schema": {
        "name": "n", "schema": {"type": "integer", "multipleOf": 3}}}}, "response_format",
     "'multipleOf' is not supported"),
    ({"response_format": {"type": "json_schema", "json_schema": {
        "name": "n", "schema": {"type": "object", "properties": 5}}}}, "response_format",
     "properties: must be an object"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "n"}}},
     "response_format", "schema' is required"),
    ({"json_schema": {"type": "string", "format": "idn-email"}}, "json_schema",
     "format 'idn-email' is not supported"),
    ({"grammar": 'root ::= "a" (\n"b"'}, "grammar", "line 1, column 14"),
    ({"grammar": 'root ::= x'}, "grammar", "'x' is used but never defined"),
    ({"grammar": 'root ::= "a"', "response_format": {"type": "json_object"}},
     "response_format", "one of 'grammar', 'json_schema' and 'response_format'"),
])
def test_what_cannot_be_enforced_is_a_400_saying_why(client, extra, param, says):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="m", messages=ASK, max_tokens=4,
                                       extra_body=extra)
    assert e.value.param == param
    assert says in e.value.body["message"], e.value.body["message"]
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model="m", prompt="Hi", max_tokens=4, extra_body=extra)
    assert says in e.value.body["message"]


def test_responses_text_format_refusal_names_it(client):
    with pytest.raises(openai.BadRequestError) as e:
        client.responses.create(model="m", input="Hi", max_output_tokens=4, text={
            "format": {"type": "json_schema", "name": "x",
                       "schema": {"type": "string", "format": "idn-hostname"}}})
    assert e.value.param == "text.format"
    assert "idn-hostname" in e.value.body["message"]
