"""llama-server's extra endpoints that popular clients call (SillyTavern, Open WebUI,
Prometheus): /tokenize, /detokenize, /apply-template, /props and /metrics, as functions of
the loaded model and a checked body (app.py routes them)."""
from __future__ import annotations

from ..engine import SamplingParams
from .errors import bad_request
from .protocol import parse_chat
from .responses import FINGERPRINT


def _boolean(body: dict, name: str, default: bool) -> bool:
    v = body.get(name, default)
    if not isinstance(v, bool):
        raise bad_request(f"'{name}' must be a boolean.", name, "invalid_type")
    return v


def _piece(model, token: int) -> str | list[int]:
    # llama-server's shape: the text when the token is whole UTF-8, else its bytes
    raw = model.token_to_piece(token, True)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return list(raw)


def tokenize(loaded, body: dict) -> dict:
    """{"content", "add_special" (false), "parse_special" (true), "with_pieces" (false)}."""
    content = body.get("content")
    if not isinstance(content, str):
        raise bad_request("'content' must be a string.", "content",
                          "missing_required_parameter" if content is None else "invalid_type")
    ids = loaded.model.tokenize(content, add_special=_boolean(body, "add_special", False),
                                parse_special=_boolean(body, "parse_special", True))
    if _boolean(body, "with_pieces", False):
        return {"tokens": [{"id": t, "piece": _piece(loaded.model, t)} for t in ids]}
    return {"tokens": ids}


def detokenize(loaded, body: dict) -> dict:
    tokens = body.get("tokens")
    if not isinstance(tokens, list) or not all(
            isinstance(t, int) and not isinstance(t, bool) for t in tokens):
        raise bad_request("'tokens' must be an array of token ids.", "tokens",
                          "missing_required_parameter" if tokens is None else "invalid_type")
    n_vocab = loaded.model.n_vocab
    bad = next((t for t in tokens if not 0 <= t < n_vocab), None)
    if bad is not None:
        raise bad_request(f"'tokens' holds token id {bad}, outside the vocabulary "
                          f"(0..{n_vocab - 1}).", "tokens", "invalid_value")
    if not tokens:
        return {"content": ""}
    return {"content": loaded.model.detokenize(tokens, unparse_special=True)}


def apply_template(loaded, body: dict) -> dict:
    """The prompt a chat request would be given (tools, prefill and a forced call opening
    included), not generated from."""
    req = parse_chat(body, loaded.ids, False, loaded.model.n_vocab)
    text, _, _ = loaded.chat_prompt(req)
    return {"prompt": text}


def props(loaded) -> dict:
    d = SamplingParams()
    m = loaded.model
    support = loaded.tool_support
    return {
        "default_generation_settings": {
            "n_ctx": loaded.n_ctx,
            "params": {"temperature": d.temperature, "top_k": d.top_k, "top_p": d.top_p,
                       "min_p": d.min_p, "repeat_penalty": d.repeat_penalty,
                       "presence_penalty": 0.0, "frequency_penalty": 0.0}},
        "total_slots": len(loaded.pool.contexts),
        "model_path": str(loaded.path),
        "model_alias": loaded.id,
        "chat_template": loaded.template.source,
        "bos_token": loaded.template.bos_token,
        "eos_token": loaded.template.eos_token,
        "modalities": {"vision": False, "audio": False},
        "build_info": FINGERPRINT,
        "ember": {"arch": m.arch, "n_ctx_train": m.n_ctx_train,
                  "chat_template_fallback": loaded.template.is_fallback,
                  "tool_calls": support.format.name if support.usable else None},
    }


# (name, type, help, key in SlotPool.metrics())
_METRICS = (
    ("ember_prompt_tokens_total", "counter",
     "Prompt tokens of finished and cancelled requests (cached ones included).", "prompt_tokens"),
    ("ember_prompt_tokens_evaluated_total", "counter",
     "Prompt tokens the model evaluated (not found in a slot's cache).",
     "prompt_tokens_evaluated"),
    ("ember_prompt_seconds_total", "counter", "Seconds spent evaluating prompts.",
     "prompt_seconds"),
    ("ember_tokens_predicted_total", "counter", "Tokens generated.", "generated_tokens"),
    ("ember_tokens_predicted_seconds_total", "counter", "Seconds spent generating tokens.",
     "generation_seconds"),
    ("ember_draft_tokens_total", "counter",
     "Drafted tokens verified (speculative decoding: --model-draft, --lookup).", "draft_tokens"),
    ("ember_draft_tokens_accepted_total", "counter", "Drafted tokens the model accepted.",
     "draft_tokens_accepted"),
    ("ember_requests_finished_total", "counter", "Requests answered to the end.",
     "requests_finished"),
    ("ember_requests_cancelled_total", "counter", "Requests whose client left.",
     "requests_cancelled"),
    ("ember_requests_processing", "gauge", "Requests generating now.", "slots_processing"),
    ("ember_requests_waiting", "gauge", "Requests waiting for a slot.", "requests_waiting"),
    ("ember_slots_idle", "gauge", "Slots with nothing to do.", "slots_idle"),
)


def metrics_text(loaded) -> str:
    """Prometheus' text exposition format (0.0.4)."""
    values = loaded.pool.metrics()
    lines = []
    for name, kind, help_text, key in _METRICS:
        v = values[key]
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}",
                  f"{name} {v if isinstance(v, int) else repr(float(v))}"]
    return "\n".join(lines) + "\n"
