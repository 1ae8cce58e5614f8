"""Broken GGUF files are refused with a clear error, never a crash: each kind is loaded
in-process through the Python API and by the C test program built with AddressSanitizer
and UBSan (scripts/test.sh builds it and sets EMBER_ASAN_GGUF_CHECK)."""
from __future__ import annotations

import os
import struct
import subprocess
from pathlib import Path

import pytest

from ember.engine import native
from ember.engine import EmberError, Model
from tests.support import gguf_writer as gw

FORMAT, UNSUPPORTED, IO = native.ERR_FORMAT, native.ERR_UNSUPPORTED, native.ERR_IO


@pytest.fixture(scope="session")
def starter_vocab(starter_model_path):
    import gguf
    r = gguf.GGUFReader(starter_model_path)
    def strings(key):
        f = r.fields[key]
        return [bytes(f.parts[i]).decode("utf-8") for i in f.data]
    tokens = strings("tokenizer.ggml.tokens")
    merges = strings("tokenizer.ggml.merges")
    types = [int(r.fields["tokenizer.ggml.token_type"].parts[i][0])
             for i in r.fields["tokenizer.ggml.token_type"].data]
    return tokens, merges, types


@pytest.fixture(scope="session")
def base_spec(starter_vocab):
    tokens, merges, types = starter_vocab
    return lambda **kw: gw.tiny_llama(tokens, merges, types, **kw)


def _replace_kv(spec, key, vtype, value):
    spec.kv = [(k, t, v) if k != key else (key, vtype, value) for k, t, v in spec.kv]
    return spec


def _drop_kv(spec, key):
    spec.kv = [kv for kv in spec.kv if kv[0] != key]
    return spec


def _tensor(spec, name):
    return next(t for t in spec.tensors if t.name == name)


def _header(n_tensors=0, n_kv=0, version=3):
    return b"GGUF" + struct.pack("<IQQ", version, n_tensors, n_kv)


def _kv_bytes(key, vtype_and_payload: bytes):
    # trailing padding, so the up-front count checks pass and the field itself is judged
    return gw.gguf_string(key) + vtype_and_payload + b"\0" * 64


def cases(base):
    """(name, bytes, expected status, words the message must contain)."""
    valid = base().to_bytes()
    out = []

    def add(name, data, status, *words):
        out.append((name, data, status, words))

    add("empty file", b"", FORMAT, "empty")
    add("wrong magic", b"GGML" + valid[4:], FORMAT, "not a GGUF file")
    add("version 1", b"GGUF" + struct.pack("<I", 1) + valid[8:], UNSUPPORTED, "version 1")
    add("version 99", b"GGUF" + struct.pack("<I", 99) + valid[8:], UNSUPPORTED, "version 99")
    add("truncated header", valid[:12], FORMAT, "truncated")
    add("absurd tensor count", _header(n_tensors=2**62), FORMAT, "tensor count")
    add("absurd metadata count", _header(n_kv=2**63), FORMAT, "metadata count")
    add("key length past end", _header(n_kv=1) + struct.pack("<Q", 2**40) + b"\0" * 64, FORMAT, "metadata key")
    add("string value past end",
        _header(n_kv=1) + _kv_bytes("a", struct.pack("<IQ", gw.STRING, 2**50) + b"x"), FORMAT,
        "truncated")
    add("unknown value type",
        _header(n_kv=1) + _kv_bytes("a", struct.pack("<I", 77) + b"\0" * 8), FORMAT, "value type")
    add("array count overflows",
        _header(n_kv=1) + _kv_bytes("a", struct.pack("<IIQ", gw.ARRAY, gw.U64, 2**62)), FORMAT,
        "larger than the file")
    nested = struct.pack("<I", gw.ARRAY)
    for _ in range(20):
        nested += struct.pack("<IQ", gw.ARRAY, 1)
    add("arrays nested too deep", _header(n_kv=1) + _kv_bytes("a", nested), FORMAT, "nested")
    add("bool out of range",
        _header(n_kv=1) + _kv_bytes("a", struct.pack("<IB", gw.BOOL, 7)), FORMAT, "bool")
    add("duplicate key", base().add("general.name", gw.STRING, "again").to_bytes(), FORMAT,
        "duplicate metadata key")
    add("alignment not a power of two",
        base().add("general.alignment", gw.U32, 48).to_bytes(), FORMAT, "alignment")
    add("alignment zero", base().add("general.alignment", gw.U32, 0).to_bytes(), FORMAT,
        "alignment")

    s = base(); _tensor(s, "output_norm.weight").ne = [32, 1, 1, 1, 1]
    add("five dimensions", s.to_bytes(), FORMAT, "dimensions")
    s = base(); _tensor(s, "output_norm.weight").ne = [0]
    add("zero dimension", s.to_bytes(), FORMAT, "invalid dimension")
    s = base(); _tensor(s, "output_norm.weight").ne = [2**40, 2**40]
    add("dimension product overflows", s.to_bytes(), FORMAT, "overflows")
    s = base(); _tensor(s, "output_norm.weight").ggml_type = 99
    add("unknown tensor type", s.to_bytes(), UNSUPPORTED, "type 99")
    s = base(); t = _tensor(s, "output_norm.weight"); t.ggml_type = 8  # Q8_0 needs ne0 % 32 == 0
    t.ne = [16, 2]
    add("row not a multiple of the block", s.to_bytes(), FORMAT, "block size")
    s = base(); _tensor(s, "output_norm.weight").offset = 3
    add("misaligned tensor offset", s.to_bytes(), FORMAT, "not aligned")
    s = base(); _tensor(s, "output_norm.weight").offset = 2**40
    add("tensor offset past the end", s.to_bytes(), FORMAT, "past the end")
    add("data section truncated", valid[: len(valid) - 1000], FORMAT, "past the end")
    s = base(); s.tensors[2].offset = 0  # inside token_embd.weight
    add("overlapping tensors", s.to_bytes(), FORMAT, "overlap")
    s = base(); s.tensors[3].name = s.tensors[2].name
    add("duplicate tensor name", s.to_bytes(), FORMAT, "duplicate tensor")
    add("unknown architecture",
        _replace_kv(base(), "general.architecture", gw.STRING, "martian").to_bytes(), UNSUPPORTED,
        "martian")
    s = base(); s.tensors = [t for t in s.tensors if t.name != "blk.1.ffn_up.weight"]
    add("missing tensor", s.to_bytes(), FORMAT, "blk.1.ffn_up.weight")
    s = base(); _tensor(s, "blk.0.attn_k.weight").ne = [32, 24]
    s.tensors[[t.name for t in s.tensors].index("blk.0.attn_k.weight")].data = b"\0" * (32 * 24 * 2)
    add("wrong tensor shape", s.to_bytes(), FORMAT, "shape")
    add("head count not divisible",
        _replace_kv(base(), "llama.attention.head_count_kv", gw.U32, 3).to_bytes(), FORMAT,
        "head_count")
    add("architecture key of wrong type",
        _replace_kv(base(), "general.architecture", gw.U32, 7).to_bytes(), FORMAT, "architecture")
    add("missing block count", _drop_kv(base(), "llama.block_count").to_bytes(), FORMAT,
        "block_count")
    s = base(); t = _tensor(s, "blk.0.attn_k.weight"); t.ggml_type = 9  # Q8_1: an activation type
    t.data = b"\0" * (16 * 36)
    add("weight type without a kernel", s.to_bytes(), UNSUPPORTED, "Q8_1", "cannot compute")
    add("head counts differ between layers",
        _replace_kv(base(), "llama.attention.head_count", gw.ARRAY, (gw.U32, [4, 8])).to_bytes(),
        UNSUPPORTED, "differs between layers")
    add("unknown rope scaling",
        base().add("llama.rope.scaling.type", gw.STRING, "martian").to_bytes(), UNSUPPORTED,
        "rope scaling 'martian'")
    add("missing vocabulary", _drop_kv(base(), "tokenizer.ggml.tokens").to_bytes(), FORMAT,
        "tokenizer.ggml.tokens")
    return out


