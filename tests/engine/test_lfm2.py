"""LFM2's short-convolution blocks: their state, rewinds, and bad files.

The synthetic lfm2 file (tools/make_arch_models.py: convolution blocks 0, 1, 3, 5 and
attention at 2 and 4) is checked against llama.cpp's logits and the float64 oracle in
test_architectures.py. Here: the convolution's last inputs are a recurrent state like
Qwen3.5's, so a rewind restores a snapshot and re-evaluates the tail and must give what a
fresh evaluation gives; the app's RAM estimate and the engine agree on the state's size;
files that do not say which blocks convolve are refused by name.
"""
from __future__ import annotations

import random

import numpy as np
import pytest

from ember.engine import EmberError, Model
from tools import make_arch_models
from tools.make_arch_golden import centred_nmse


@pytest.fixture(scope="module")
def lfm2_path(golden_meta):
    from tools.make_variants import file_sha256_cached
    p = make_arch_models.build("lfm2")
    assert file_sha256_cached(p) == golden_meta["arch"]["families"]["lfm2"]["sha256"]
    return p


@pytest.fixture(scope="module")
def text_tokens(golden_dir):
    with np.load(golden_dir / "arch_lfm2.npz") as z:
        return [int(t) for t in z["tokens"]][:160]


@pytest.mark.native
def test_lfm2_state_is_the_convolutions_last_inputs(lfm2_path):
    from ember.model_card import describe_model
    f = make_arch_models.FAMILIES["lfm2"]
    n_conv = sum(f.lfm2.conv)
    m = Model(lfm2_path, n_ctx=256, n_threads=2)
    try:
        # per convolution block, l_cache - 1 inputs of n_embd floats
        assert m.context.state_bytes == n_conv * (f.lfm2.l_cache - 1) * f.n_embd * 4
        info = describe_model(m, lfm2_path)
    finally:
        m.close()
    assert info["n_recurrent_layers"] == n_conv
    assert info["recurrent_state_bytes"] == n_conv * (f.lfm2.l_cache - 1) * f.n_embd * 4
    assert info["kv_heads_total"] == (f.n_layer - n_conv) * f.n_head_kv


@pytest.mark.native
def test_lfm2_rewinds_continue_as_a_fresh_evaluation(lfm2_path, text_tokens):
    m = Model(lfm2_path, n_ctx=256, n_threads=2)
    try:
        fresh = m.eval_logits(text_tokens).astype(np.float64)
    finally:
        m.close()
    m = Model(lfm2_path, n_ctx=256, n_threads=2)
    try:
        ctx = m.context
        ctx.decode(text_tokens[:40], 0)
        assert ctx.restart_point(39) == 39  # the prompt's last token ran on its own
        for i in range(40, 140):
            ctx.decode([text_tokens[i]], i)
        rng = random.Random(2)
        for p in sorted(rng.sample(range(41, 140), 6)):
            q = ctx.restart_point(p)
            assert q <= p
            if p > q:
                ctx.decode(text_tokens[q:p], q)
            got = []
            for i in range(p, p + 8):
                ctx.decode([text_tokens[i]], i)
                got.append(ctx.logits(-1))
            nmse = centred_nmse(np.array(got, dtype=np.float64), fresh[p:p + 8])
            assert nmse <= 1e-10, f"rewind to {p} (restart at {q}): NMSE {nmse:.3g}"
    finally:
        m.close()


def _rewrite(src, dst, arch=None, drop=(), override=None):
    import gguf
    from tools.make_variants import copy_kv
    override = override or {}
    r = gguf.GGUFReader(src)
    arch = arch or bytes(r.fields["general.architecture"].parts[-1]).decode()
    w = gguf.GGUFWriter(str(dst), arch)
    for key, f in r.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture" or key in drop or key in override:
            continue
        src_arch = bytes(r.fields["general.architecture"].parts[-1]).decode()
        if arch != src_arch and key.startswith(src_arch + "."):
            key2 = arch + key[len(src_arch):]
            if key2 in override:
                continue
            val = f.contents()
            if isinstance(val, list):
                w.add_array(key2, val)
            else:
                w.add_key_value(key2, val, f.types[0])
            continue
        copy_kv(w, key, f)
    for key, (val, vt) in override.items():
        if vt == gguf.GGUFValueType.ARRAY:
            w.add_array(key, val)
        else:
            w.add_key_value(key, val, vt)
    for t in r.tensors:
        if t.name in drop:
            continue
        w.add_tensor(t.name, t.data, raw_shape=list(reversed([int(x) for x in t.shape])), raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return dst


@pytest.mark.native
@pytest.mark.parametrize("case, want", [
    ("no_l_cache", r"lfm2\.shortconv\.l_cache"),
    ("l_cache_1", r"shortconv\.l_cache 1 is invalid"),
    ("no_final_norm", r"missing tensor 'token_embd_norm\.weight'"),
    ("no_conv", r"missing tensor 'blk\.3\.shortconv\.conv\.weight'"),
    ("zero_kv_in_llama", r"head_count_kv is 0 for block 0, which is an attention block in a 'llama' model"),
    ("moe_no_bias", r"missing tensor 'blk\.4\.exp_probs_b\.bias'"),
    ("moe_as_lfm2", r"an lfm2 file has expert_count: its architecture should be lfm2moe"),
])
def test_bad_lfm2_files_are_refused_clearly(lfm2_path, tmp_path, case, want):
    import gguf
    U32 = gguf.GGUFValueType.UINT32
    edits = {
        "no_l_cache": {"drop": ("lfm2.shortconv.l_cache",)},
        "l_cache_1": {"override": {"lfm2.shortconv.l_cache": (1, U32)}},
        "no_final_norm": {"drop": ("token_embd_norm.weight",)},
        "no_conv": {"drop": ("blk.3.shortconv.conv.weight",)},
        # the same keys under another architecture: nothing makes its 0-KV blocks recurrent
        "zero_kv_in_llama": {"arch": "llama"},
        "moe_no_bias": {"drop": ("blk.4.exp_probs_b.bias",)},
        "moe_as_lfm2": {"arch": "lfm2"},
    }[case]
    src = make_arch_models.build("lfm2moe") if case.startswith("moe") else lfm2_path
    bad = _rewrite(src, tmp_path / f"{case}.gguf", **edits)
    with pytest.raises(EmberError, match=want):
        Model(bad, n_ctx=64).close()
