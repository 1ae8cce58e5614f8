"""Every element type's dequantization is bit-exact against gguf-py on real tensors, and
the reference quantizers produce the same bytes as gguf-py's (which mirror ggml's)."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from gguf import GGML_QUANT_SIZES
from gguf import GGMLQuantizationType as T
from gguf import GGUFReader
from gguf import quants as gq

from ember import engine

ROWS = 96  # rows sampled per tensor: enough blocks of every kind, fast in numpy


def _bits_equal(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32))


def _tensor_rows(reader: GGUFReader, type_: T, limit=3):
    """(name, raw bytes of up to ROWS rows, row length) of real tensors of type_."""
    found = []
    for t in reader.tensors:
        if t.tensor_type == type_ and (len(t.shape) >= 2 or type_ == T.F32):
            raw = np.asarray(t.data)
            rows = raw.reshape(raw.shape[0], -1)[:ROWS] if raw.ndim > 1 else raw
            found.append((t.name, np.ascontiguousarray(rows), int(t.shape[0])))
        if len(found) == limit:
            break
    return found


def _check_type(reader, type_):
    samples = _tensor_rows(reader, type_)
    assert samples, f"no {type_.name} tensor in the file"
    for name, raw, row_len in samples:
        want = gq.dequantize(raw, type_).astype(np.float32).ravel()
        got = engine.dequantize(int(type_), raw.tobytes(), want.size)
        assert _bits_equal(got, want), f"{type_.name} {name}: first mismatch at " \
            f"{np.flatnonzero(got.view(np.uint32) != want.view(np.uint32))[:5]}"


@pytest.fixture(scope="module")
def starter(starter_model_path):
    return GGUFReader(starter_model_path)


@pytest.fixture(scope="module")
def gemma(gemma_model_path):
    return GGUFReader(gemma_model_path)


@pytest.mark.parametrize("type_", [T.Q4_1, T.Q8_0, T.F32])
def test_dequantize_starter_tensors(starter, type_):
    _check_type(starter, type_)


@pytest.mark.parametrize("type_", [T.Q4_K, T.Q5_0, T.Q6_K, T.Q8_0])
def test_dequantize_gemma_tensors(gemma, type_):
    _check_type(gemma, type_)


@pytest.fixture(scope="module")
def real_weights(starter):
    """Real float weights (dequantized Q4_1 attention/FFN rows) to quantize."""
    t = next(t for t in starter.tensors if t.name == "blk.3.ffn_up.weight")
    w = gq.dequantize(np.asarray(t.data), t.tensor_type)
    # add a little noise so values are not already on the Q4_1 grid
    rng = np.random.default_rng(3)
    return (w[:ROWS] + rng.standard_normal(w[:ROWS].shape).astype(np.float32) * 1e-3).astype(np.float32)


@pytest.mark.parametrize("type_", [T.F16, T.BF16, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0])
def test_quantize_matches_gguf_py_and_round_trips(real_weights, type_):
    want = gq.quantize(real_weights, type_)
    got = engine.quantize(int(type_), real_weights)
    assert got == want.tobytes(), f"{type_.name}: quantized bytes differ from gguf-py"
    # and dequantizing those real blocks matches gguf-py bit for bit
    back_ref = gq.dequantize(want, type_).astype(np.float32).ravel()
    back = engine.dequantize(int(type_), got, real_weights.size)
    assert _bits_equal(back, back_ref)


def test_k_quants_from_llama_cpp_quantizer(golden_dir):
    """Q2_K, Q3_K, Q5_K blocks (and the others) made by llama.cpp's quantizer from real
    weights (tools/make_golden.py): gguf-py cannot make them, so samples are committed."""
    data = np.load(golden_dir / "kquant_samples.npz")
    names = sorted({k.split("/")[0] for k in data.files})
    assert {"Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"} <= set(names)
    for name in names:
        raw, n = data[f"{name}/raw"], int(data[f"{name}/n"])
        type_ = T[name]
        want = gq.dequantize(raw, type_).astype(np.float32).ravel()
        got = engine.dequantize(int(type_), raw.tobytes(), n)
        assert want.size == n and _bits_equal(got, want), name


def test_fp16_conversion_covers_every_half_value():
    halves = np.arange(65536, dtype=np.uint16)
    got = engine.dequantize(int(T.F16), halves.tobytes(), halves.size)
    want = halves.view(np.float16).astype(np.float32)
    same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
    assert same.all()
    # float -> half rounding, including ties, subnormals and overflow
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.standard_normal(4096).astype(np.float32) * s
                        for s in (1e-8, 1e-5, 1e-2, 1.0, 1e3, 7e4)])
    ties = (np.arange(2048, dtype=np.uint16).view(np.float16).astype(np.float32) *
            np.float32(1.0004883))
    x = np.concatenate([x, ties, np.array([65504, 65520, 1e6, -1e6], dtype=np.float32)])
    q = engine.quantize(int(T.F16), x)
    assert q == x.astype(np.float16).tobytes()


KQUANTS = ["Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"]


@pytest.fixture(scope="module")
def kquant_input(model_variants):
    """The floats tools/make_kquant_samples.py gave llama.cpp's quantizer: the first 48 rows
    of blk.2 and blk.9 ffn_down of the F16 starter, in file order."""
    r = GGUFReader(model_variants["F16"])
    rows = [np.asarray(t.data)[:48].astype(np.float32) for t in r.tensors
            if t.name in ("blk.2.ffn_down.weight", "blk.9.ffn_down.weight")]
    return np.concatenate(rows)


@pytest.mark.parametrize("name", KQUANTS)
def test_k_quantizers_make_llama_cpps_bytes(name, kquant_input, golden_dir):
    want = np.load(golden_dir / "kquant_samples.npz")[f"{name}/raw"].tobytes()
    got = engine.quantize(int(T[name]), kquant_input)
    bb = engine.type_block(int(T[name]))[1]
    bad = [i for i in range(len(want) // bb) if want[i * bb:(i + 1) * bb] != got[i * bb:(i + 1) * bb]]
    assert len(got) == len(want) and not bad, f"{name}: {len(bad)} blocks differ, first {bad[:5]}"


def test_quantizer_error_falls_with_bits():
    """Round trip through every quantizer: the error shrinks with each added bit, and a
    K-quant (scales fitted per 16 or 32 values) beats the legacy type of the same bits (one
    scale per 32). The starter's weights are already on a Q4_1 grid, so the values here are
    heavy-tailed random ones (Student t, 5 degrees of freedom) like trained weights."""
    x = (np.random.default_rng(7).standard_t(5, 256 * 512) * 0.02).astype(np.float32)
    rms = float(np.sqrt(np.mean(x * x)))

    def err(name):
        t = int(T[name])
        back = engine.dequantize(t, engine.quantize(t, x), x.size)
        return float(np.sqrt(np.mean((back - x) ** 2))) / rms
    e = {n: err(n) for n in KQUANTS + ["Q4_1", "Q5_1", "Q8_0"]}
    order = ["Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_0"]
    assert all(e[a] > e[b] for a, b in itertools.pairwise(order)), e
    assert e["Q4_K"] < e["Q4_1"] and e["Q5_K"] < e["Q5_1"], e
    # a b-bit grid over a block's range leaves at most ~ range / 2^b / sqrt(12) of rms error
    # per element: 2 bits cannot be worse than half the signal
    assert e["Q2_K"] < 0.5 and e["Q6_K"] < 0.05, e


def test_type_table_matches_gguf_py():
    """The engine's type table (native/src/core/dtype.h) against gguf-py's: every id the
    engine names has gguf-py's name and block geometry, and the ids it leaves unnamed are
    ones it cannot read (so a file of that type is refused at load, never misread)."""
    known = {}
    for type_id in range(256):
        name = engine.type_name(type_id)
        if name is None:
            assert engine.type_block(type_id) == (0, 0), type_id
            continue
        known[type_id] = name
        want = T(type_id)
        assert name == want.name, (type_id, name, want.name)
        # gguf-py 0.19.0 still gives Q8_1 its old layout (float d and s: 40 bytes); ggml's
        # block_q8_1 has been two halves since 2024 (36), as Ember's. No file stores Q8_1:
        # it is the activation side of the legacy quants' dot products.
        want_block = (32, 36) if want == T.Q8_1 else GGML_QUANT_SIZES[want]
        assert engine.type_block(type_id) == want_block, name
    # the types this release reads (README's list of weight types, plus the activation
    # side's Q8_1/Q8_K and I32 ids)
    assert sorted(known.values()) == sorted(
        ["F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q8_1", "Q2_K",
         "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K", "I32"])


def test_the_quantizers_type_lists_are_the_engines():
    """quantize.py's type ids and names, its mixes' tensor types and the app's choices are
    rows of the engine's table (the one list of types), with gguf-py's and llama.cpp's
    numbering: a new type cannot be half-added."""
    from ember.commands import quantize
    from ember.ui.quantize_dialog import CHOICES
    from gguf import LlamaFileType
    for type_id, name in quantize.TYPE_NAMES.items():
        assert engine.type_name(type_id) == name == T(type_id).name
    for type_id in quantize.QUANTIZED:
        assert engine.type_block(type_id)[0] > 1, quantize.TYPE_NAMES[type_id]
    for name, (ftype, type_id) in quantize.FTYPES.items():
        assert LlamaFileType(ftype).name in (f"MOSTLY_{name}", f"ALL_{name}"), name
        assert engine.type_name(type_id) is not None, name
    assert {name for name, _ in CHOICES} <= set(quantize.FTYPES)
