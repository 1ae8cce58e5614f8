"""Speculative decoding: cheap drafts (prompt lookup, or a small draft model sharing the
target's vocabulary) checked by the target model in one batched pass, with the accept/reject
rule that keeps the target's own distribution (greedy: exactly plain decoding's tokens)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from . import native
from .errors import EmberError
from .sampling import Sampler, SamplingParams

if TYPE_CHECKING:
    import numpy as np

    from .context import Context
    from .model import Model

# A draft model's vocabulary may be a little longer or shorter than the target's (padding
# rows, a few added tokens), as llama.cpp allows; beyond that the two are different models.
VOCAB_SIZE_SLACK = 128


@dataclass
class SpeculativeParams:
    """How drafts are made. lookup: prompt-lookup drafts (the tokens that followed the
    latest earlier occurrence of the last n-gram, ngram_max down to ngram_min long, in the
    prompt and the reply so far; no second model). draft_model: a small model with the
    target's vocabulary (check_vocab_compatible); both given, the draft model is asked only
    where the lookup finds nothing. draft_max: the most tokens one pass verifies; draft_min:
    drafts shorter than this are dropped (a plain step instead). The length asked for
    adapts to the acceptance rate between the two. draft_p_min: a draft model stops drafting
    once its most likely token is less likely than this. drafter: any other deterministic
    draft source, an object with propose(history, n_max) -> token ids (as PromptLookup)."""

    lookup: bool = False
    draft_model: Model | None = None
    draft_max: int = 16
    draft_min: int = 0
    ngram_max: int = 3
    ngram_min: int = 1
    draft_p_min: float = 0.5
    draft_n_ctx: int | None = None  # the draft context's length (None: the target's)
    drafter: object | None = None
    # the draft length follows the measured acceptance and cost (DraftLength); False: always
    # draft_max (tests and measurements that must not depend on the clock)
    adaptive: bool = True

    @property
    def enabled(self) -> bool:
        return ((self.lookup or self.draft_model is not None or self.drafter is not None)
                and self.draft_max > 0)

    def describe(self) -> str:
        parts = []
        if self.lookup:
            parts.append(f"prompt lookup ({self.ngram_min}-{self.ngram_max}-grams)")
        if self.drafter is not None:
            parts.append(type(self.drafter).__name__)
        if self.draft_model is not None:
            parts.append(f"draft model {self.draft_model.path.name}")
        return " + ".join(parts) + f", up to {self.draft_max} tokens"


def check_vocab_compatible(target: Model, draft: Model) -> None:
    """Raises EmberError saying why unless draft tokenizes as target does: the same token
    for every id both have (their text), the same BOS/EOS, and vocabulary sizes within
    VOCAB_SIZE_SLACK of each other."""
    nt, nd = target.n_vocab, draft.n_vocab
    why = None
    if abs(nt - nd) > VOCAB_SIZE_SLACK:
        why = f"vocabulary sizes differ: {nt} against the draft's {nd}"
    elif target.bos_id != draft.bos_id or target.eos_id != draft.eos_id:
        why = (f"special tokens differ: BOS/EOS {target.bos_id}/{target.eos_id} against the "
               f"draft's {draft.bos_id}/{draft.eos_id}")
    else:
        for i in range(min(nt, nd)):
            if target.token_text(i) != draft.token_text(i):
                why = (f"token {i} is {target.token_text(i)!r} in the target and "
                       f"{draft.token_text(i)!r} in the draft")
                break
    if why:
        raise EmberError(native.ERR_INVALID_ARGUMENT,
                         f"{draft.path.name} cannot draft for {target.path.name}: {why}; a draft "
                         "model must use the same vocabulary (the same family's tokenizer)")


# ---- the accept/reject rule ------------------------------------------------------------

def draw(ids: np.ndarray, probs: np.ndarray, u: float) -> int:
    """The token a uniform u in [0, 1) picks from a (sparse) distribution."""
    import numpy as np
    cum = np.cumsum(probs, dtype=np.float64)
    i = int(np.searchsorted(cum, u * cum[-1], side="right"))
    return int(ids[min(i, len(ids) - 1)])


def accept_or_resample(p_ids: np.ndarray, p_probs: np.ndarray, token: int,
                       q_ids: np.ndarray | None, q_probs: np.ndarray | None,
                       rng) -> tuple[bool, int]:
    """One drafted token against the target: (accepted, the token to emit).

    p: the target's distribution here (what its sampler would draw from); q: the draft's,
    which `token` was drawn from (None: a deterministic draft, a point mass on token). The
    token is kept with probability min(1, p(token) / q(token)); else the emitted token is
    drawn from max(0, p - q) normalised. Either way the emitted token has distribution p
    exactly (Leviathan et al. 2023, Chen et al. 2023). Greedy targets (p a point mass) keep
    the draft exactly when it is the target's choice and emit that choice otherwise."""
    import numpy as np
    hit = np.flatnonzero(p_ids == token)
    p_x = float(p_probs[hit[0]]) if hit.size else 0.0
    if q_ids is None:
        q_x = 1.0
        q_at_p = (p_ids == token).astype(np.float64)
    else:
        order = np.argsort(q_ids)
        sorted_ids = q_ids[order]
        where = np.searchsorted(sorted_ids, p_ids)
        where = np.minimum(where, len(sorted_ids) - 1)
        found = sorted_ids[where] == p_ids
        q_at_p = np.where(found, q_probs[order][where], 0.0).astype(np.float64)
        qh = np.flatnonzero(q_ids == token)
        q_x = float(q_probs[qh[0]]) if qh.size else 0.0
    if q_x > 0.0 and (p_x >= q_x or rng.random() * q_x < p_x):
        return True, token
    residual = np.maximum(p_probs.astype(np.float64) - q_at_p, 0.0)
    if residual.sum() <= 0.0:  # p <= q everywhere on p's support: only rounding gets here
        residual = p_probs.astype(np.float64)
    return False, draw(p_ids, residual, rng.random())


