"""Speculative decoding (engine/speculative.py, Session.generate(speculative=...)): greedy
replies are plain decoding's tokens on several families (a recurrent one, a sliding-window
one) with prompt-lookup and draft-model drafts; the accept/reject rule keeps the target's
distribution (chi-square over 20,000 draws at the sampler level); the cache after rejected
drafts gives a fresh evaluation's logits; a draft model with another vocabulary is refused."""
from __future__ import annotations

import numpy as np
import pytest
from ember.engine import (
    EmberError,
    GenerationStats,
    Grammar,
    Model,
    Sampler,
    SamplingParams,
    Session,
)
from ember.engine.speculative import (
    DraftLength,
    PromptLookup,
    SpeculativeParams,
    accept_or_resample,
    check_vocab_compatible,
)

from tools import make_arch_models

pytestmark = pytest.mark.native

GREEDY = SamplingParams(temperature=0.0)


def Spec(**kw) -> SpeculativeParams:
    """SpeculativeParams drafting draft_max tokens every pass: what the tests check must not
    depend on how fast this machine decodes (the adaptive length reads the clock)."""
    return SpeculativeParams(adaptive=False, **kw)
# repetitive text, so prompt lookup has something to find, and a reply that is partly a copy
CODE_PROMPT = ("def area(width, height):\n    return width * height\n\n"
               "def perimeter(width, height):\n    return 2 * (width + height)\n\n"
               "# the same two functions, with w and h for width and height:\n"
               "def area(w, h):\n")

# chi-square critical values at p = 0.001, by degrees of freedom
CHI2_999 = {5: 20.52, 7: 24.32, 9: 27.88, 11: 31.26, 15: 37.70, 19: 43.82}


def greedy_pair(model: Model, prompt, n: int, spec: SpeculativeParams, params=GREEDY, **kw):
    """(plain stats, speculative stats) of the same request, each on a fresh cache."""
    plain, fast = GenerationStats(), GenerationStats()
    a = "".join(Session(model, reuse_prefix=False).generate(prompt, n, params, stats=plain, **kw))
    b = "".join(Session(model, reuse_prefix=False).generate(prompt, n, params, stats=fast,
                                                            speculative=spec, **kw))
    assert b == a
    return plain, fast


# ---- the rule, at the sampler level -------------------------------------------------------

def sampler_distribution(logits: np.ndarray, **params) -> tuple[np.ndarray, np.ndarray]:
    s = Sampler(SamplingParams(seed=0, **params))
    try:
        row = np.ascontiguousarray(logits, dtype=np.float32)
        return s.distribution(Sampler.row_pointer(row), row.size)
    finally:
        s.close()


def dense(ids, probs, n):
    out = np.zeros(n)
    out[ids] = probs
    return out


def chi_square(counts: np.ndarray, p: np.ndarray) -> tuple[float, int]:
    kept = p > 0
    assert counts[~kept].sum() == 0, "a token the target's sampler never draws was emitted"
    e = p[kept] * counts.sum()
    return float(((counts[kept] - e) ** 2 / e).sum()), int(kept.sum()) - 1


def test_rule_with_a_draft_models_distribution_keeps_the_targets():
    """20,000 first tokens: x drawn from the draft's q, then kept or replaced by the rule; the
    emitted tokens follow the target's p (top-k 12 of its logits at temperature 0.9), not q
    (top-k 8 of other logits, which puts mass where p has none and misses some of p)."""
    rng = np.random.default_rng(52)
    n_vocab = 64
    target_logits = rng.normal(0.0, 1.5, n_vocab)
    draft_logits = target_logits + rng.normal(0.0, 1.0, n_vocab)
    p_ids, p_probs = sampler_distribution(target_logits, temperature=0.9, top_k=12, top_p=1.0, min_p=0.0)
    q_ids, q_probs = sampler_distribution(draft_logits, temperature=0.9, top_k=8, top_p=1.0, min_p=0.0)
    p, q = dense(p_ids, p_probs, n_vocab), dense(q_ids, q_probs, n_vocab)
    assert (q[p == 0] > 0).any() and (p[q == 0] > 0).any()  # the residual has work to do
    counts = np.zeros(n_vocab)
    kept = 0
    draws = 20000
    for _ in range(draws):
        x = int(rng.choice(q_ids, p=q_probs / q_probs.sum()))
        ok, token = accept_or_resample(p_ids, p_probs, x, q_ids, q_probs, rng)
        kept += ok
        counts[token] += 1
    stat, df = chi_square(counts, p)
    assert stat < CHI2_999[df], f"chi-square {stat:.1f} with {df} degrees of freedom"
    # and the draft is kept as often as the rule says: sum over x of min(p(x), q(x))
    want = np.minimum(p, q).sum()
    assert abs(kept / draws - want) < 4 * np.sqrt(want * (1 - want) / draws)


