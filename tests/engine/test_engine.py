"""Engine behaviour on the starter model: metadata and tensor table as gguf-py reads them,
batched and one-token decoding agreeing, KV-cache prefix reuse, a full context, bad ids,
cancellation, and memory that stays flat while generating."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
import textwrap
import threading

import numpy as np
import pytest
from gguf import GGUFReader, GGUFValueType

from ember.engine import native
from ember.engine import CancelledError, ContextFullError, EmberError, Model, supported_isas

IDS = [1, 504, 3575, 282, 4649, 314, 7042, 30, 378, 1458, 282, 253, 2268, 314]


@pytest.fixture(scope="module")
def model(starter_model_path):
    m = Model(starter_model_path, n_ctx=256, n_threads=2)
    yield m
    m.close()


@pytest.fixture(scope="module")
def reader(starter_model_path):
    return GGUFReader(starter_model_path)


def _gguf_py_value(field):
    t = field.types[0]
    if t == GGUFValueType.ARRAY:
        et = field.types[-1]
        if et == GGUFValueType.STRING:
            return [bytes(field.parts[i]).decode("utf-8") for i in field.data]
        return [field.parts[i][0].item() for i in field.data]
    if t == GGUFValueType.STRING:
        return bytes(field.parts[field.data[0]]).decode("utf-8")
    return field.parts[field.data[0]][0].item()


def test_metadata_has_every_key_with_gguf_py_values(model, reader):
    meta = model.metadata
    want_keys = [k for k in reader.fields if not k.startswith("GGUF.")]
    assert list(meta) == want_keys
    for k in want_keys:
        want, got = _gguf_py_value(reader.fields[k]), meta[k]
        if isinstance(want, float):
            assert np.float32(got) == np.float32(want), k
        else:
            assert got == want, k


def test_tensor_table_matches_gguf_py(model, reader):
    ours = model.tensors()
    assert [t.name for t in ours] == [t.name for t in reader.tensors]
    for a, b in zip(ours, reader.tensors):
        assert a.shape == tuple(int(x) for x in b.shape), a.name
        assert a.type_name == b.tensor_type.name, a.name
        assert a.offset == b.data_offset, a.name
        assert a.n_bytes == b.n_bytes, a.name
    assert model.n_params == sum(int(np.prod(t.shape)) for t in reader.tensors)


def test_model_description(model):
    assert model.arch == "llama"
    assert model.ftype == "Q4_1"
    assert model.n_vocab == 49152 and model.n_embd == 576 and model.n_layer == 30
    assert model.n_ctx_train == model.metadata["llama.context_length"]


def test_batched_and_one_token_decoding_agree(model):
    batched = model.eval_logits(IDS)
    for i, t in enumerate(IDS):
        model.decode([t], i)
        assert np.allclose(model.logits(), batched[i], atol=1e-4), f"position {i}"


def test_prefix_reuse_gives_fresh_logits(model):
    other = IDS[:6] + [9, 10, 11]
    fresh = model.eval_logits(other)[-1]
    model.eval_logits(IDS)                 # cache now holds IDS
    model.decode(other[6:], 6)             # keep the 6 shared tokens, replace the rest
    assert np.allclose(model.logits(), fresh, atol=1e-4)


def test_small_batches_match_one_big_batch(starter_model_path):
    big = Model(starter_model_path, n_ctx=64, n_threads=2, n_batch=64).eval_logits(IDS)
    small = Model(starter_model_path, n_ctx=64, n_threads=1, n_batch=5).eval_logits(IDS)
    assert np.allclose(big, small, atol=1e-4)


def test_last_token_only_prefill_gives_the_same_bits(starter_model_path):
    # With only the last logits wanted, batches before the last stop at the last layer's
    # KV store and the last layer carries only the final row past its keys and values;
    # every op works per row, so the logits must be those of the all-rows pass, bit for bit.
    m = Model(starter_model_path, n_ctx=64, n_threads=2, n_batch=4)
    every = m.eval_logits(IDS)
    m.decode(IDS, 0)
    assert np.array_equal(m.logits(), every[-1])
    m.decode(IDS[:3], 0)                   # a single batch holding only the last-row pass
    assert np.array_equal(m.logits(), every[2])


@pytest.mark.parametrize("isa", ["scalar", "avx2", "avx512"])
def test_prefill_gives_each_token_the_bits_of_its_decode(starter_model_path, isa):
    # Batch invariance at every level the CPU has (test_isa_avx512 checks the AVX-512
    # level on Gemma): prefill's tiles and attention compute each token's sums in the
    # order decoding does, so every row of a batched pass must equal that token decoded
    # alone. 75 tokens in batches of 64: attention's key blocks of 32 and their tails,
    # and a second batch whose keys start in the first.
    if isa not in supported_isas():
        pytest.skip(f"this CPU has no {isa} level: its prefill attention was NOT exercised here")
    m = Model(starter_model_path, n_ctx=128, n_threads=2, n_batch=64, isa=isa)
    try:
        ids = m.tokenize("The tide came in over the flats and the birds rose, calling, from the "
                         "mud. " * 6)[:75]
        assert len(ids) == 75
        batched = m.eval_logits(ids)
        alone = []
        for pos, tok in enumerate(ids):
            m.decode([tok], pos)
            alone.append(m.logits())
    finally:
        m.close()
    assert np.array_equal(batched.view(np.uint32), np.stack(alone).view(np.uint32))


@pytest.mark.parametrize("variant", ["starter", "Q4_0"])
def test_decoding_while_the_weights_are_copied_gives_the_bits_of_either_layout(
        variant, starter_model_path, model_variants, monkeypatch):
    # The first context starts a background copy of the weights into the four-row layout
    # (model.h) and decoding reads each matrix from the copy as far as it is published,
    # from the file past that. Both give the same bits, so token-by-token logits taken
    # while the copy runs, after it is done, and with no copy at all must be equal.
    # Q4_0 is re-encoded in that layout (cpu/kernels.h), its tied embedding's rows too,
    # which get_rows reads back block by block.
    path = starter_model_path if variant == "starter" else model_variants[variant]
    def steps(m):
        out = []
        for i, t in enumerate(IDS):
            m.decode([t], i)
            out.append((m.logits().copy(), m.layout_progress()))
        return out

    monkeypatch.setenv("EMBER_NO_REPACK", "1")
    plain = Model(path, n_ctx=64, n_threads=2)
    ref = steps(plain)
    assert plain.layout_progress() == 1.0 and plain.layout_progress(wait=True) == 1.0
    plain.close()
    monkeypatch.delenv("EMBER_NO_REPACK")
    m = Model(path, n_ctx=64, n_threads=2)
    during = steps(m)   # from the first token on, as the copy runs
    assert m.layout_progress(wait=True) == 1.0
    after = steps(m)
    m.close()
    for i, ((a, _), (b, _), (c, _)) in enumerate(zip(ref, during, after)):
        assert np.array_equal(a, b), f"token {i}, during the copy"
        assert np.array_equal(a, c), f"token {i}, after it"


def test_full_context_is_an_error_and_the_context_stays_usable(starter_model_path):
    m = Model(starter_model_path, n_ctx=8, n_threads=1)
    with pytest.raises(ContextFullError) as e:
        m.decode(IDS[:9], 0)
    assert "n_ctx = 8" in str(e.value)
    m.decode(IDS[:8], 0)
    assert m.n_past == 8
    with pytest.raises(ContextFullError):
        m.decode([5], 8)


def test_bad_token_ids_and_positions_are_errors(model):
    with pytest.raises(EmberError) as e:
        model.decode([1, 49152], 0)
    assert e.value.status == native.ERR_INVALID_ARGUMENT and "outside the vocabulary" in str(e.value)
    with pytest.raises(EmberError):
        model.decode([-3], 0)
    model.decode([1, 2], 0)
    with pytest.raises(EmberError) as e:
        model.decode([5], 7)  # a gap after the cached positions
    assert "past the" in str(e.value)


def test_load_progress_is_reported_and_can_cancel(starter_model_path):
    seen = []
    Model(starter_model_path, progress=lambda f: seen.append(f))
    assert seen[0] == 0.0 and seen[-1] == 1.0 and seen == sorted(seen) and len(seen) > 10
    with pytest.raises(CancelledError):
        Model(starter_model_path, progress=lambda f: f < 0.5)
    ev = threading.Event()
    ev.set()
    with pytest.raises(CancelledError):
        Model(starter_model_path, cancel=ev)


def test_cancel_stops_generation_from_another_thread(model):
    from ember.engine import GenerationStats, SamplingParams
    stats = GenerationStats()
    pieces = []
    # greedy on a prompt whose continuation runs long without an end-of-generation token
    # (tests/golden/greedy_Q4_1.json), so only the cancel can stop it early
    for piece in model.generate("Once upon a time, in a small village by the sea,", 400,
                                SamplingParams(temperature=0.0), stats=stats):
        pieces.append(piece)
        if len(pieces) == 3:
            threading.Timer(0.0, model.cancel).start()
    assert stats.stop_reason == "cancelled"
    assert 3 <= stats.generated_tokens < 50


def test_cancel_interrupts_a_long_prefill(starter_model_path):
    m = Model(starter_model_path, n_ctx=2048, n_threads=1, n_batch=2048)
    timer = threading.Timer(0.3, m.cancel)
    timer.start()
    with pytest.raises(CancelledError):
        m.decode([100 + i % 1000 for i in range(2000)], 0)
    timer.cancel()
    assert m.n_past == 0  # nothing half-written is counted as cached


RSS_SCRIPT = textwrap.dedent("""
    import sys
    from ember.engine import Model
    def rss_kb():
        for line in open("/proc/self/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    m = Model(sys.argv[1], n_ctx=1024, n_threads=2)
    tok = 1
    m.decode([tok], 0)
    tok = int(m.logits().argmax())  # numpy is imported on first use: count it in `first`
    # The first decode opens the context, which starts the background copy of the weights
    # into the kernels' layout; while it runs it trades file pages for anonymous ones (not
    # one for one: 2 MiB pages), so let it finish, and measure decoding alone.
    m.layout_progress(wait=True)
    first = rss_kb()
    for pos in range(1, 501):
        m.decode([tok], pos)
        tok = int(m.logits().argmax())
    print(first, rss_kb())
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_generating_500_tokens_does_not_grow_memory(starter_model_path):
    app = str(Path(__file__).resolve().parents[2] / "app")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([app, os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-c", RSS_SCRIPT, str(starter_model_path)],
                       capture_output=True, text=True, check=True, timeout=900, env=env)
    first, last = map(int, r.stdout.split())
    # The KV cache for 500 tokens alone would be ~11.5 MB if it were grown lazily.
    assert last - first < 2048, f"RSS grew from {first} kB to {last} kB"


def test_profile_counts_every_node_of_a_decode(starter_model_path):
    """`ember bench --profile`'s numbers: one one-token decode of the 30-layer starter runs
    each layer's products once and the tied head (token_embd) once; times are non-negative."""
    m = Model(starter_model_path, n_ctx=64, n_threads=2)
    m.decode([1, 2, 3], 0)
    m.set_profiling(True)
    m.decode([4], 3)
    rows = {name: (count, sec) for name, count, sec in m.profile()}
    m.close()
    for w in ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"):
        assert rows[f"mul_mat {w}"][0] == 30, w
    assert rows["mul_mat token_embd"][0] == 1
    assert rows["attention"][0] == 30 and rows["rms_norm"][0] == 61
    assert all(sec >= 0 for _, sec in rows.values())


def test_bench_depth_fills_the_cache_and_profiles_only_the_test(starter_model_path):
    """`ember bench -d N` (llama-bench's depth): each tg run decodes at positions N.., after a
    fill that the profile leaves out; the bound counts the F16 KV cache at that depth
    (SmolLM2-135M: 30 layers, 3 KV heads of 64, REFERENCE.md)."""
    from ember.commands.bench import _kv_bytes_per_token, bench_model
    m = Model(starter_model_path, n_ctx=128, n_threads=2, n_batch=64)
    profiles: dict = {}
    res = bench_model(m, 0, 4, 1, profiles, depth=40)
    assert set(res) == {"tg4 @ d40"}
    rows = {name: count for name, count, _ in profiles["tg4 @ d40"][0]}
    assert rows["attention"] == 30 * 4  # the last timed run's four decodes, not the fill
    assert m.n_past == 44
    assert _kv_bytes_per_token(m, 40) == 30 * 40 * 3 * (64 + 64) * 2
    assert _kv_bytes_per_token(m, 0) == 0
    m.close()
