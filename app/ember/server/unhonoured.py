"""Request fields that would change the answer and that Ember does not honour yet: each is
refused with a 400 naming it, never ignored. A field leaves this table when its feature
lands (grammar, json_schema and response_format left with the grammar sampler: they are
read by constraints.py)."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .errors import ApiError, bad_request


@dataclass(frozen=True)
class Unhonoured:
    field: str
    is_asked: Callable[[Any], bool]  # the value asks for something (not a default, not off)
    why: str  # what Ember does instead, for the error message


def _set(v: Any) -> bool:
    return v is not None and v is not False and v != "" and v != [] and v != {}


def _above(limit: float) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and v > limit


def _below(limit: float) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and v < limit


def _not_text_modalities(v: Any) -> bool:
    return isinstance(v, list) and any(m != "text" for m in v)


# both endpoints
COMMON = (
    Unhonoured("mirostat", _above(0), "no Mirostat sampler"),
    Unhonoured("typical_p", _below(1), "no locally typical sampling"),
    Unhonoured("top_n_sigma", _above(0), "no top-n-sigma sampling"),
    Unhonoured("dynatemp_range", _above(0), "no dynamic temperature"),
    Unhonoured("xtc_probability", _above(0), "no XTC sampler"),
    Unhonoured("dry_multiplier", _above(0), "no DRY repetition penalty"),
    Unhonoured("samplers", _set, "the sampler order is fixed"),
    Unhonoured("ignore_eos", lambda v: v is True, "generation always ends at end of turn"),
    Unhonoured("n_probs", _above(0), "use logprobs and top_logprobs on chat"),
)

CHAT = (
    Unhonoured("functions", _set, "the legacy functions field: send tools instead"),
    Unhonoured("function_call", _set, "the legacy function_call field: send tool_choice"),
    Unhonoured("modalities", _not_text_modalities, "text output only"),
    Unhonoured("audio", _set, "text output only"),
    Unhonoured("prediction", _set, "no predicted outputs"),
)

COMPLETION = (
    Unhonoured("echo", lambda v: v is True, "the prompt is not echoed"),
    Unhonoured("suffix", _set, "no fill-in-the-middle"),
    Unhonoured("logprobs", lambda v: v not in (None, False, 0),
               "log-probabilities come with /v1/chat/completions only"),
    Unhonoured("best_of", _above(1), "one choice per request"),
)


def unsupported(name: str, what: str) -> ApiError:
    return bad_request(f"'{name}' is not supported by Ember's server ({what}).", name,
                       "unsupported_parameter")


def refuse_unhonoured(body: dict, table: tuple[Unhonoured, ...]) -> None:
    for entry in table:
        if entry.field in body and entry.is_asked(body[entry.field]):
            raise unsupported(entry.field, entry.why)