def test_rule_with_a_deterministic_draft_keeps_the_targets():
    """Prompt lookup's draft is one fixed token (q a point mass): kept with probability p(x),
    else a draw from p without x; the emitted tokens follow p."""
    rng = np.random.default_rng(7)
    n_vocab = 40
    logits = rng.normal(0.0, 1.0, n_vocab)
    p_ids, p_probs = sampler_distribution(logits, temperature=1.0, top_k=16, top_p=1.0, min_p=0.0)
    p = dense(p_ids, p_probs, n_vocab)
    x = int(p_ids[np.argsort(p_probs)[-2]])  # the second most likely token
    counts = np.zeros(n_vocab)
    for _ in range(20000):
        _, token = accept_or_resample(p_ids, p_probs, x, None, None, rng)
        counts[token] += 1
    stat, df = chi_square(counts, p)
    assert stat < CHI2_999[df], f"chi-square {stat:.1f} with {df} degrees of freedom"


def test_rule_is_plain_greedy_at_temperature_zero():
    logits = np.array([0.5, 3.0, 2.9, -1.0], dtype=np.float32)
    p_ids, p_probs = sampler_distribution(logits, temperature=0.0)
    assert list(p_ids) == [1] and list(p_probs) == [1.0]
    rng = np.random.default_rng(0)
    assert accept_or_resample(p_ids, p_probs, 1, None, None, rng) == (True, 1)
    assert accept_or_resample(p_ids, p_probs, 2, None, None, rng) == (False, 1)
    assert accept_or_resample(p_ids, p_probs, 2, np.array([2]), np.array([1.0]), rng) == (False, 1)


# ---- drafters -----------------------------------------------------------------------------

def test_prompt_lookup_drafts_what_followed_the_latest_match():
    look = PromptLookup(1, 3)
    h = [5, 6, 7, 8, 9, 1, 2, 6, 7, 4, 4, 6, 7]
    # "6 7" last ended at index 8 and was followed by 4, 4, 6, 7 (the latest, not the first)
    assert look.propose(h, 3) == [4, 4, 6]
    h = h + [4]  # "6 7 4": the 3-gram matches at 7..9
    assert look.propose(h, 8) == [4, 6, 7, 4]
    assert look.propose([1, 2, 3], 4) == []  # nothing repeats
    assert PromptLookup(2, 2).propose([3, 1, 2, 9, 1], 4) == []  # a 1-gram would match; 2 asked


def test_draft_length_follows_acceptance_and_cost():
    n = DraftLength(draft_min=0, draft_max=16)
    assert n.next() == 0  # a plain step first, to measure what a draft must beat
    n.observe_decode(1, 0.010)
    n.observe_decode(9, 0.012)  # a batch costs little more than one token
    for _ in range(10):
        n.update(8, 8)
    assert n.next() == 16  # every draft kept: as many as allowed
    for _ in range(3):
        n.update(8, 1)  # rejections soon after the start
    assert 1 <= n.next() < 16  # fewer: a long draft now mostly goes to waste
    for _ in range(10):
        n.observe_decode(2, 0.019)  # now each extra token costs nearly a whole one
        n.update(1, 0)
    assert [n.next() for _ in range(DraftLength.probe_every)] == [0] * 7 + [1]  # a probe
    fixed = DraftLength(draft_min=2, draft_max=6, adaptive=False)
    assert fixed.next() == 6


def test_draft_length_counts_a_draft_models_steps():
    cheap, costly = DraftLength(0, 16), DraftLength(0, 16)
    for n in (cheap, costly):
        n.observe_decode(1, 0.010)
        n.observe_decode(5, 0.014)
        for _ in range(5):
            n.update(4, 3)
    costly.observe_drafting(4, 0.030)  # 7.5 ms a drafted token (after the average's weight)
    assert cheap.next() > costly.next()


# ---- greedy identity ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def starter(starter_model_path):
    return Model(starter_model_path, n_ctx=1024, n_threads=2)