# ---- drafters ------------------------------------------------------------------------------

class PromptLookup:
    """n-gram drafts from the text itself: the tokens that followed the latest earlier
    occurrence of the last n tokens (longest n first). Strong where the reply repeats its
    input: code editing, quoting a document, rewriting a list."""

    def __init__(self, ngram_min: int = 1, ngram_max: int = 3):
        if not 1 <= ngram_min <= ngram_max:
            raise ValueError("prompt lookup needs 1 <= ngram_min <= ngram_max")
        self.sizes = range(ngram_max, ngram_min - 1, -1)
        # n -> n-gram -> where the tokens after its latest occurrence start; an n-gram
        # enters once a token follows it, so the text's own last n-gram is never its match
        self._index: dict[int, dict[tuple[int, ...], int]] = {n: {} for n in self.sizes}
        self._history: list[int] = []

    def _extend(self, history: list[int]) -> None:
        h = self._history
        if history[: len(h)] != h:  # another text: index it afresh
            h.clear()
            for d in self._index.values():
                d.clear()
        for t in history[len(h):]:
            h.append(t)
            end = len(h) - 1  # the new token follows the n-grams ending just before it
            for n, d in self._index.items():
                if end >= n:
                    d[tuple(h[end - n:end])] = end

    def propose(self, history: list[int], n_max: int) -> list[int]:
        self._extend(history)
        h = self._history
        for n in self.sizes:
            if len(h) < n:
                continue
            start = self._index[n].get(tuple(h[-n:]))
            if start is not None:
                return h[start:start + n_max]
        return []


class DraftModel:
    """Drafts from a small model with the target's vocabulary, on a context of its own
    that, like a Session's, keeps what it has evaluated and reuses the common prefix."""

    def __init__(self, model: Model, target: Model, n_ctx: int, p_min: float = 0.5):
        check_vocab_compatible(target, model)
        self.model = model
        self.n_vocab_target = target.n_vocab
        self.p_min = p_min
        self.context: Context = model.new_context(n_ctx=n_ctx)

    def close(self) -> None:
        self.context.close()

    def _sync(self, history: list[int]) -> None:
        """Evaluates history on the draft context, reusing its cached prefix; afterwards
        logits(-1) is the draft's prediction after history."""
        ctx = self.context
        cached = ctx.cached
        limit = min(len(cached), len(history) - 1)
        common = 0
        while common < limit and cached[common] == history[common]:
            common += 1
        common = ctx.restart_point(common)
        del cached[common:]
        try:
            ctx.decode(history[common:], common)
        finally:
            cached[:] = history[: ctx.n_past]

    def propose(self, history: list[int], n_max: int, params: SamplingParams,
                sampler: Sampler, rng) -> tuple[list[int], list]:
        """Up to n_max drafted tokens and, per token, the draft's distribution it was drawn
        from ((ids, probs); for a greedy target, None: the draft's argmax, a point mass)."""
        import numpy as np
        ctx = self.context
        n_vocab = self.model.n_vocab
        if len(history) + n_max >= ctx.n_ctx:
            n_max = max(0, ctx.n_ctx - len(history) - 1)
        if n_max <= 0 or max(history) >= n_vocab:  # a token the draft does not know
            return [], []
        with ctx._lock:
            self._sync(history)
            tokens: list[int] = []
            dists: list = []
            for i in range(n_max):
                ptr = ctx._lib.ember_get_logits(ctx._ctx, -1)
                if params.temperature <= 0:
                    row = np.ctypeslib.as_array(ptr, shape=(n_vocab,))
                    best = int(np.argmax(row))
                    top = 1.0 / float(np.exp(row - row[best]).sum(dtype=np.float64))
                    dist = None
                else:
                    ids, probs = sampler.distribution(ptr, n_vocab)
                    best = draw(ids, probs, rng.random())
                    top = float(probs.max())
                    dist = (ids, probs)
                if best >= self.n_vocab_target or (i > 0 and top < self.p_min):
                    break
                tokens.append(best)
                dists.append(dist)
                if i + 1 == n_max:
                    break
                pos = len(history) + i
                ctx.decode([best], pos)
                ctx.cached.append(best)
            return tokens, dists


