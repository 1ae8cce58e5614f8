"""Qwen3.5's recurrent state: restart points, snapshots and rewinds.

The synthetic qwen35 file (tools/make_arch_models.py: gated delta-net blocks 0-2 and 4-6,
gated attention at 3 and 7) is checked against llama.cpp's logits and the float64 oracle in
test_architectures.py. Here: a rewind (Regenerate, Edit, a second request sharing a prefix)
restores a snapshot of the delta-net state and re-evaluates the tail, and what follows must
be what a fresh evaluation of the same tokens gives; a decode where no state is held is an
error that names where to restart, never a silent wrong answer.
"""
from __future__ import annotations

import random

import numpy as np
import pytest

from ember.engine import EmberError, GenerationStats, Model, SamplingParams, Session
from tools import make_arch_models
from tools.make_arch_golden import centred_nmse

N_PROMPT = 40
N_GEN = 200


@pytest.fixture(scope="module")
def qwen35_path(golden_meta):
    from tools.make_variants import file_sha256_cached
    p = make_arch_models.build("qwen35")
    assert file_sha256_cached(p) == golden_meta["arch"]["families"]["qwen35"]["sha256"]
    return p


@pytest.fixture(scope="module")
def text_tokens(golden_dir):
    with np.load(golden_dir / "arch_qwen35.npz") as z:
        return [int(t) for t in z["tokens"]]


@pytest.fixture(scope="module")
def fresh_logits(qwen35_path, text_tokens):
    """Every position's logits from one teacher-forced evaluation from position 0."""
    m = Model(qwen35_path, n_ctx=512, n_threads=2)
    try:
        return m.eval_logits(text_tokens[:N_PROMPT + N_GEN])
    finally:
        m.close()


@pytest.mark.native
def test_restart_points_follow_the_snapshots(qwen35_path, text_tokens):
    m = Model(qwen35_path, n_ctx=512, n_threads=2)
    try:
        ctx = m.context
        # the state: two value heads' S x S floats... per recurrent block, and the convolutions'
        # last inputs: 6 blocks x (4 heads x 64 x 64 + 3 x 512) floats
        assert ctx.state_bytes == 6 * (4 * 64 * 64 + 3 * 512) * 4
        ctx.decode(text_tokens[:N_PROMPT], 0)
        # the prompt's last token ran on its own: the state before it is kept
        assert ctx.n_snapshots == 1
        assert [ctx.restart_point(p) for p in (0, 10, N_PROMPT - 2, N_PROMPT - 1, N_PROMPT)] == \
            [0, 0, 0, N_PROMPT - 1, N_PROMPT]
        for i in range(N_PROMPT, N_PROMPT + 20):
            ctx.decode([text_tokens[i]], i)
        assert ctx.n_snapshots == 1  # generated tokens take none
        assert ctx.restart_point(N_PROMPT + 10) == N_PROMPT - 1
        assert ctx.restart_point(N_PROMPT + 20) == N_PROMPT + 20
        with pytest.raises(EmberError, match=f"no recurrent-state snapshot; decode again from {N_PROMPT - 1}"):
            ctx.decode([text_tokens[N_PROMPT + 5]], N_PROMPT + 5)
        assert ctx.n_past == N_PROMPT + 20  # the refused decode changed nothing
        # a long prompt in pieces of n_batch: a snapshot after each piece, the oldest dropped
        m2 = Model(qwen35_path, n_ctx=512, n_threads=2, n_batch=32)
        try:
            m2.context.decode(text_tokens[:200], 0)
            assert m2.context.n_snapshots == 4
            # pieces end at 32, 64, ..., 192, then 199 (before the last token): the last 4 kept
            assert [m2.context.restart_point(p) for p in (150, 170, 195, 199)] == [128, 160, 192, 199]
            assert m2.context.restart_point(100) == 0  # 32, 64 and 96 were replaced
        finally:
            m2.close()
    finally:
        m.close()


@pytest.mark.native
def test_rewinds_continue_as_a_fresh_evaluation(qwen35_path, text_tokens, fresh_logits):
    """Decode a prompt and 200 tokens one at a time; then rewind to ten random positions,
    re-evaluate from the restart point the context names, and continue for 8 tokens: the
    logits equal the fresh evaluation's at every position (within the F16 bar: the batch
    and one-token products round alike, so in practice they are the same bits)."""
    m = Model(qwen35_path, n_ctx=512, n_threads=2)
    try:
        ctx = m.context
        ctx.decode(text_tokens[:N_PROMPT], 0)
        ours = [ctx.logits(-1)]
        for i in range(N_PROMPT, N_PROMPT + N_GEN - 1):
            ctx.decode([text_tokens[i]], i)
            ours.append(ctx.logits(-1))
        ours = np.array(ours)
        want = fresh_logits[N_PROMPT - 1:N_PROMPT + N_GEN - 1]
        assert centred_nmse(ours.astype(np.float64), want.astype(np.float64)) <= 1e-10

        rng = random.Random(35)
        for p in sorted(rng.sample(range(N_PROMPT + 1, N_PROMPT + N_GEN - 10), 10)):
            q = ctx.restart_point(p)
            assert q <= p
            if p > q:
                ctx.decode(text_tokens[q:p], q)
            got = []
            for i in range(p, p + 8):
                ctx.decode([text_tokens[i]], i)
                got.append(ctx.logits(-1))
            got = np.array(got, dtype=np.float64)
            nmse = centred_nmse(got, fresh_logits[p:p + 8].astype(np.float64))
            assert nmse <= 1e-10, f"rewind to {p} (restart at {q}): NMSE {nmse:.3g} against a fresh evaluation"
    finally:
        m.close()