def test_greedy_lookup_is_plain_decoding_on_the_starter(starter):
    plain, fast = greedy_pair(starter, CODE_PROMPT, 64, Spec(lookup=True, draft_max=8))
    assert fast.token_ids == plain.token_ids
    assert fast.stop_reason == plain.stop_reason
    assert fast.draft_tokens > fast.draft_accepted > 0  # drafts were kept and rejected
    assert fast.speculative.startswith("prompt lookup")


def test_greedy_with_penalties_and_logit_bias_is_plain_decoding(starter):
    """The penalties see each accepted draft before the next is judged; the bias applies
    to every verified row."""
    params = SamplingParams(temperature=0.0, repeat_penalty=1.3, penalty_last_n=32)
    first = GenerationStats()
    list(Session(starter, reuse_prefix=False).generate(CODE_PROMPT, 4, params, stats=first))
    bias = {first.token_ids[1]: -100.0}
    plain, fast = greedy_pair(starter, CODE_PROMPT, 48, Spec(lookup=True),
                              params=params, logit_bias=bias)
    assert fast.token_ids == plain.token_ids
    assert first.token_ids[1] not in fast.token_ids
    assert fast.draft_tokens > 0


def test_greedy_draft_model_is_plain_decoding(model_variants):
    """The Q4_0 starter drafts for the Q4_1 one (same vocabulary, slightly other logits)."""
    target = Model(model_variants["Q4_1"], n_ctx=512, n_threads=2)
    draft = Model(model_variants["Q4_0"], n_ctx=512, n_threads=2)
    plain, fast = greedy_pair(target, CODE_PROMPT, 48, Spec(draft_model=draft, draft_max=6))
    assert fast.token_ids == plain.token_ids
    assert fast.draft_tokens > fast.draft_accepted > 0
    assert "draft model" in fast.speculative


class ScriptedDrafts:
    """Drafts a known reply with every third token wrong: each pass keeps some drafts and
    rejects one, so the cache rolls back again and again (random-weight models seldom repeat
    themselves, which leaves prompt lookup nothing to find)."""

    def __init__(self, prompt_len: int, reply: list[int], n_vocab: int):
        self.prompt_len, self.reply, self.n_vocab = prompt_len, reply, n_vocab

    def propose(self, history: list[int], n_max: int) -> list[int]:
        at = len(history) - self.prompt_len
        out = self.reply[at:at + n_max]
        return [(t + 1) % self.n_vocab if (at + i) % 3 == 2 else t for i, t in enumerate(out)]


@pytest.mark.parametrize("family", ["llama3", "qwen3", "gemma3", "phi3", "qwen35", "lfm2"])
def test_greedy_drafts_are_plain_decoding_on_synthetic_families(family):
    """gemma3 has sliding-window layers; qwen35 and lfm2 recurrent ones (a delta-net state,
    short convolutions' state), whose passes verify one draft each."""
    m = Model(make_arch_models.build(family), n_ctx=512, n_threads=2)
    ids = m.tokenize(CODE_PROMPT, add_special=True)
    plain = GenerationStats()
    list(Session(m, reuse_prefix=False).generate(ids, 40, GREEDY, stats=plain))
    spec = Spec(drafter=ScriptedDrafts(len(ids), plain.token_ids, m.n_vocab), draft_max=6)
    fast = GenerationStats()
    list(Session(m, reuse_prefix=False).generate(ids, 40, GREEDY, stats=fast, speculative=spec))
    assert fast.token_ids == plain.token_ids
    assert fast.draft_tokens > fast.draft_accepted > 0
    if family in ("qwen35", "lfm2"):  # every outcome of a one-draft pass has its state at hand
        assert "one draft per pass" in fast.speculative and "stopped" not in fast.speculative


def test_greedy_recurrent_draft_model_is_plain_decoding():
    """qwen35 both ways: a Q4_K_M copy drafts for the F16 file; both caches roll back
    through snapshots."""
    target = Model(make_arch_models.build("qwen35"), n_ctx=512, n_threads=2)
    draft = Model(make_arch_models.quantized("qwen35", "Q4_K_M"), n_ctx=512, n_threads=2)
    ids = target.tokenize(CODE_PROMPT, add_special=True)
    plain, fast = greedy_pair(target, ids, 40, Spec(draft_model=draft, draft_max=5))
    assert fast.token_ids == plain.token_ids
    assert fast.draft_tokens > fast.draft_accepted


