"""Request bodies of /v1/chat/completions and /v1/completions, checked field by field: a
wrong type, a value out of range or a feature Ember does not have is an ApiError naming the
field, never an exception further in."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from ..engine import SamplingParams
from .constraints import Constraint, request_constraint
from .errors import ApiError, bad_request
from .logprobs import MAX_TOP_LOGPROBS
from .tool_fields import ToolRequest, assistant_tool_calls, name_tool_results, parse_tools
from .unhonoured import (
    CHAT,
    COMMON,
    COMPLETION,
    refuse_unhonoured,
    unsupported,
)

MAX_STOP_STRINGS = 4  # OpenAI's limit
MAX_CHOICES = 16  # n: each choice is a generation of its own (a slot's, in turn)
_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant",
          "tool": "tool"}


@dataclass
class GenerationRequest:
    """What both endpoints ask for once the body is checked."""

    model: str  # the id of the model that answers (whatever the request named)
    stream: bool
    include_usage: bool
    max_tokens: int | None  # None: until the context is full
    stop: tuple[str, ...]
    params: SamplingParams
    messages: list[dict] | None = None  # chat: [{"role", "content"}], content as text
    top_logprobs: int | None = None  # chat with logprobs: how many alternatives; else None
    prompt: str | list[int] | None = None  # completions: text or token ids
    logit_bias: dict[int, float] | None = None  # token id -> added to its logit
    tools: ToolRequest | None = None  # chat with tools
    n: int = 1  # choices
    template_kwargs: dict = field(default_factory=dict)  # chat: more template variables
    reasoning_effort: str | None = None  # chat: for templates that read it (gpt-oss')
    reasoning_optional: bool = False  # a template that does not read it ignores it
    reasoning_format: str = "none"  # chat: "deepseek" puts reasoning in reasoning_content
    constraint: Constraint | None = None  # the reply is a sentence of this grammar


def parse_json(body: bytes) -> dict:
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        raise bad_request(f"The request body is not valid JSON: {e}") from None
    if not isinstance(data, dict):
        raise bad_request("The request body must be a JSON object.")
    return data


def _type_name(v: Any) -> str:
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "array",
            dict: "object", type(None): "null"}.get(type(v), type(v).__name__)


def _number(body: dict, name: str, default: float | None, lo: float, hi: float) -> float | None:
    v = body.get(name)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise bad_request(f"'{name}' must be a number, not {_type_name(v)}.", name, "invalid_type")
    if not lo <= v <= hi:
        raise bad_request(f"'{name}' must be between {lo:g} and {hi:g}, not {v:g}.", name,
                          "invalid_value")
    return float(v)


def _integer(body: dict, name: str, lo: int | None = None) -> int | None:
    v = body.get(name)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise bad_request(f"'{name}' must be an integer, not {_type_name(v)}.", name,
                          "invalid_type")
    if lo is not None and v < lo:
        raise bad_request(f"'{name}' must be at least {lo}, not {v}.", name, "invalid_value")
    return v


def _boolean(body: dict, name: str) -> bool:
    v = body.get(name)
    if v is None:
        return False
    if not isinstance(v, bool):
        raise bad_request(f"'{name}' must be a boolean, not {_type_name(v)}.", name,
                          "invalid_type")
    return v


def _stop(body: dict) -> tuple[str, ...]:
    v = body.get("stop")
    if v is None:
        return ()
    if isinstance(v, str):
        v = [v]
    if not isinstance(v, list) or not all(isinstance(s, str) for s in v):
        raise bad_request("'stop' must be a string or an array of strings.", "stop",
                          "invalid_type")
    if len(v) > MAX_STOP_STRINGS:
        raise bad_request(f"'stop' may hold at most {MAX_STOP_STRINGS} strings.", "stop",
                          "invalid_value")
    return tuple(dict.fromkeys(s for s in v if s))


def _logit_bias(body: dict, n_vocab: int | None) -> dict[int, float] | None:
    """OpenAI's map of token ids (as strings) to a bias from -100 to 100, added to the
    token's logit before sampling (-100 bans it, 100 all but forces it); llama-server's
    list of [id, bias] pairs too."""
    v = body.get("logit_bias")
    if v is None or v == {} or v == []:
        return None
    if isinstance(v, dict):
        pairs = list(v.items())
    elif isinstance(v, list) and all(isinstance(p, list) and len(p) == 2 for p in v):
        pairs = [(str(t), b) for t, b in v]
    else:
        raise bad_request("'logit_bias' must map token ids to numbers.", "logit_bias",
                          "invalid_type")
    out: dict[int, float] = {}
    for key, bias in pairs:
        if not isinstance(key, str) or not key.lstrip("-").isdigit():
            raise bad_request(f"'logit_bias' key '{key}' is not a token id.", "logit_bias",
                              "invalid_value")
        token = int(key)
        if n_vocab is not None and not 0 <= token < n_vocab:
            raise bad_request(f"'logit_bias' names token id {token}, outside the vocabulary "
                              f"(0..{n_vocab - 1}).", "logit_bias", "invalid_value")
        if isinstance(bias, bool) or not isinstance(bias, (int, float)) \
                or not math.isfinite(bias):
            raise bad_request(f"'logit_bias' of token {token} must be a number.", "logit_bias",
                              "invalid_type")
        if not -100 <= bias <= 100:
            raise bad_request(f"'logit_bias' of token {token} must be between -100 and 100, "
                              f"not {bias:g}.", "logit_bias", "invalid_value")
        out[token] = float(bias)
    return out


def _model(body: dict, model_ids: tuple[str, ...], strict: bool) -> str:
    """The id of the model that answers. A one-model server answers whatever a client
    names (tools hard-code "gpt-4o" and the like; llama-server does the same) and says in
    the answer's `model` which model it was; strict (--strict-model-names) wants one of
    the model's own names."""
    model = body.get("model")
    if model is None:
        if strict:
            raise bad_request("'model' is required.", "model", "missing_required_parameter")
        return model_ids[0]
    if not isinstance(model, str):
        raise bad_request(f"'model' must be a string, not {_type_name(model)}.", "model",
                          "invalid_type")
    if strict and model not in model_ids:
        raise ApiError(404, f"The model '{model}' does not exist; this server has "
                            f"'{model_ids[0]}' (GET /v1/models).", param="model",
                       code="model_not_found")
    return model_ids[0]


