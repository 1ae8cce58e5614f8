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
    from .speculative import DraftModel, SpeculativeParams

# A recurrent model (Qwen3.5) rewinds to a state snapshot and evaluates again from there;
# when the latest snapshot is further back than this, drafts cost more than they save.
SPECULATIVE_REPLAY_LIMIT = 64


class Session:
    """Generation over a context (a Model's default one, or a Context) that remembers which
    tokens are in the KV cache, so a following prompt that shares a prefix only evaluates
    what is new."""

    def __init__(self, target: Model | Context, reuse_prefix: bool = True,
                 speculative: SpeculativeParams | None = None):
        from .model import Model  # at call time: model.py imports this module
        self.context = target.context if isinstance(target, Model) else target
        self.model = self.context.model
        self.reuse_prefix = reuse_prefix
        self.speculative = speculative  # generate()'s default (engine/speculative.py)
        self._drafter: DraftModel | None = None  # the draft model's context, kept between replies

    def _draft_model(self, spec: SpeculativeParams) -> DraftModel:
        """The drafter for spec's draft model, made once per draft model (its own context,
        whose cache, like the target's, is reused by the next reply)."""
        from .speculative import DraftModel
        d = self._drafter
        if d is None or d.model is not spec.draft_model:
            if d is not None:
                d.close()
            n_ctx = spec.draft_n_ctx or self.context.n_ctx
            self._drafter = d = DraftModel(spec.draft_model, self.model, n_ctx, spec.draft_p_min)
        d.p_min = spec.draft_p_min
        return d

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
                 grammar: Grammar | None = None,
                 speculative: SpeculativeParams | None = None) -> Iterator[str]:
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
        an end-of-generation token, once the grammar is complete and nothing may follow.
        speculative: drafts verified in batches (engine/speculative.py; None: the session's
        default): greedy replies are the same tokens, sampled ones have the same
        distribution. Not with a grammar: its state cannot be rewound past a rejected
        draft, so a constrained reply is decoded plainly (stats.speculative says so)."""
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
        spec = speculative if speculative is not None else self.speculative
        if spec is not None and not spec.enabled:
            spec = None
        if spec is not None and grammar is not None:
            stats.speculative = ("off: a grammar constrains the reply (its state cannot be "
                                 "rewound past a rejected draft)")
            spec = None
        drafter = self._draft_model(spec) if spec is not None and spec.draft_model else None
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
                if spec is not None:
                    yield from self._speculative_loop(
                        ids, max_tokens, params, spec, drafter, stats, sampler, decoder,
                        on_token, logit_bias, special_text)
                    return
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

    def _speculative_loop(self, ids: list[int], max_tokens: int, params: SamplingParams,
                          spec: SpeculativeParams, drafter: DraftModel | None,
                          stats: GenerationStats, sampler: Sampler, decoder,
                          on_token, logit_bias, special_text: bool) -> Iterator[str]:
        """generate()'s token loop with drafts, after the prompt's prefill.

        Each pass evaluates the last emitted token t (not yet in the cache) and the drafts
        d1..dk in one batch at t's position; row i of its logits is the target's prediction
        after d_i (row 0: after t). The drafts are checked in order by the accept/reject
        rule against the target's sampling distribution (the sampler's, so penalties,
        top-k/p, min-p and temperature count as in plain decoding); the first rejection
        emits the rule's replacement, a run with none emits one more token from the last
        row. What the cache holds past the accepted tokens is simply decoded over by the
        next pass (an attention cache keeps positions < pos0); a recurrent state restarts
        at its latest snapshot, the tokens from there evaluated again in the same batch."""
        import time

        import numpy as np

        from .speculative import DraftLength, PromptLookup, accept_or_resample, draw

        ctx = self.context
        m = self.model
        n_vocab = m.n_vocab
        lib = ctx._lib
        stats.speculative = spec.describe()
        rng = np.random.default_rng(params.seed)
        lookup = PromptLookup(spec.ngram_min, spec.ngram_max) if spec.lookup else None
        draft_sampler = None
        if drafter is not None:
            # the draft's own proposal distribution: any distribution keeps the rule exact;
            # the target's truncation without its penalties is a close one
            draft_sampler = Sampler(SamplingParams(
                temperature=params.temperature, top_k=params.top_k, top_p=params.top_p,
                min_p=params.min_p, repeat_penalty=1.0, presence_penalty=0.0,
                frequency_penalty=0.0, seed=0))
        # A recurrent state (Qwen3.5) is kept at one point of a batch: before its last
        # token. With one draft per pass, [t, d1], that point is just after t, so whether d1
        # is kept or not the next pass starts at a state the context holds; with more, a
        # rejection before the last draft would evaluate again from an older snapshot.
        draft_cap = spec.draft_max
        if ctx.state_bytes > 0:
            draft_cap = min(draft_cap, 1)
            stats.speculative += "; one draft per pass (recurrent state)"
        length = DraftLength(min(spec.draft_min, draft_cap), draft_cap, spec.adaptive)
        drafting = True
        biased = np.empty(n_vocab, dtype=np.float32)
        biased_ptr = Sampler.row_pointer(biased)
        if logit_bias:
            bias_ids = np.fromiter(logit_bias.keys(), dtype=np.int64, count=len(logit_bias))
            bias_values = np.fromiter(logit_bias.values(), dtype=np.float32, count=len(logit_bias))

        def target_distribution(ptr):
            if logit_bias:
                biased[:] = np.ctypeslib.as_array(ptr, shape=(n_vocab,))
                biased[bias_ids] += bias_values
                ptr = biased_ptr
            return sampler.distribution(ptr, n_vocab)

        history = list(ids)  # the prompt and the tokens emitted so far

        def emit(token: int, ptr) -> tuple[str, bool]:
            """One token of the reply, as the plain loop takes it: (text, stop)."""
            if m.is_eog(token):
                stats.stop_reason = "eog"
                stats.stop_token = token
                return "", True
            sampler.accept(token)
            if on_token is not None:
                on_token(token, np.ctypeslib.as_array(ptr, shape=(n_vocab,)).copy())
            history.append(token)
            stats.token_ids.append(token)
            stats.generated_tokens += 1
            text = decoder.decode(m.token_to_piece(token, special_text))
            if len(stats.token_ids) == max_tokens:
                stats.stop_reason = "length"
                return text, True
            return text, False

        try:
            if max_tokens <= 0:
                stats.stop_reason = "length"
                return
            if ctx.cancelled:
                stats.stop_reason = "cancelled"
                return
            # the first token from the prefill's row, as plain decoding draws it
            ptr = lib.ember_get_logits(ctx._ctx, -1)
            p_ids, p_probs = target_distribution(ptr)
            text, stop = emit(draw(p_ids, p_probs, rng.random()), ptr)
            if text:
                yield text
            if stop:
                return
            pos = len(ids)  # where the pending token (history[-1]) goes; the cache holds what precedes
            while True:
                if ctx.cancelled:
                    stats.stop_reason = "cancelled"
                    break
                if pos >= ctx.n_ctx:
                    stats.stop_reason = "context_full"
                    break
                room = min(max_tokens - len(stats.token_ids) - 1, ctx.n_ctx - pos - 1)
                drafts: list[int] = []
                dists: list = []
                want = min(length.next(), room) if drafting else 0
                if want > 0:
                    t_draft = time.perf_counter()
                    if lookup is not None:
                        drafts = lookup.propose(history, want)
                        dists = [None] * len(drafts)
                    if not drafts and spec.drafter is not None:
                        drafts = list(spec.drafter.propose(history, want))[:want]
                        bad = [i for i, t in enumerate(drafts) if not 0 <= t < n_vocab]
                        drafts = drafts[:bad[0]] if bad else drafts
                        dists = [None] * len(drafts)
                    if not drafts and drafter is not None:
                        drafts, dists = drafter.propose(history, want, params, draft_sampler, rng)
                        length.observe_drafting(len(drafts), time.perf_counter() - t_draft)
                    if len(drafts) < min(spec.draft_min, draft_cap):
                        drafts, dists = [], []
                start = ctx.restart_point(pos)
                if pos - start > SPECULATIVE_REPLAY_LIMIT and drafting:
                    drafting = False
                    drafts, dists = [], []
                    stats.speculative += (f"; stopped: the recurrent state's latest snapshot is "
                                          f"{pos - start} tokens back")
                batch = history[start:pos + 1] + drafts
                t_pass = time.perf_counter()
                try:
                    ctx.decode(batch, start, all_logits=bool(drafts))
                except CancelledError:
                    stats.stop_reason = "cancelled"
                    ctx.cached[:] = history[:min(start, ctx.n_past)]
                    break
                length.observe_decode(len(batch), time.perf_counter() - t_pass)
                valid = pos + 1  # the pending token's keys/values are in the cache now
                ctx.cached[:] = history[:valid]
                first = pos - start  # the row after the pending token
                stop = False
                accepted = 0
                for i in range(len(drafts) + 1):
                    ptr = lib.ember_get_logits(ctx._ctx, first + i if drafts else -1)
                    p_ids, p_probs = target_distribution(ptr)
                    if i < len(drafts):
                        q = dists[i]
                        ok, token = accept_or_resample(p_ids, p_probs, drafts[i],
                                                       q[0] if q else None, q[1] if q else None, rng)
                        stats.draft_tokens += 1
                    else:
                        ok, token = False, draw(p_ids, p_probs, rng.random())
                    if ok:
                        accepted += 1
                        stats.draft_accepted += 1
                    text, stop = emit(token, ptr)
                    if ok and not m.is_eog(token):
                        valid += 1  # an accepted draft's keys/values are right
                    if text:
                        yield text
                    if stop or not ok:
                        break
                length.update(len(drafts), accepted)
                ctx.cached[:] = history[:valid]
                if stop:
                    break
                pos = valid
            decoder.reset()
        finally:
            if draft_sampler is not None:
                draft_sampler.close()
