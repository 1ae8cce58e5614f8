"""One generation request on its way through a slot: the job a request handler submits,
and what a slot's thread does with it (stop strings, finish reason, token counts)."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass

from ..chat import BuiltPrompt, CancelToken, stream_reply
from ..engine import Context, EmberError, GenerationStats, Grammar, SamplingParams, Session
from .logprobs import token_entry

# the engine's stop reasons as OpenAI's finish_reason
_FINISH = {"eog": "stop", "stop_string": "stop", "length": "length", "context_full": "length",
           "cancelled": "cancelled"}


@dataclass
class Finish:
    reason: str  # "stop", "length" (or "cancelled", which no client sees)
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = 0  # prompt tokens the slot's KV cache already held
    stop_string: str | None = None  # the stop string that ended the reply, if one did


class Job:
    """A prompt to generate from; its events reach the handler's event loop as
    ("text", str), ("error", str) and, last, ("done", Finish); with top_logprobs set, each
    "text" is preceded by ("logprobs", [entry, ...]) for the tokens that text completes."""

    def __init__(self, ids: list[int], max_tokens: int, params: SamplingParams,
                 stops: tuple[str, ...], loop: asyncio.AbstractEventLoop,
                 top_logprobs: int | None = None, logit_bias: dict[int, float] | None = None,
                 special_text: bool = False, grammar: Grammar | None = None):
        self.ids = ids
        self.grammar = grammar  # the reply is a sentence of it (response_format, grammar)
        self.logit_bias = logit_bias
        self.special_text = special_text  # control tokens spelled out (a tool-call parser)
        self.reply = None  # the handler's ReplyFilter (reasoning apart, tool calls parsed)
        self.top_logprobs = top_logprobs
        self.max_tokens = max_tokens
        self.params = params
        self.stops = stops
        self.events: asyncio.Queue = asyncio.Queue()
        self.token = CancelToken()  # the slot's context is attached while it runs
        self.done = False  # generation over: a cancel now changes nothing
        self._loop = loop

    @property
    def cancelled(self) -> bool:
        return self.token.cancelled

    def emit(self, kind: str, value) -> None:
        try:
            self._loop.call_soon_threadsafe(self.events.put_nowait, (kind, value))
        except RuntimeError:
            pass  # the event loop has closed: the server is shutting down

    def cancel(self) -> None:
        """From any thread: a queued job is skipped, a running one stops within a token
        (or a layer, inside a prefill)."""
        if not self.done:
            self.token.cancel()


def run_job(ctx: Context, job: Job, session: Session | None = None) -> GenerationStats:
    """Generates on ctx for job, in the slot's thread, through the app's reply loop; returns
    the generation's counts (the server's metrics add them up). session: the slot's own on
    ctx (which carries its speculative-decoding settings and draft context), else a new one."""
    stats = GenerationStats()
    session = session if session is not None else Session(ctx)
    pending: list[dict] = []  # logprobs of tokens whose text has not been sent yet
    on_token = None
    if job.top_logprobs is not None:
        def on_token(token, logits):
            pending.append(token_entry(ctx.model, token, logits, job.top_logprobs))

    def send(text: str) -> None:
        if job.top_logprobs is not None:
            job.emit("logprobs", pending[:])
            pending.clear()
        job.emit("text", text)

    built = BuiltPrompt(text="", stop_strings=job.stops, n_tokens=len(job.ids),
                        max_tokens=job.max_tokens, ids=job.ids)
    job.token.attach(ctx)
    try:
        # tokens held back by the stop scanner go with the text that releases them; those
        # of a stop string itself are never sent, as its text is not. OpenAI's penalties
        # count the tokens generated so far, not the prompt's.
        for text in stream_reply(session, built, job.params, stats, job.token,
                                 penalize_prompt=False, on_token=on_token,
                                 logit_bias=job.logit_bias,
                                 special_text=job.special_text, grammar=job.grammar):
            send(text)
        if pending and stats.stop_reason not in ("stop_string", "cancelled"):
            send("")  # the last tokens' logprobs, whose text was empty
    except EmberError as e:
        job.done = True
        job.emit("error", f"generation failed: {e}")
        return stats
    finally:
        job.token.attach(None)
    reason = _FINISH.get(stats.stop_reason, "stop")
    job.done = reason != "cancelled"
    prompt_tokens = stats.prompt_tokens or len(job.ids)
    cached = prompt_tokens - stats.prompt_evaluated if stats.prompt_evaluated else 0
    job.emit("done", Finish(reason, prompt_tokens, stats.generated_tokens, cached,
                            stats.stop_string))
    return stats
