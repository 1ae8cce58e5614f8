"""An OpenAI-compatible endpoint used as the app's model: what stands in for a loaded
Model (RemoteModel), and a reply streamed from it with the same stop and statistics as a
local one. The endpoint renders its own chat template and fits its own context."""
from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from .chat import GenRequest, strip_thoughts_from_history
from .remote import RemoteEndpoint, RemoteError

FINISH_REASONS = {"stop": "eog", "length": "length", "content_filter": "eog"}


def endpoint_key(url: str, model_id: str) -> str:
    """How the app names an endpoint's model where it would name a file (recent models,
    a chat's model, a reply's meta): "http://host:port/v1#model"."""
    return f"{url.rstrip('/')}#{model_id}"


@dataclass
class RemoteModel:
    url: str
    model_id: str
    api_key: str | None = None
    endpoint: RemoteEndpoint = field(init=False)

    def __post_init__(self):
        self.endpoint = RemoteEndpoint(self.url, api_key=self.api_key or None, timeout=120)

    def close(self) -> None:  # nothing held between requests
        pass

    def info(self) -> dict:
        key = endpoint_key(self.url, self.model_id)
        return {"remote": True, "path": key, "file_name": self.model_id,
                "name": self.model_id, "url": self.url, "n_ctx": None,
                "has_template": True, "builtin_format": None, "arch": "remote",
                "ftype": "", "n_ctx_train": 0}


def open_endpoint(url: str, model_id: str = "", api_key: str | None = None) -> RemoteModel:
    """Asks the endpoint for its models; model_id "" takes the first. Raises RemoteError
    (refused, unauthorized, timeout...) or ValueError (not an http(s) address)."""
    model = RemoteModel(url, model_id, api_key)
    ids = model.endpoint.models()
    if not ids:
        raise RemoteError("protocol", "The endpoint serves no models.")
    if not model_id:
        model.model_id = ids[0]
    elif model_id not in ids:
        raise RemoteError("http", f"The endpoint does not serve {model_id!r} "
                                  f"(it serves {', '.join(ids)}).")
    return model


def stream_remote_reply(model: RemoteModel, req: GenRequest, token, stats: dict
                        ) -> Iterator[str]:
    """Yields the reply's text and fills stats (the keys a local reply's stats have)."""
    if req.prefix:
        raise RemoteError("http", "Continue is not available for an endpoint's model: the "
                                  "API has no way to extend a reply. Regenerate instead.")
    p = req.params
    options = {"max_tokens": req.max_new_tokens}
    if p is not None:
        options.update(temperature=p.temperature, top_p=p.top_p)
        if p.seed is not None:
            options["seed"] = p.seed
    messages = [{"role": m["role"], "content": m["content"]}
                for m in strip_thoughts_from_history(req.messages)]
    t0 = time.perf_counter()
    stats.update(prompt_tokens=0, generated_tokens=0, prompt_evaluated=0, prompt_seconds=0.0,
                 generation_seconds=0.0, stop_reason="", n_past=0)
    if token.cancelled:
        stats["stop_reason"] = "cancelled"
        return
    stream = model.endpoint.chat(model.model_id, messages, **options)
    token.attach(stream)  # a Stop from now on cancels the stream
    first = None
    pieces = 0
    for text in stream:
        if first is None:
            first = time.perf_counter()
        pieces += 1
        yield text
        if token.cancelled:
            break
    end = time.perf_counter()
    usage = stream.usage or {}
    stats["prompt_tokens"] = int(usage.get("prompt_tokens") or 0)
    stats["prompt_evaluated"] = stats["prompt_tokens"] - int(
        (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
    stats["generated_tokens"] = int(usage.get("completion_tokens") or pieces)
    stats["prompt_seconds"] = (first or end) - t0
    stats["generation_seconds"] = end - (first or end)
    stats["n_past"] = int(usage.get("total_tokens") or 0)
    stats["stop_reason"] = ("cancelled" if token.cancelled else
                            FINISH_REASONS.get(stream.finish_reason or "", "eog"))
