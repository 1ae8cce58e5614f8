"""Session: generation over a context that remembers what its KV cache holds, so a prompt
that shares a prefix with the last one only evaluates what is new."""
from __future__ import annotations

import codecs
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING

from . import native
from .errors import CancelledError, EmberError
from .sampling import GenerationStats, Sampler, SamplingParams

if TYPE_CHECKING:
    import numpy as np  # imported where used: chatting needs no numpy (start-up time, memory)

    from .context import Context
    from .grammar import Grammar
    from .model import Model


class Session:
    """Generation over a context (a Model's default one, or a Context) that remembers which
    tokens are in the KV cache, so a following prompt that shares a prefix only evaluates
    what is new."""

    def __init__(self, target: Model | Context, reuse_prefix: bool = True):
        from .model import Model  # at call time: model.py imports this module
        self.context = target.context if isinstance(target, Model) else target
        self.model = self.context.model
        self.reuse_prefix = reuse_prefix

    @property
    def cached(self) -> list[int]:
        """Tokens whose keys/values are in the context's KV cache, in position order."""
        return self.context.cached

    def _prefill(self, ids: list[int]) -> int:
        """Evaluates ids, reusing the cached common prefix; returns tokens evaluated."""
        ctx = self.context
        cached = self.cached
        common = 0
        if self.reuse_prefix:
            limit = min(len(cached), len(ids) - 1)  # always evaluate at least the last token
            while common < limit and cached[common] == ids[common]:
                common += 1
            # the latest position the memories can restart at: the sliding-window layers may
            # no longer hold what precedes common, a recurrent state only its snapshots
            common = ctx.restart_point(common)
        del cached[common:]
        try:
            ctx.decode(ids[common:], common)
        finally:
            cached[:] = ids[: ctx.n_past]
        return len(ids) - common

    def generate(self, prompt: str | list[int], max_tokens: int = 128,
                 params: SamplingParams | None = None, *,
                 stats: GenerationStats | None = None,
                 cancel: threading.Event | None = None,
                 penalize_prompt: bool = True,
                 on_token: Callable[[int, np.ndarray], None] | None = None,
                 logit_bias: Mapping[int, float] | None = None,
                 special_text: bool = False,
                 grammar: Grammar | None = None) -> Iterator[str]:
        """Yields text pieces. cancel: an event another thread may set before generation
        starts (set later, Context.cancel() is what stops it); the context's flag is reset
        here, so a cancel that came earlier would otherwise be lost. penalize_prompt: the
        prompt's tokens count in the penalties' history (llama.cpp's way); without it only
        generated tokens do (OpenAI's presence and frequency penalties). on_token: called
        with each generated token (end-of-generation excluded) and a copy of the model's
        logits it was drawn from, before its text is yielded (the server's logprobs).
        logit_bias: token id -> a number added to its logit before every draw (OpenAI's
        logit_bias); on_token still sees the model's own logits. special_text: control
        tokens the reply holds are spelled out (Mistral's [TOOL_CALLS], Llama's
        <|python_tag|>: a tool-call parser looks for them); the end-of-generation token that
        ends the reply never is. grammar: the reply is a sentence of it (reset here): before
        each draw the tokens that cannot continue it are masked, and the reply ends, as at
        an end-of-generation token, once the grammar is complete and nothing may follow."""
        import time

        ctx = self.context
        m = self.model
        params = params or SamplingParams()
        ids = m.prompt_ids(prompt) if isinstance(prompt, str) else list(prompt)
        if not ids:
            raise EmberError(native.ERR_INVALID_ARGUMENT, "the prompt is empty")
        stats = stats if stats is not None else GenerationStats()
        stats.prompt_tokens = len(ids)
        sampler = Sampler(params)
        for t in ids if penalize_prompt else ():
            sampler.accept(t)
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        n_vocab = m.n_vocab
        biased = None
        if logit_bias or grammar is not None:
            import numpy as np
            # the sampler reads a row of our own: the context's logits stay the model's
            biased = np.empty(n_vocab, dtype=np.float32)
            biased_ptr = Sampler.row_pointer(biased)
        if logit_bias:
            bias_ids = np.fromiter(logit_bias.keys(), dtype=np.int64, count=len(logit_bias))
            bias_values = np.fromiter(logit_bias.values(), dtype=np.float32,
                                      count=len(logit_bias))
        if grammar is not None:
            grammar.reset()
        ctx.reset_cancel()
        if cancel is not None and cancel.is_set():
            ctx.cancel()
        with ctx._lock:
            t0 = time.perf_counter()
            try:
                stats.prompt_evaluated = self._prefill(ids)
            except CancelledError:
                stats.stop_reason = "cancelled"
                return
            stats.prompt_seconds = time.perf_counter() - t0
            t1 = time.perf_counter()
            try:
                for _ in range(max_tokens):
                    if ctx.cancelled:
                        stats.stop_reason = "cancelled"
                        break
                    ptr = ctx._lib.ember_get_logits(ctx._ctx, -1)
                    if on_token is not None:  # the sampler may change the row in place
                        import numpy as np
                        row = np.ctypeslib.as_array(ptr, shape=(n_vocab,)).copy()
                    if biased is not None:
                        biased[:] = np.ctypeslib.as_array(ptr, shape=(n_vocab,))
                        if logit_bias:
                            biased[bias_ids] += bias_values
                        if grammar is not None:
                            grammar.apply(biased_ptr, n_vocab)
                        ptr = biased_ptr
                    token = sampler.sample(ptr, n_vocab)
                    if grammar is not None and biased[token] == -np.inf:
                        # a draw's running sum can round short of the last kept token's
                        # mass and land past it: take the best token the grammar allows
                        token = int(np.argmax(biased))
                    if m.is_eog(token):
                        stats.stop_reason = "eog"
                        stats.stop_token = token
                        break
                    if grammar is not None:
                        grammar.accept(token)
                    sampler.accept(token)
                    if on_token is not None:
                        on_token(token, row)
                    stats.token_ids.append(token)
                    stats.generated_tokens += 1
                    text = decoder.decode(m.token_to_piece(token, special_text))
                    if text:
                        yield text
                    if grammar is not None and grammar.is_done:
                        stats.stop_reason = "eog"  # complete: the model may only end it
                        break
                    if len(stats.token_ids) == max_tokens:
                        stats.stop_reason = "length"
                        break
                    pos = ctx.n_past
                    if pos >= ctx.n_ctx:
                        stats.stop_reason = "context_full"
                        break
                    try:
                        ctx.decode([token], pos)
                    except CancelledError:
                        stats.stop_reason = "cancelled"
                        break
                    self.cached.append(token)
                else:
                    stats.stop_reason = "length"
                # bytes still held are the start of a character the reply was cut inside
                # (max_tokens, a stop): dropped, as "\ufffd" would show a character never
                # written; invalid bytes met earlier were already replaced
                decoder.reset()
            finally:
                stats.generation_seconds = time.perf_counter() - t1
                sampler.close()