def _common(body: dict, model_ids: tuple[str, ...], strict: bool, n_vocab: int | None) -> dict:
    model = _model(body, model_ids, strict)
    n = _integer(body, "n", 1) or 1
    if n > MAX_CHOICES:
        raise bad_request(f"'n' must be at most {MAX_CHOICES}, not {n}.", "n", "invalid_value")
    refuse_unhonoured(body, COMMON)
    constraint = request_constraint(body)
    stream = _boolean(body, "stream")
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise bad_request("'stream_options' must be an object.", "stream_options",
                          "invalid_type")
    include_usage = _boolean(options or {}, "include_usage")
    max_tokens = _integer(body, "max_completion_tokens", 1)
    if max_tokens is None:
        max_tokens = _integer(body, "max_tokens", 1)
    seed = _integer(body, "seed")
    top_k = _integer(body, "top_k", 0)
    # What a request leaves out gets the defaults of `ember run` and the app (as llama-server
    # uses its own): top-k 40 and min-p 0.05 keep small models coherent, and spare the
    # sampler a sort of the whole vocabulary per token. top_k 0 / min_p 0 turn them off.
    d = SamplingParams()
    params = SamplingParams(
        temperature=_number(body, "temperature", d.temperature, 0.0, 2.0),
        top_p=_number(body, "top_p", d.top_p, 0.0, 1.0),
        top_k=d.top_k if top_k is None else top_k,
        min_p=_number(body, "min_p", d.min_p, 0.0, 1.0),
        repeat_penalty=_number(body, "repeat_penalty", d.repeat_penalty, 0.01, 10.0),
        presence_penalty=_number(body, "presence_penalty", 0.0, -2.0, 2.0),
        frequency_penalty=_number(body, "frequency_penalty", 0.0, -2.0, 2.0),
        seed=None if seed is None else seed & (2**64 - 1))
    return {"model": model, "stream": stream, "include_usage": include_usage,
            "max_tokens": max_tokens, "stop": _stop(body), "params": params,
            "logit_bias": _logit_bias(body, n_vocab), "n": n, "constraint": constraint}


