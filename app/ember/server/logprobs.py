"""OpenAI's log-probabilities for chat answers: each generated token's log-probability under
the model (its raw logits through a log-softmax: before temperature, penalties or top-k) and,
with top_logprobs, the likeliest tokens at that step."""
from __future__ import annotations

import numpy as np

MAX_TOP_LOGPROBS = 20  # OpenAI's limit


def _token(piece: bytes, logprob: float) -> dict:
    return {"token": piece.decode("utf-8", errors="replace"), "logprob": logprob,
            "bytes": list(piece)}


def token_entry(model, token: int, logits: np.ndarray, top: int) -> dict:
    """One element of choices[].logprobs.content."""
    x = logits.astype(np.float64)
    m = x.max()
    logp = x - (m + np.log(np.exp(x - m).sum()))
    entry = _token(model.token_to_piece(token), float(logp[token]))
    best = []
    if top:
        ids = np.argpartition(-logp, top - 1)[:top]
        ids = ids[np.lexsort((ids, -logp[ids]))]  # likeliest first; ties by id, as a sort
        best = [_token(model.token_to_piece(int(i)), float(logp[i])) for i in ids]
    entry["top_logprobs"] = best
    return entry


def content(entries: list[dict]) -> dict:
    return {"content": entries, "refusal": None}
