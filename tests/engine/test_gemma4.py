"""Gemma 4 on a tiny file with every feature on (tests/support/gguf_writer.tiny_gemma4): the
engine against the float64 oracle (prefill, then token by token past the sliding window),
and bad or missing keys and tensors refused with a clear error, never an abort.

The synthetic gemma4 file against llama.cpp's golden lives in test_architectures.py.
"""
from __future__ import annotations

import numpy as np
import pytest

from ember.engine import EmberError, Model
from ember.engine import native
from tests.support import gguf_writer as gw
from tools.make_arch_golden import centred_nmse

FORMAT, UNSUPPORTED = native.ERR_FORMAT, native.ERR_UNSUPPORTED


@pytest.fixture(scope="module")
def tiny_spec(starter_model_path):
    import gguf
    r = gguf.GGUFReader(starter_model_path)

    def strings(key):
        f = r.fields[key]
        return [bytes(f.parts[i]).decode("utf-8") for i in f.data]
    tokens, merges = strings("tokenizer.ggml.tokens"), strings("tokenizer.ggml.merges")
    types = [int(r.fields["tokenizer.ggml.token_type"].parts[i][0])
             for i in r.fields["tokenizer.ggml.token_type"].data]
    return lambda: gw.tiny_gemma4(tokens, merges, types)


@pytest.fixture(scope="module")
def tiny_path(tiny_spec, tmp_path_factory):
    p = tmp_path_factory.mktemp("gemma4") / "tiny-gemma4.gguf"
    p.write_bytes(tiny_spec().to_bytes())
    return p


TOKENS = [1] + [(37 * i + 11) % 4000 + 100 for i in range(39)]   # 40 positions, window 8


@pytest.mark.native
def test_tiny_gemma4_matches_the_oracle(tiny_path):
    """Teacher-forced logits, and a batched prompt (batches of 4, no logits but the last)
    followed by single-token decodes past the window, both within the bar of the oracle."""
    from tools.oracle import Oracle
    want = Oracle(tiny_path, n_ctx=64).logits(TOKENS)
    m = Model(tiny_path, n_ctx=64, n_threads=1, n_batch=4)
    try:
        assert m.arch == "gemma4"
        full = m.eval_logits(TOKENS)
        m.decode(TOKENS[:20], 0)
        rows = [m.logits(-1)]
        for i in range(20, len(TOKENS)):
            m.decode([TOKENS[i]], i)
            rows.append(m.logits(-1))
    finally:
        m.close()
    assert centred_nmse(full, want) <= 1e-5
    assert centred_nmse(np.stack(rows), want[19:]) <= 1e-5
    assert (full.argmax(axis=1) == want.argmax(axis=1)).mean() >= 0.95


def _drop_kv(spec, key):
    spec.kv = [kv for kv in spec.kv if kv[0] != key]
    return spec


def _set_kv(spec, key, vtype, value):
    spec.kv = [kv for kv in spec.kv if kv[0] != key] + [(key, vtype, value)]
    return spec


def _drop_tensor(spec, name):
    spec.tensors = [t for t in spec.tensors if t.name != name]
    return spec


def broken(base):
    a = "gemma4."
    return [
        ("no key_length_swa", _drop_kv(base(), a + "attention.key_length_swa"), FORMAT, "key_length_swa"),
        ("no sliding-window pattern", _drop_kv(base(), a + "attention.sliding_window_pattern"), FORMAT,
         "sliding_window_pattern"),
        ("no per-layer width", _drop_kv(base(), a + "embedding_length_per_layer_input"), FORMAT,
         "embedding_length_per_layer_input"),
        ("too many shared layers", _set_kv(base(), a + "attention.shared_kv_layers", gw.U32, 3), FORMAT,
         "shared_kv_layers"),
        ("shared layer of another kind",
         _set_kv(base(), a + "attention.sliding_window_pattern", gw.ARRAY, (gw.BOOL, [True, True, False, False])),
         FORMAT, "shares the KV cache"),
        ("value heads of another size", _set_kv(base(), a + "attention.value_length_swa", gw.U32, 16), UNSUPPORTED,
         "different sizes"),
        ("rope dims past the head", _set_kv(base(), a + "rope.dimension_count_swa", gw.U32, 12), FORMAT,
         "dimension_count_swa"),
        ("partial rope on the full layers", _set_kv(base(), a + "rope.dimension_count", gw.U32, 8), UNSUPPORTED,
         "rotate whole heads"),
        ("per-layer array of the wrong length",
         _set_kv(base(), a + "feed_forward_length", gw.ARRAY, (gw.I32, [64, 64, 128])), FORMAT, "entries"),
        ("mixture of experts",
         _set_kv(_set_kv(base(), a + "expert_count", gw.U32, 4), a + "expert_used_count", gw.U32, 2),
         FORMAT, "no block has experts"),
        ("no rope_freqs", _drop_tensor(base(), "rope_freqs.weight"), FORMAT, "rope_freqs.weight"),
        ("no per-layer gate", _drop_tensor(base(), "blk.1.inp_gate.weight"), FORMAT, "blk.1.inp_gate.weight"),
        ("no per-layer table", _drop_tensor(base(), "per_layer_token_embd.weight"), FORMAT,
         "per_layer_token_embd.weight"),
        ("no attn_k on a layer with a cache", _drop_tensor(base(), "blk.0.attn_k.weight"), FORMAT,
         "blk.0.attn_k.weight"),
    ]


@pytest.mark.native
def test_broken_gemma4_files_are_refused(tiny_spec, tmp_path):
    cases = broken(tiny_spec)
    for i, (name, spec, status, word) in enumerate(cases):
        p = tmp_path / f"{i:02d}.gguf"
        p.write_bytes(spec.to_bytes())
        with pytest.raises(EmberError) as e:
            Model(p, n_ctx=32, n_threads=1)
        assert e.value.status == status, f"{name}: status {e.value.status} ({e.value})"
        assert word in str(e.value), f"{name}: message {str(e.value)!r} lacks {word!r}"


@pytest.mark.native
def test_shared_layers_need_no_k_or_v(tiny_spec, tmp_path):
    """The shared layers' attn_k / attn_v / attn_k_norm are not read: a file carrying them
    anyway runs the same (llama.cpp marks them not required there)."""
    base = tmp_path / "base.gguf"
    base.write_bytes(tiny_spec().to_bytes())
    s = tiny_spec()
    s.tensors.append(gw.f16_tensor("blk.3.attn_k.weight", np.zeros((16, 32), dtype=np.float32)))
    extra = tmp_path / "extra.gguf"
    extra.write_bytes(s.to_bytes())
    a, b = Model(base, n_ctx=32, n_threads=1), Model(extra, n_ctx=32, n_threads=1)
    try:
        assert (a.eval_logits(TOKENS[:12]) == b.eval_logits(TOKENS[:12])).all()
    finally:
        a.close()
        b.close()
