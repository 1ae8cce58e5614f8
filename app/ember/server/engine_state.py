"""The loaded model as the server sees it: its ids, its chat template (the app's code path:
ChatTemplate.from_metadata, then Prompt), the slots, and the request -> job step (prompt
tokens, stop strings, the context-length check)."""
from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

from ..chat import ChatTemplate, ChatTemplateError
from ..engine import Model
from .errors import ApiError, bad_request
from .jobs import Job
from .protocol import GenerationRequest
from .slots import SlotPool


def model_ids(path: Path, alias: str | None) -> tuple[str, ...]:
    """The id /v1/models reports first, then the other names a request may use."""
    name = path.name
    stem = name[:-5] if name.lower().endswith(".gguf") else name
    ids = ([alias] if alias else []) + [stem, name]
    return tuple(dict.fromkeys(ids))


class LoadedModel:
    def __init__(self, path: Path, *, n_slots: int, n_ctx: int | None, n_threads: int | None,
                 alias: str | None = None, model: Model | None = None,
                 strict_model_names: bool = False):
        """model: serve a model already loaded (the app's: the slots are new contexts on
        its weights, and close() leaves it open), else path is loaded. strict_model_names:
        a request must name this model (else any name is answered by it)."""
        self.path = path
        self.ids = model_ids(path, alias)
        self.strict_model_names = strict_model_names
        self._owns_model = model is None
        self.model = model if model is not None else Model(path, n_ctx=n_ctx,
                                                           n_threads=n_threads)
        self.template = ChatTemplate.from_metadata(self.model.metadata,
                                                   token_text=self.model.token_text)
        self.pool = SlotPool(self.model, n_slots, n_ctx, n_threads)
        self.n_ctx = self.pool.n_ctx

    @property
    def id(self) -> str:
        return self.ids[0]

    def prepare(self, req: GenerationRequest, loop: asyncio.AbstractEventLoop) -> Job:
        """Tokens and stop strings of a checked request (in a worker thread: a template and
        a long prompt take a while)."""
        stops = req.stop
        if req.messages is not None:
            # an assistant message at the end is a prefill: the reply continues it
            prefill = req.messages[-1]["role"] == "assistant"
            try:
                prompt = self.template.prompt(req.messages, continue_final=prefill)
            except ChatTemplateError as e:
                raise bad_request(f"The model's chat template cannot render these messages: "
                                  f"{e}", "messages") from None
            ids = self.model.prompt_ids(prompt.text)
            stops = tuple(dict.fromkeys((*prompt.stop_strings, *req.stop)))
        elif isinstance(req.prompt, str):
            ids = self.model.prompt_ids(req.prompt)
        else:
            ids = list(req.prompt or [])
        if not ids:
            raise bad_request("The prompt is empty.", "prompt")
        room = self.n_ctx - len(ids)
        if room < 1:
            raise ApiError(400, f"This model's maximum context length is {self.n_ctx} tokens. "
                                f"However, your {'messages' if req.messages is not None else 'prompt'}"
                                f" resulted in {len(ids)} tokens, leaving no room for a reply.",
                           param="messages" if req.messages is not None else "prompt",
                           code="context_length_exceeded",
                           # llama-server's counts, which its clients read to trim a chat
                           extra={"n_prompt_tokens": len(ids), "n_ctx": self.n_ctx})
        # a reply longer than the context has room for ends there, with finish_reason "length"
        max_tokens = room if req.max_tokens is None else min(req.max_tokens, room)
        # OpenAI's penalties count every token generated so far: a window as long as the context
        params = dataclasses.replace(req.params, penalty_last_n=self.n_ctx)
        return Job(ids, max_tokens, params, stops, loop, req.top_logprobs, req.logit_bias)

    def close(self) -> None:
        self.pool.close()
        for ctx in self.pool.contexts:
            ctx.close()
        if self._owns_model:
            self.model.close()
