"""Request fields that change the answer, through the official openai client: logit_bias
honoured (against the model's own top tokens), an assistant message at the end continued
rather than answered anew, `stop` held to OpenAI's four, and every field Ember cannot honour
yet (mirostat, typical_p, ignore_eos, ...) a 400 naming it, and n choices, each
the reply its own seed gives."""
from __future__ import annotations

import openai
import pytest
from ember.chat import ChatTemplate
from ember.engine import Model
from openai import OpenAI

from tests.support.server_process import ServerProcess

N_CTX = 512
USER = [{"role": "user", "content": "Name three colours of the rainbow."}]


@pytest.fixture(scope="module")
def server(starter_model_path):
    s = ServerProcess(starter_model_path, "-c", str(N_CTX))
    yield s
    s.stop()


@pytest.fixture(scope="module")
def client(server):
    return OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=300)


@pytest.fixture(scope="module")
def vocab(starter_model_path):
    return Model(starter_model_path, vocab_only=True)


def one_token(vocab, text: str) -> int:
    ids = vocab.tokenize(text, add_special=False)
    assert len(ids) == 1, (text, ids)
    return ids[0]


def test_logit_bias_minus_100_bans_the_greedy_token(client, vocab):
    r = client.chat.completions.create(model="m", messages=USER, max_tokens=1, temperature=0,
                                       logprobs=True, top_logprobs=2)
    first, second = r.choices[0].logprobs.content[0].top_logprobs
    assert r.choices[0].message.content == first.token
    banned = one_token(vocab, first.token)
    r = client.chat.completions.create(model="m", messages=USER, max_tokens=1, temperature=0,
                                       logit_bias={str(banned): -100})
    assert r.choices[0].message.content == second.token


def test_logit_bias_plus_100_forces_a_token(client, vocab):
    blue = one_token(vocab, " blue")
    r = client.chat.completions.create(model="m", messages=USER, max_tokens=4, temperature=0.8,
                                       seed=3, logit_bias={str(blue): 100})
    assert r.choices[0].message.content == " blue" * 4
    streamed = client.completions.create(model="m", prompt="Colours:", max_tokens=3,
                                         temperature=0, logit_bias={str(blue): 100},
                                         stream=True)
    assert "".join(c.choices[0].text for c in streamed if c.choices) == " blue" * 3


@pytest.mark.parametrize("bias, code", [({"abc": 1}, "invalid_value"),
                                        ({"99999999": 1}, "invalid_value"),
                                        ({"5": 101}, "invalid_value"),
                                        ({"5": "up"}, "invalid_type")])
def test_bad_logit_bias_is_400(client, bias, code):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="m", messages=USER, max_tokens=1,
                                       logit_bias=bias)
    assert (e.value.param, e.value.code) == ("logit_bias", code)


def test_a_final_assistant_message_is_continued(client, vocab):
    prefill = "The three colours are"
    messages = [*USER, {"role": "assistant", "content": prefill}]
    template = ChatTemplate.from_metadata(vocab.metadata, token_text=vocab.token_text)
    rendered = template.prompt(messages, continue_final=True).text
    assert rendered.endswith("<|im_start|>assistant\n" + prefill)  # left open, not closed
    r = client.chat.completions.create(model="m", messages=messages, max_tokens=12,
                                       temperature=0)
    # the reply is the continuation alone: what the raw prompt continues with
    raw = client.completions.create(model="m", prompt=rendered, max_tokens=12, temperature=0)
    assert r.choices[0].message.content == raw.choices[0].text
    anew = client.chat.completions.create(model="m", messages=USER, max_tokens=12,
                                          temperature=0)
    assert anew.choices[0].message.content != r.choices[0].message.content
    assert r.usage.prompt_tokens == len(vocab.prompt_ids(rendered))


def test_stop_holds_up_to_four_strings(client):
    r = client.chat.completions.create(model="m", messages=USER, max_tokens=4,
                                       stop=["zq1", "zq2", "zq3", "zq4"])
    assert r.choices[0].finish_reason in ("stop", "length")
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="m", messages=USER, max_tokens=4,
                                       stop=["a", "b", "c", "d", "e"])
    assert (e.value.param, e.value.code) == ("stop", "invalid_value")


@pytest.mark.parametrize("extra, field", [
    ({"mirostat": 2}, "mirostat"),
    ({"typical_p": 0.5}, "typical_p"),
    ({"ignore_eos": True}, "ignore_eos"),
    ({"functions": [{"name": "f", "parameters": {}}]}, "functions"),
    ({"modalities": ["text", "audio"]}, "modalities"),
])
def test_fields_not_honoured_are_400_naming_them(client, extra, field):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="m", messages=USER, max_tokens=2,
                                       extra_body=extra)
    assert (e.value.param, e.value.code) == (field, "unsupported_parameter")
    assert field in e.value.body["message"]
    if field in ("functions", "modalities"):
        return  # chat fields
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model="m", prompt="Hi", max_tokens=2, extra_body=extra)
    assert (e.value.param, e.value.code) == (field, "unsupported_parameter")