@pytest.mark.native
def test_session_regenerate_and_follow_up_reuse_the_state(qwen35_path, text_tokens):
    """The app's Regenerate (the same prompt again) re-evaluates only the prompt's last
    token and replies as before; a follow-up that extends the conversation continues from
    the live state; an edit inside the prompt restarts at 0 (no snapshot before it) and
    gives what a fresh session gives."""
    greedy = SamplingParams(temperature=0.0)
    prompt = text_tokens[:60]
    m = Model(qwen35_path, n_ctx=512, n_threads=2)
    try:
        s = Session(m)
        st1, st2, st3 = GenerationStats(), GenerationStats(), GenerationStats()
        first = "".join(s.generate(prompt, max_tokens=24, params=greedy, stats=st1))
        again = "".join(s.generate(prompt, max_tokens=24, params=greedy, stats=st2))
        assert again == first and st2.token_ids == st1.token_ids
        assert st1.prompt_evaluated == 60 and st2.prompt_evaluated == 1
        follow = prompt + st2.token_ids + text_tokens[60:80]
        "".join(s.generate(follow, max_tokens=16, params=greedy, stats=st3))
        assert st3.prompt_evaluated == 21  # the reply's last token was drawn, never decoded
        edited = text_tokens[:30] + text_tokens[31:61]
        st4 = GenerationStats()
        out_edit = "".join(s.generate(edited, max_tokens=16, params=greedy, stats=st4))
        assert st4.prompt_evaluated == len(edited)
    finally:
        m.close()
    m = Model(qwen35_path, n_ctx=512, n_threads=2)
    try:
        st5 = GenerationStats()
        fresh = "".join(Session(m).generate(edited, max_tokens=16, params=greedy, stats=st5))
        assert fresh == out_edit and st5.token_ids == st4.token_ids
    finally:
        m.close()


def _rewrite(src, dst, drop=(), override=None):
    """src's metadata and tensors into dst, without the keys in drop, with override's
    (key -> (value, GGUFValueType)) in their place."""
    import gguf
    from tools.make_variants import copy_kv
    override = override or {}
    r = gguf.GGUFReader(src)
    w = gguf.GGUFWriter(str(dst), "qwen35")
    for key, f in r.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture" or key in drop or key in override:
            continue
        copy_kv(w, key, f)
    for key, (val, vt) in override.items():
        if vt == gguf.GGUFValueType.ARRAY:
            w.add_array(key, val)
        else:
            w.add_key_value(key, val, vt)
    for t in r.tensors:
        w.add_tensor(t.name, t.data, raw_shape=list(reversed([int(x) for x in t.shape])), raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return dst


@pytest.mark.native
@pytest.mark.parametrize("case, want", [
    ("no_state_size", r"qwen35\.ssm\.state_size"),
    ("heads", r"not a multiple of ssm\.group_count"),
    ("sections", r"fourth section, which is not supported"),
    ("interval", r"full_attention_interval 0 is invalid"),
])
def test_bad_qwen35_files_are_refused_clearly(qwen35_path, tmp_path, case, want):
    import gguf
    U32 = gguf.GGUFValueType.UINT32
    edits = {
        "no_state_size": {"drop": ("qwen35.ssm.state_size",)},
        "heads": {"override": {"qwen35.ssm.time_step_rank": (3, U32), "qwen35.ssm.inner_size": (192, U32)}},
        "sections": {"override": {"qwen35.rope.dimension_sections": ([2, 2, 2, 2], gguf.GGUFValueType.ARRAY)}},
        "interval": {"override": {"qwen35.full_attention_interval": (0, U32)}},
    }[case]
    bad = _rewrite(qwen35_path, tmp_path / f"{case}.gguf", **edits)
    with pytest.raises(EmberError, match=want):
        Model(bad, n_ctx=64).close()


@pytest.mark.native
def test_the_memory_check_and_the_ram_estimate_count_the_state_and_its_snapshots(qwen35_path):
    from ember.model_card import RECURRENT_STATE_COPIES, describe_model, estimate_memory
    from tests.engine.test_memory_limits import MiB, run_child

    m = Model(qwen35_path, n_ctx=512, n_threads=2)
    try:
        one = m.context.state_bytes  # what the engine reserved for one copy
        info = describe_model(m, qwen35_path)
    finally:
        m.close()
    # the app reads the same figure from the file's metadata, and keeps no KV cache for
    # the six delta-net blocks
    assert info["n_recurrent_layers"] == 6
    assert info["recurrent_state_bytes"] == one
    assert info["kv_heads_total"] == 2 * info["n_head_kv"]
    dense_like = estimate_memory({**info, "recurrent_state_bytes": 0}, 512)
    assert estimate_memory(info, 512).allocated - dense_like.allocated == RECURRENT_STATE_COPIES * one

    # the engine's check names the state in what a context needs: the live copy and the
    # snapshot slots, as context.cpp reserves them
    n_big = 1 << 20
    headroom = qwen35_path.stat().st_size + 128 * MiB  # the mapping fits, the context not
    load, big = run_child(qwen35_path, headroom, ["load", f"ctx{n_big}"])
    assert load["ok"] and not big["ok"] and big["message"].startswith("not enough memory for this context")
    copies = RECURRENT_STATE_COPIES
    assert f"recurrent state {copies * one / MiB:.0f} MiB ({copies} copies" in big["message"], big["message"]