def _content_text(content: Any, i: int) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text" or \
                    not isinstance(part.get("text"), str):
                raise bad_request(f"messages[{i}].content: only text parts "
                                  "({\"type\": \"text\", \"text\": ...}) are supported.",
                                  f"messages[{i}].content", "unsupported_content")
            parts.append(part["text"])
        return "".join(parts)
    raise bad_request(f"messages[{i}].content must be a string or an array of text parts, "
                      f"not {_type_name(content)}.", f"messages[{i}].content", "invalid_type")


def _messages(body: dict) -> list[dict]:
    msgs = body.get("messages")
    if msgs is None:
        raise bad_request("'messages' is required.", "messages", "missing_required_parameter")
    if not isinstance(msgs, list):
        raise bad_request(f"'messages' must be an array, not {_type_name(msgs)}.", "messages",
                          "invalid_type")
    if not msgs:
        raise bad_request("'messages' must hold at least one message.", "messages",
                          "invalid_value")
    out = []
    for i, m in enumerate(msgs):
        if not isinstance(m, dict):
            raise bad_request(f"messages[{i}] must be an object, not {_type_name(m)}.",
                              f"messages[{i}]", "invalid_type")
        role = m.get("role")
        if not isinstance(role, str):
            raise bad_request(f"messages[{i}].role must be a string.", f"messages[{i}].role",
                              "invalid_type")
        if role not in _ROLES:
            raise bad_request(f"messages[{i}].role '{role}' is not one of "
                              f"{', '.join(_ROLES)}.", f"messages[{i}].role", "invalid_value")
        content = m.get("content")
        calls = m.get("tool_calls") if role == "assistant" else None
        if content is None and role != "assistant":
            raise bad_request(f"messages[{i}].content is required.", f"messages[{i}].content",
                              "missing_required_parameter")
        msg = {"role": _ROLES[role], "content": "" if content is None
               else _content_text(content, i)}
        if calls:
            msg["tool_calls"] = assistant_tool_calls(calls, i)
        if role == "tool":
            call_id = m.get("tool_call_id")
            if call_id is not None and not isinstance(call_id, str):
                raise bad_request(f"messages[{i}].tool_call_id must be a string.",
                                  f"messages[{i}].tool_call_id", "invalid_type")
            msg["tool_call_id"] = call_id or ""
            if isinstance(m.get("name"), str):
                msg["name"] = m["name"]
        out.append(msg)
    name_tool_results(out)
    return out


def _chat_logprobs(body: dict) -> int | None:
    """OpenAI's two fields: logprobs (a boolean) turns them on, top_logprobs (0..20, only
    with logprobs) asks for that many alternatives per token."""
    wanted = _boolean(body, "logprobs")
    top = _integer(body, "top_logprobs", 0)
    if top is not None and top > MAX_TOP_LOGPROBS:
        raise bad_request(f"'top_logprobs' must be at most {MAX_TOP_LOGPROBS}, not {top}.",
                          "top_logprobs", "invalid_value")
    if top is not None and not wanted:
        raise bad_request("'top_logprobs' needs 'logprobs': true.", "top_logprobs",
                          "invalid_value")
    return (top or 0) if wanted else None


