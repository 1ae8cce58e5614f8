"""Qwen3.5-MoE (qwen35moe) and Gemma 4 26B-A4B (gemma4 with experts) beyond their goldens.

test_architectures.py checks both synthetic files (tools/make_arch_models.py: qwen35moe,
gemma4moe) against llama.cpp's logits and the float64 oracle. Here: what the goldens do not
reach. A qwen35moe rewind restores a delta-net snapshot and re-routes the tail, and must
give the fresh evaluation's logits; the pieces each family adds (the shared expert and its
gate, the per-expert scale, the router's input scale, the fused gate|up experts) each
change the logits when removed, so none of them is silently skipped; and files missing
them are refused with the tensor's name.
"""
from __future__ import annotations

import random

import numpy as np
import pytest

from ember.engine import EmberError, Model
from tools import make_arch_models
from tools.make_arch_golden import centred_nmse


@pytest.fixture(scope="module")
def files(golden_meta):
    from tools.make_variants import file_sha256_cached
    out = {}
    for fam in ("qwen35moe", "gemma4moe"):
        p = make_arch_models.build(fam)
        assert file_sha256_cached(p) == golden_meta["arch"]["families"][fam]["sha256"]
        out[fam] = p
    return out


@pytest.fixture(scope="module")
def tokens(golden_dir):
    with np.load(golden_dir / "arch_qwen35moe.npz") as z:
        return [int(t) for t in z["tokens"]][:120]


def _rewrite(src, dst, tensors=None, drop=()):
    """src into dst with the tensors in `tensors` (name -> new array, same type) replaced
    and those in `drop` left out."""
    import gguf
    from tools.make_variants import copy_kv
    tensors = tensors or {}
    r = gguf.GGUFReader(src)
    arch = bytes(r.fields["general.architecture"].parts[-1]).decode()
    w = gguf.GGUFWriter(str(dst), arch)
    for key, f in r.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        copy_kv(w, key, f)
    for t in r.tensors:
        if t.name in drop:
            continue
        data = tensors[t.name](np.array(t.data)) if t.name in tensors else t.data
        w.add_tensor(t.name, data, raw_shape=list(reversed([int(x) for x in t.shape])), raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return dst


def _logits(path, toks):
    m = Model(path, n_ctx=256, n_threads=2)
    try:
        return m.eval_logits(toks).astype(np.float64)
    finally:
        m.close()


@pytest.mark.native
def test_qwen35moe_rewinds_continue_as_a_fresh_evaluation(files, tokens):
    fresh = _logits(files["qwen35moe"], tokens)
    m = Model(files["qwen35moe"], n_ctx=256, n_threads=2)
    try:
        ctx = m.context
        ctx.decode(tokens[:40], 0)
        for i in range(40, 100):
            ctx.decode([tokens[i]], i)
        rng = random.Random(3)
        for p in sorted(rng.sample(range(41, 100), 5)):
            q = ctx.restart_point(p)
            assert q <= p
            if p > q:
                ctx.decode(tokens[q:p], q)
            got = []
            for i in range(p, p + 8):
                ctx.decode([tokens[i]], i)
                got.append(ctx.logits(-1))
            nmse = centred_nmse(np.array(got, dtype=np.float64), fresh[p:p + 8])
            assert nmse <= 1e-10, f"rewind to {p} (restart at {q}): NMSE {nmse:.3g}"
    finally:
        m.close()


# Each piece, neutralised, moves the logits well past the F16 bar (1e-5): the engine reads
# it. (Neutral values: a gate logit of 0 halves the shared expert instead of weighing it by
# its sigmoid; scales of 1.)
PIECES = [
    ("qwen35moe", "blk.{}.ffn_gate_inp_shexp.weight", lambda a: np.zeros_like(a)),
    ("qwen35moe", "blk.{}.ffn_down_shexp.weight", lambda a: np.zeros_like(a)),
    ("gemma4moe", "blk.{}.ffn_down_exps.scale", lambda a: np.ones_like(a)),
    ("gemma4moe", "blk.{}.ffn_gate_inp.scale", lambda a: np.ones_like(a)),
    ("gemma4moe", "blk.{}.post_ffw_norm_2.weight", lambda a: np.ones_like(a)),
]


@pytest.mark.native
@pytest.mark.parametrize("fam, name, neutral", PIECES)
def test_each_moe_piece_is_read(files, tokens, tmp_path, fam, name, neutral):
    n_layer = 8 if fam == "qwen35moe" else 6
    names = {name.format(il): neutral for il in range(n_layer)}
    changed = _rewrite(files[fam], tmp_path / "changed.gguf", tensors=names)
    toks = tokens[:48]
    nmse = centred_nmse(_logits(changed, toks), _logits(files[fam], toks))
    assert nmse > 1e-3, f"{name}: neutralising it moved the logits only {nmse:.3g}"


@pytest.mark.native
@pytest.mark.parametrize("fam, drop, want", [
    ("qwen35moe", "blk.2.ffn_gate_inp_shexp.weight", r"missing tensor 'blk\.2\.ffn_gate_inp_shexp\.weight'"),
    ("qwen35moe", "blk.0.ffn_up_exps.weight", r"missing tensor 'blk\.0\.ffn_up_exps\.weight'"),
    ("gemma4moe", "blk.1.ffn_gate_inp.scale", r"missing tensor 'blk\.1\.ffn_gate_inp\.scale'"),
    ("gemma4moe", "blk.3.ffn_gate_up_exps.weight", r"missing tensor 'blk\.3\.ffn_gate_exps\.weight'"),
    ("gemma4moe", "blk.0.pre_ffw_norm_2.weight", r"missing tensor 'blk\.0\.pre_ffw_norm_2\.weight'"),
])
def test_moe_files_missing_a_piece_are_refused_by_name(files, tmp_path, fam, drop, want):
    bad = _rewrite(files[fam], tmp_path / "bad.gguf", drop=(drop,))
    with pytest.raises(EmberError, match=want):
        Model(bad, n_ctx=64).close()