class DraftLength:
    """The number of tokens to draft next, from what the passes so far measured.

    The chance a that a drafted token is accepted (given the ones before it were) is
    estimated from the passes' outcomes, each accepted token a success and each first
    rejection a failure, both counts decaying so the estimate follows the text (a copied
    passage, then free writing). A pass with k drafts then yields (1 - a^(k+1)) / (1 - a)
    tokens on average, and costs a decode of k + 1 tokens (t1 + slope * k seconds, both
    measured) plus k draft steps (measured, for a draft model). The k in [draft_min,
    draft_max] with the most tokens per second is asked for, or none (a plain step) when
    no k beats a plain step; then every probe_every-th pass drafts anyway, so a change in
    the text is noticed."""

    decay = 0.7  # the weight the counts keep at each pass
    probe_every = 8

    def __init__(self, draft_min: int, draft_max: int, adaptive: bool = True):
        self.adaptive = adaptive
        self.draft_min = max(0, draft_min)
        self.draft_max = max(self.draft_min, draft_max)
        self.successes, self.failures = 1.5, 1.0  # a prior of a = 0.6, forgotten in a few passes
        self.t1: float | None = None  # seconds of a one-token decode
        self.slope: float | None = None  # seconds per token a decode adds
        self.draft_step = 0.0  # seconds per drafted token (a draft model's decode)
        self.skipped = 0

    @property
    def rate(self) -> float:
        return self.successes / (self.successes + self.failures)

    def observe_decode(self, n_tokens: int, seconds: float) -> None:
        if n_tokens <= 1:
            self.t1 = seconds if self.t1 is None else 0.7 * self.t1 + 0.3 * seconds
        elif self.t1 is not None:
            per = max(0.0, (seconds - self.t1) / (n_tokens - 1))
            self.slope = per if self.slope is None else 0.7 * self.slope + 0.3 * per

    def observe_drafting(self, n_tokens: int, seconds: float) -> None:
        if n_tokens > 0:
            self.draft_step = 0.7 * self.draft_step + 0.3 * seconds / n_tokens

    def update(self, drafted: int, accepted: int) -> None:
        if drafted:
            self.successes = self.decay * self.successes + accepted
            self.failures = self.decay * self.failures + (1 if accepted < drafted else 0)

    def expected_tokens(self, k: int) -> float:
        a = min(self.rate, 0.999)
        return (1.0 - a ** (k + 1)) / (1.0 - a)

    def next(self) -> int:
        if not self.adaptive:
            return self.draft_max
        if self.t1 is None:
            return 0  # a plain step first: it measures the cost every choice is held to
        slope = self.slope if self.slope is not None else 0.25 * self.t1  # until measured
        best_k, best = 0, 1.0 / self.t1
        for k in range(max(1, self.draft_min), self.draft_max + 1):
            speed = self.expected_tokens(k) / (self.t1 + k * (slope + self.draft_step))
            if speed > best:
                best_k, best = k, speed
        if best_k == 0 and self.draft_max > 0:
            self.skipped += 1
            if self.skipped >= self.probe_every:
                self.skipped = 0
                return max(1, self.draft_min)
            return 0
        self.skipped = 0
        return best_k