def parse_chat(body: dict, model_ids: tuple[str, ...], strict: bool = False,
               n_vocab: int | None = None, reasoning_format: str = "none"
               ) -> GenerationRequest:
    """reasoning_format: the server's default (--reasoning-format) for a request that
    does not say."""
    messages = _messages(body)  # before the model: a request without messages says so first
    common = _common(body, model_ids, strict, n_vocab)
    refuse_unhonoured(body, CHAT)
    return GenerationRequest(messages=messages, top_logprobs=_chat_logprobs(body),
                             tools=parse_tools(body), template_kwargs=_template_kwargs(body),
                             reasoning_effort=_reasoning_effort(body),
                             reasoning_format=_reasoning_format(body, reasoning_format),
                             **common)


REASONING_FORMATS = ("deepseek", "none")


def _reasoning_format(body: dict, default: str) -> str:
    """llama-server's reasoning_format: "deepseek" (and "auto") return a reply's reasoning
    block in reasoning_content, "none" leaves it in content."""
    v = body.get("reasoning_format")
    if v is None:
        return default
    if v == "auto":
        return "deepseek"
    if v not in REASONING_FORMATS:
        raise bad_request(f"'reasoning_format' must be auto, deepseek or none, not {v!r}.",
                          "reasoning_format", "invalid_value")
    return v


# what a chat template is given by the server itself, which a request may not replace
_TEMPLATE_OWN = frozenset({"messages", "tools", "documents", "add_generation_prompt",
                           "bos_token", "eos_token"})
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")


def _template_kwargs(body: dict) -> dict:
    """llama-server's chat_template_kwargs: variables for the template (enable_thinking for
    Qwen3's, and the like), passed as they are."""
    v = body.get("chat_template_kwargs")
    if v is None:
        return {}
    if not isinstance(v, dict) or not all(isinstance(k, str) for k in v):
        raise bad_request("'chat_template_kwargs' must be an object.", "chat_template_kwargs",
                          "invalid_type")
    own = sorted(_TEMPLATE_OWN & set(v))
    if own:
        raise bad_request(f"'chat_template_kwargs' may not set {', '.join(own)} (the request's "
                          f"own fields do).", "chat_template_kwargs", "invalid_value")
    return dict(v)


def _reasoning_effort(body: dict) -> str | None:
    return check_reasoning_effort(body.get("reasoning_effort"))


def check_reasoning_effort(v) -> str | None:
    if v is None:
        return None
    if v not in REASONING_EFFORTS:
        raise bad_request(f"'reasoning_effort' must be one of {', '.join(REASONING_EFFORTS)}.",
                          "reasoning_effort", "invalid_value")
    return v


def _prompt(body: dict, n_vocab: int) -> str | list[int]:
    p = body.get("prompt")
    if p is None:
        raise bad_request("'prompt' is required.", "prompt", "missing_required_parameter")
    if isinstance(p, list) and len(p) == 1 and isinstance(p[0], (str, list)):
        p = p[0]  # a batch of one prompt
    if isinstance(p, str):
        return p
    if isinstance(p, list) and p and all(isinstance(t, int) and not isinstance(t, bool)
                                         for t in p):
        bad = next((t for t in p if not 0 <= t < n_vocab), None)
        if bad is not None:
            raise bad_request(f"'prompt' holds token id {bad}, outside the vocabulary "
                              f"(0..{n_vocab - 1}).", "prompt", "invalid_value")
        return p
    if isinstance(p, list) and len(p) > 1 and all(isinstance(x, (str, list)) for x in p):
        raise unsupported("prompt", "one prompt per request")
    raise bad_request("'prompt' must be a string, an array of token ids, or an array holding "
                      "one of those.", "prompt", "invalid_type")


def parse_completion(body: dict, model_ids: tuple[str, ...], n_vocab: int,
                     strict: bool = False) -> GenerationRequest:
    prompt = _prompt(body, n_vocab)
    common = _common(body, model_ids, strict, n_vocab)
    refuse_unhonoured(body, COMPLETION)
    return GenerationRequest(prompt=prompt, **common)