@pytest.fixture(scope="session")
def broken_files(base_spec, tmp_path_factory):
    d = tmp_path_factory.mktemp("broken")
    files = []
    for i, (name, data, status, words) in enumerate(cases(base_spec)):
        p = d / f"{i:02d}.gguf"
        p.write_bytes(data)
        files.append((name, p, status, words))
    return files


def test_there_are_at_least_20_kinds(broken_files):
    assert len(broken_files) >= 20


def test_per_layer_arrays_with_one_value_load(base_spec, tmp_path):
    """Newer files may store head counts per layer; equal values run as the scalar would."""
    p = tmp_path / "ok.gguf"
    p.write_bytes(base_spec().to_bytes())
    q = tmp_path / "arrays.gguf"
    q.write_bytes(_replace_kv(base_spec(), "llama.attention.head_count_kv", gw.ARRAY,
                              (gw.U32, [2, 2])).to_bytes())
    a, b = Model(p, n_ctx=32, n_threads=1), Model(q, n_ctx=32, n_threads=1)
    assert (a.eval_logits([1, 5, 9]) == b.eval_logits([1, 5, 9])).all()


def test_valid_tiny_model_loads_and_runs(base_spec, tmp_path):
    p = tmp_path / "ok.gguf"
    p.write_bytes(base_spec().to_bytes())
    m = Model(p, n_ctx=32, n_threads=1)
    logits = m.eval_logits([1, 5, 9])
    assert logits.shape == (3, m.n_vocab)


def test_broken_files_are_refused_in_process(broken_files):
    for name, path, status, words in broken_files:
        with pytest.raises(EmberError) as e:
            Model(path, n_ctx=32)
        assert e.value.status == status, f"{name}: status {e.value.status} ({e.value})"
        for w in words:
            assert w in str(e.value), f"{name}: message {str(e.value)!r} lacks {w!r}"


def test_missing_file_is_an_io_error(tmp_path):
    with pytest.raises(EmberError) as e:
        Model(tmp_path / "nope.gguf")
    assert e.value.status == IO and "nope.gguf" in str(e.value)


def test_broken_files_under_address_sanitizer(broken_files):
    exe = os.environ.get("EMBER_ASAN_GGUF_CHECK")
    assert exe and Path(exe).is_file(), (
        "EMBER_ASAN_GGUF_CHECK must name the sanitizer build of test_gguf_malformed "
        "(scripts/test.sh builds it)")
    paths = [str(p) for _, p, _, _ in broken_files]
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:exitcode=86",
               UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1")
    r = subprocess.run([exe, *paths], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, f"sanitizer run failed ({r.returncode}):\n{r.stderr[-4000:]}"
    lines = r.stdout.splitlines()
    assert len(lines) == len(broken_files)
    for (name, _, status, words), line in zip(broken_files, lines):
        got, msg = line.split("\t", 1)
        assert int(got) == status, f"{name}: {line}"
        for w in words:
            assert w in msg, f"{name}: {msg!r} lacks {w!r}"