def test_defaults_of_those_fields_are_served(client):
    r = client.chat.completions.create(model="m", messages=USER, max_tokens=2, extra_body={
        "n": 1, "grammar": "", "json_schema": None, "response_format": {"type": "text"},
        "mirostat": 0, "typical_p": 1.0, "ignore_eos": False, "modalities": ["text"]})
    assert r.choices[0].message.content


def test_unknown_response_format_type_is_400(client):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="m", messages=USER, max_tokens=2,
                                       extra_body={"response_format": {"type": "xml"}})
    assert (e.value.param, e.value.code) == ("response_format", "invalid_value")


def test_reasoning_effort_needs_a_template_that_reads_it(client):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="m", messages=USER, max_tokens=2,
                                       reasoning_effort="low")
    assert (e.value.param, e.value.code) == ("reasoning_effort", "unsupported_parameter")
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="m", messages=USER, max_tokens=2,
                                       extra_body={"reasoning_effort": "extreme"})
    assert (e.value.param, e.value.code) == ("reasoning_effort", "invalid_value")
    # the Responses API's reasoning, which agents send whatever the model, has no effect here
    r = client.responses.create(model="m", input="Hi", max_output_tokens=2,
                                reasoning={"effort": "low"})
    assert r.output_text


@pytest.mark.parametrize("template, body, expected", [
    # gpt-oss' template writes the effort into its system message
    ("openai-gpt-oss-120b", {"reasoning_effort": "low"}, "Reasoning: low"),
    ("openai-gpt-oss-120b", {}, "Reasoning: medium"),
    # llama-server's chat_template_kwargs: Qwen3's switch for thinking
    ("Qwen-Qwen3-0.6B", {"chat_template_kwargs": {"enable_thinking": False}},
     "<|im_start|>assistant\n<think>\n\n</think>\n\n"),
])
def test_template_variables_reach_the_template(tmp_path, templates_dir, template, body,
                                               expected):
    from tests.support.chain_models import hermes_tools_model
    source = (templates_dir / f"{template}.jinja").read_text(encoding="utf-8")
    s = ServerProcess(hermes_tools_model(source).write(tmp_path / "t.gguf"), "-c", "1024")
    try:
        import json
        status, _, raw = s.request("POST", "/apply-template", {"messages": USER, **body})
        assert status == 200, raw
        prompt = json.loads(raw)["prompt"]
        assert expected in prompt
        if "chat_template_kwargs" in body:
            assert prompt.endswith(expected)
    finally:
        s.stop()


def test_chat_template_kwargs_may_not_replace_the_requests_own(client):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="m", messages=USER, max_tokens=2, extra_body={
            "chat_template_kwargs": {"messages": []}})
    assert (e.value.param, e.value.code) == ("chat_template_kwargs", "invalid_value")


def test_n_greedy_choices_are_the_greedy_reply(client):
    one = client.chat.completions.create(model="m", messages=USER, max_tokens=8,
                                         temperature=0)
    many = client.chat.completions.create(model="m", messages=USER, max_tokens=8,
                                          temperature=0, n=2)
    assert [c.index for c in many.choices] == [0, 1]
    assert [c.message.content for c in many.choices] == [one.choices[0].message.content] * 2
    assert many.usage.prompt_tokens == one.usage.prompt_tokens  # the prompt counted once
    assert many.usage.completion_tokens == 2 * one.usage.completion_tokens


def test_n_sampled_choices_are_seed_plus_i(client):
    kw = {"model": "m", "messages": USER, "max_tokens": 10, "temperature": 1.0}
    singles = [client.chat.completions.create(seed=40 + i, **kw).choices[0].message.content
               for i in range(3)]
    assert len(set(singles)) > 1  # the seeds do give different replies
    whole = client.chat.completions.create(seed=40, n=3, **kw)
    assert [c.message.content for c in whole.choices] == singles
    texts, reasons, usage = {}, {}, None
    for chunk in client.chat.completions.create(seed=40, n=3, stream=True,
                                                stream_options={"include_usage": True}, **kw):
        usage = chunk.usage or usage
        for c in chunk.choices:
            texts[c.index] = texts.get(c.index, "") + (c.delta.content or "")
            if c.finish_reason:
                reasons[c.index] = c.finish_reason
    assert [texts[i] for i in range(3)] == singles and set(reasons) == {0, 1, 2}
    assert usage.completion_tokens == whole.usage.completion_tokens
    done = client.completions.create(model="m", prompt="Colours:", max_tokens=6,
                                     temperature=1.0, seed=7, n=2)
    assert [c.text for c in done.choices] == [
        client.completions.create(model="m", prompt="Colours:", max_tokens=6,
                                  temperature=1.0, seed=7 + i).choices[0].text
        for i in range(2)]
