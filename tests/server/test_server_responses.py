"""OpenAI's Responses API on `ember serve` through the official openai client: the same
greedy text as chat/completions, instructions, completed and incomplete statuses, the
stream of typed events as the client's own accumulator assembles it, function calls as
output items (whole and streamed) fed back as function_call_output items, and 400s for
what is not stored or not honoured."""
from __future__ import annotations

import json

import openai
import pytest
from ember.chat import ChatTemplate
from ember.engine import Model
from openai import OpenAI

from tests.support.chain_models import hermes_tools_model
from tests.support.server_process import ServerProcess

MODEL = "SmolLM2-135M-Instruct.Q4_1"
ASK = "Name three colours of the rainbow."
TOOLS = [{"type": "function", "name": "get_weather", "description": "The weather in a city.",
          "parameters": {"type": "object", "properties": {
              "city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}},
         {"type": "function", "name": "get_time", "description": "The time in a city.",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]


@pytest.fixture(scope="module")
def server(starter_model_path):
    s = ServerProcess(starter_model_path, "-c", "1024")
    yield s
    s.stop()


@pytest.fixture(scope="module")
def client(server):
    return OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=300)


def test_the_same_greedy_text_as_chat(client):
    r = client.responses.create(model="gpt-5", input=ASK, instructions="Be brief.",
                                max_output_tokens=8, temperature=0)
    c = client.chat.completions.create(model="m", max_tokens=8, temperature=0, messages=[
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": ASK}])
    assert r.object == "response" and r.id.startswith("resp_") and r.model == MODEL
    assert r.output_text == c.choices[0].message.content
    assert [item.type for item in r.output] == ["message"]
    assert r.output[0].role == "assistant" and r.output[0].content[0].type == "output_text"
    assert r.status == "incomplete" and r.incomplete_details.reason == "max_output_tokens"
    assert r.usage.input_tokens == c.usage.prompt_tokens
    assert r.usage.output_tokens == 8 and r.usage.total_tokens == c.usage.total_tokens


def test_input_items_are_the_same_chat(client):
    a = client.responses.create(model="m", input=ASK, max_output_tokens=8, temperature=0)
    b = client.responses.create(model="m", max_output_tokens=8, temperature=0, input=[
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": ASK}]}])
    assert a.output_text == b.output_text and a.usage.input_tokens == b.usage.input_tokens


def test_a_finished_reply_is_completed_and_streams_the_same(client):
    kw = {"model": "m", "input": "Say hello.", "max_output_tokens": 300, "temperature": 0}
    whole = client.responses.create(**kw)
    assert whole.status == "completed" and whole.incomplete_details is None
    with client.responses.stream(**kw) as stream:
        deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert len(deltas) > 1 and "".join(deltas) == whole.output_text
    assert final.output_text == whole.output_text and final.status == "completed"
    assert final.usage.output_tokens == whole.usage.output_tokens


def test_an_incomplete_stream_ends_with_response_incomplete(client):
    events = list(client.responses.create(model="m", input=ASK, max_output_tokens=4,
                                          temperature=0, stream=True))
    kinds = [e.type for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.incomplete"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    last = events[-1].response
    assert last.incomplete_details.reason == "max_output_tokens"
    assert last.output_text == "".join(e.delta for e in events
                                       if e.type == "response.output_text.delta")


@pytest.mark.parametrize("kw, param", [
    ({"previous_response_id": "resp_123"}, "previous_response_id"),
    ({"text": {"format": {"type": "json_schema", "name": "x",
                          "schema": {"type": "object", "minProperties": 1}}}}, "text.format"),
    ({"tools": [{"type": "web_search"}]}, "tools[0]"),
    ({"background": True}, "background"),
    ({"tools": TOOLS}, "tools"),  # ChatML: the starter's template has no tools
])
def test_what_is_not_stored_or_honoured_is_400(client, kw, param):
    with pytest.raises(openai.BadRequestError) as e:
        client.responses.create(model="m", input=ASK, max_output_tokens=4, **kw)
    assert e.value.param == param


@pytest.fixture(scope="module")
def hermes(tmp_path_factory, templates_dir):
    source = (templates_dir / "Qwen-Qwen2.5-7B-Instruct.jinja").read_text(encoding="utf-8")
    path = hermes_tools_model(source).write(tmp_path_factory.mktemp("r") / "hermes.gguf")
    s = ServerProcess(path, "-c", "4096")
    yield OpenAI(base_url=s.url + "/v1", api_key="x", max_retries=0, timeout=300), path
    s.stop()


def calls_of(response):
    return [(i.name, json.loads(i.arguments)) for i in response.output
            if i.type == "function_call"]


def test_function_calls_as_output_items(hermes):
    client, _ = hermes
    r = client.responses.create(model="m", input="Paris and Rome?", tools=TOOLS, temperature=0)
    assert [i.type for i in r.output] == ["function_call", "function_call"]
    assert calls_of(r) == [("get_weather", {"city": "Paris", "days": 2}),
                           ("get_time", {"city": "Rome"})]
    assert len({i.call_id for i in r.output}) == 2 and r.status == "completed"
    with client.responses.stream(model="m", input="Paris?", tools=TOOLS,
                                 temperature=0) as stream:
        final = stream.get_final_response()
    assert calls_of(final) == calls_of(r)


def test_function_call_outputs_are_fed_back(hermes):
    client, path = hermes
    first = client.responses.create(model="m", input="Paris and Rome?", tools=TOOLS,
                                    temperature=0)
    results = ["18 C", "14:05"]
    items = [{"role": "user", "content": "Paris and Rome?"}]
    items += [i.model_dump(exclude_none=True) for i in first.output]
    items += [{"type": "function_call_output", "call_id": i.call_id, "output": text}
              for i, text in zip(first.output, results)]
    r = client.responses.create(model="m", input=items, tools=TOOLS, temperature=0,
                                max_output_tokens=2)
    vocab = Model(path, vocab_only=True)
    template = ChatTemplate.from_metadata(vocab.metadata, token_text=vocab.token_text)
    local = [{"role": "user", "content": "Paris and Rome?"},
             {"role": "assistant", "content": "", "tool_calls": [
                 {"id": i.call_id, "type": "function", "function": {
                     "name": i.name, "arguments": json.loads(i.arguments)}}
                 for i in first.output]}]
    local += [{"role": "tool", "tool_call_id": i.call_id, "content": text, "name": i.name}
              for i, text in zip(first.output, results)]
    openai_tools = [{"type": "function", "function": {
        k: t[k] for k in ("name", "description", "parameters")}} for t in TOOLS]
    text = template.prompt(local, tools=openai_tools).text
    assert "<tool_response>\n14:05\n</tool_response>" in text
    assert r.usage.input_tokens == len(vocab.prompt_ids(text))