# ---- the cache after rejected drafts --------------------------------------------------------

@pytest.mark.parametrize("family", ["starter", "qwen35"])
def test_cache_after_rejections_gives_fresh_logits(family, starter_model_path):
    path = starter_model_path if family == "starter" else make_arch_models.build(family)
    m = Model(path, n_ctx=512, n_threads=2)
    ids = m.tokenize(CODE_PROMPT, add_special=True)
    plain = GenerationStats()
    list(Session(m, reuse_prefix=False).generate(ids, 40, GREEDY, stats=plain))
    session = Session(m.new_context(n_ctx=512))
    stats = GenerationStats()
    spec = Spec(drafter=ScriptedDrafts(len(ids), plain.token_ids, m.n_vocab), lookup=True)
    list(session.generate(ids, 40, GREEDY, stats=stats, speculative=spec))
    assert stats.token_ids == plain.token_ids
    assert stats.draft_tokens > stats.draft_accepted  # something was rolled back
    full = ids + stats.token_ids
    ctx = session.context
    cached = ctx.cached
    assert cached == full[:len(cached)] and len(cached) >= len(full) - 1
    start = ctx.restart_point(len(cached))
    ctx.decode(full[start:], start, all_logits=True)
    ours = np.stack([ctx.logits(i) for i in range(len(full) - start)])
    fresh = m.new_context(n_ctx=512).eval_logits(full, first=start)
    np.testing.assert_allclose(ours, fresh, rtol=0, atol=1e-4)
    assert (ours.argmax(axis=1) == fresh.argmax(axis=1)).all()


def test_a_second_reply_reuses_the_cache_after_speculation(starter):
    """The next prompt of a chat shares the prefix the speculative reply left; its greedy
    reply is the one a fresh cache gives."""
    session = Session(starter.new_context(n_ctx=1024))
    first = GenerationStats()
    text = "".join(session.generate(CODE_PROMPT, 24, GREEDY, stats=first,
                                    speculative=Spec(lookup=True)))
    follow = CODE_PROMPT + text + "\n\ndef perimeter(w, h):\n"
    again, fresh = GenerationStats(), GenerationStats()
    list(session.generate(follow, 24, GREEDY, stats=again, speculative=Spec(lookup=True)))
    assert again.prompt_evaluated < again.prompt_tokens  # the cache was reused
    list(Session(starter.new_context(n_ctx=1024), reuse_prefix=False).generate(follow, 24, GREEDY, stats=fresh))
    assert again.token_ids == fresh.token_ids


# ---- sampled replies, grammar, refusals ---------------------------------------------------------

def test_sampled_speculation_is_seeded_and_reported(model_variants):
    target = Model(model_variants["Q4_1"], n_ctx=512, n_threads=2)
    draft = Model(model_variants["Q4_0"], n_ctx=512, n_threads=2)
    params = SamplingParams(temperature=0.8, top_k=40, top_p=0.95, seed=11)
    spec = Spec(draft_model=draft, lookup=True, draft_max=6)
    runs = []
    for _ in range(2):
        st = GenerationStats()
        list(Session(target, reuse_prefix=False).generate(CODE_PROMPT, 32, params, stats=st, speculative=spec))
        runs.append(st)
    assert runs[0].token_ids == runs[1].token_ids  # one seed, one reply
    assert runs[0].draft_accepted > 0 and 0 < runs[0].acceptance_rate <= 1
    assert all(0 <= t < target.n_vocab for t in runs[0].token_ids)


def test_a_grammar_turns_speculation_off_and_says_why(starter):
    g = Grammar('root ::= "yes" | "no"', starter)
    stats = GenerationStats()
    text = "".join(Session(starter, reuse_prefix=False).generate(
        "Answer: ", 8, GREEDY, stats=stats, grammar=g, speculative=Spec(lookup=True)))
    assert text in ("yes", "no")
    assert stats.speculative.startswith("off: a grammar")
    assert stats.draft_tokens == 0


def test_a_draft_model_with_another_vocabulary_is_refused(starter):
    other = Model(make_arch_models.build("qwen3"), n_ctx=256, n_threads=1)
    with pytest.raises(EmberError, match="same vocabulary"):
        check_vocab_compatible(starter, other)
    with pytest.raises(EmberError, match="cannot draft"):
        list(Session(starter).generate("Hi", 4, GREEDY, speculative=Spec(draft_model=other)))
