"""`ember quantize` against llama-quantize (issue 19): the same tensor types for every mix,
the same bytes in every tensor, the same file, and the same perplexity afterwards.

References: tests/golden/quant_synth.json, quant_starter.json and quant_moe.json, made by
tools/make_quant_golden.py with llama-quantize (llama-cpp-python 0.3.36's llama.cpp, no
importance matrix): per run the type and sha256 of every tensor's data, the file's sha256
and size; for the starter's Q4_K_M file, llama-perplexity's PPL over essay.txt at -c 128.
The inputs are deterministic files (the starter's F16 variant, a synthetic llama-shaped
file whose rows are multiples of 256) whose sha256 the fixture records.
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import json
import re
import threading
from pathlib import Path

import numpy as np
import pytest
from ember.commands import cli
from ember import engine
from ember.commands import quantize as q
from ember.gguf_file import read_layout

from tools import make_quant_golden
from tools.make_variants import file_sha256_cached

pytestmark = pytest.mark.native


def _golden(golden_dir: Path, key: str) -> dict:
    return json.loads((golden_dir / f"quant_{key}.json").read_text())


@pytest.fixture(scope="module")
def synth(golden_dir):
    doc = _golden(golden_dir, "synth")
    path = make_quant_golden.synth_path()
    assert file_sha256_cached(path) == doc["input_sha256"], "synthetic input differs from the golden's"
    return path, doc


@pytest.fixture(scope="module")
def starter_f16(golden_dir, model_variants):
    doc = _golden(golden_dir, "starter")
    path = model_variants["F16"]
    assert file_sha256_cached(path) == doc["input_sha256"]
    return path, doc


@pytest.fixture(scope="module")
def moe_file(golden_dir):
    from tools import make_arch_models
    doc = _golden(golden_dir, "moe")
    path = make_arch_models.build(make_quant_golden.MOE_INPUT)
    assert file_sha256_cached(path) == doc["input_sha256"], "synthetic MoE input differs from the golden's"
    return path, doc


def ember_quantize(src: Path, dst: Path, run_key: str) -> tuple[int, str]:
    pure = run_key.startswith("pure ")
    mix = run_key.split()[-1]
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = cli.main(["quantize", str(src), str(dst), mix, "-t", "2", *(["--pure"] if pure else [])])
    return rc, err.getvalue()


def _digests(path: Path) -> dict[str, list]:
    return make_quant_golden.tensor_digests(path)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _check_run(src: Path, ref: dict, run_key: str, tmp_path: Path) -> None:
    dst = tmp_path / "out.gguf"
    rc, err = ember_quantize(src, dst, run_key)
    assert rc == 0, err
    ours, theirs = _digests(dst), ref["tensors"]
    assert list(ours) == list(theirs), "tensor order differs from llama-quantize's"
    types = {n: (ours[n][0], theirs[n][0]) for n in ours if ours[n][0] != theirs[n][0]}
    assert not types, f"{run_key}: tensor types differ (ours, llama.cpp's): {types}"
    bad = [n for n in ours if ours[n][1] != theirs[n][1]]
    assert not bad, f"{run_key}: {len(bad)} tensors' bytes differ, e.g. {bad[:4]} " \
                    f"({[q.TYPE_NAMES[ours[n][0]] for n in bad[:4]]})"
    # same types and same bytes: the whole file must then be llama-quantize's
    assert dst.stat().st_size == ref["size"]
    assert _sha256(dst) == ref["sha256"], f"{run_key}: metadata or layout differs"


SYNTH_RUNS = make_quant_golden.MIXES + [f"pure {m}" for m in make_quant_golden.PURE]
STARTER_RUNS = make_quant_golden.STARTER_MIXES


@pytest.mark.parametrize("run_key", SYNTH_RUNS)
def test_synthetic_file_quantizes_byte_for_byte_as_llama_quantize(run_key, synth, tmp_path):
    path, doc = synth
    _check_run(path, doc["runs"][run_key], run_key, tmp_path)


@pytest.mark.parametrize("run_key", make_quant_golden.MOE_MIXES)
def test_mixture_of_experts_file_quantizes_byte_for_byte_as_llama_quantize(run_key, moe_file, tmp_path):
    """gpt-oss's synthetic file: MXFP4_MOE (experts MXFP4, the rest Q8_0) and mixes whose
    rules read the layer from a 3-D expert tensor's name."""
    path, doc = moe_file
    _check_run(path, doc["runs"][run_key], run_key, tmp_path)


@pytest.mark.parametrize("run_key", STARTER_RUNS)
def test_starter_quantizes_byte_for_byte_as_llama_quantize(run_key, starter_f16, tmp_path):
    """The starter's width (576) is no multiple of 256: K-quant mixes fall back to the
    32-element types on most tensors, exactly as llama.cpp does."""
    path, doc = starter_f16
    _check_run(path, doc["runs"][run_key], run_key, tmp_path)


def test_every_mix_and_type_is_covered_by_a_golden(synth):
    _, doc = synth
    runs = doc["runs"]
    assert set(SYNTH_RUNS) <= set(runs)
    made = {t for r in runs.values() for t, _ in r["tensors"].values()}
    # each type Ember can quantize to appears in some llama-quantize output
    assert {q.F16, q.BF16, q.Q8_0, q.Q4_0, q.Q4_1, q.Q5_0, q.Q5_1, q.Q2_K, q.Q3_K, q.Q4_K,
            q.Q5_K, q.Q6_K, q.IQ4_NL, q.IQ4_XS} <= made


def test_planned_sizes_are_the_written_sizes(synth, starter_f16):
    """The model card's sizes (a dry run, no weights read) equal llama-quantize's files."""
    for path, doc in (synth, starter_f16):
        sizes = q.estimate_sizes(path, [k for k in doc["runs"] if not k.startswith("pure")])
        for k, size in sizes.items():
            assert size == doc["runs"][k]["size"], k


def test_metadata_is_kept_and_file_type_updated(synth, tmp_path):
    path, _ = synth
    dst = tmp_path / "q.gguf"
    assert ember_quantize(path, dst, "Q5_K_M")[0] == 0
    a, b = read_layout(path), read_layout(dst)
    kept = [k for k, _ in a.kv_raw if k not in ("general.file_type", "general.quantization_version")]
    assert [k for k, _ in b.kv_raw] == kept + ["general.quantization_version", "general.file_type"]
    assert dict(b.kv_raw)["tokenizer.ggml.tokens"] == dict(a.kv_raw)["tokenizer.ggml.tokens"]
    assert b.values["general.file_type"] == 17  # llama.h LLAMA_FTYPE_MOSTLY_Q5_K_M
    assert b.values["general.quantization_version"] == 2  # ggml.h GGML_QNT_VERSION


def test_the_quantized_files_run_and_stay_close_to_the_original(synth, tmp_path):
    """Ember runs its copies and their logits stay near the F16 file's, nearer with more
    bits: Q8_0 > Q4_K_M > Q2_K in cosine to the F16 logits (a wrong block layout or scale
    gives a cosine near 0; random weights through 8 layers amplify the rounding, so the bar
    is 0.9 for Q4_K_M, whose per-weight error is ~2%, test_quant.py)."""
    path, _ = synth

    def logits(p):
        m = engine.Model(p, n_ctx=32, n_threads=2)
        try:
            m.decode([1, 2, 3, 4], 0)
            return np.array(m.logits(), dtype=np.float64)
        finally:
            m.close()
    ref = logits(path)
    cos = {}
    for mix in ("Q8_0", "Q4_K_M", "Q2_K"):
        dst = tmp_path / f"{mix}.gguf"
        assert ember_quantize(path, dst, mix)[0] == 0
        b = logits(dst)
        assert np.isfinite(b).all()
        cos[mix] = float(ref @ b / np.linalg.norm(ref) / np.linalg.norm(b))
    assert 1.0 > cos["Q8_0"] > cos["Q4_K_M"] > cos["Q2_K"], cos
    assert cos["Q4_K_M"] > 0.9, cos


def test_cancel_leaves_no_file(synth, tmp_path):
    path, _ = synth
    dst = tmp_path / "q.gguf"
    cancel = threading.Event()
    seen = []

    def progress(done, total, tp):
        seen.append(done)
        if len(seen) == 3:
            cancel.set()
    with pytest.raises(q.CancelledError):
        q.quantize_file(path, dst, "Q4_K_M", threads=2, progress=progress, cancel=cancel)
    assert not dst.exists() and not Path(str(dst) + ".part").exists()
    assert seen == sorted(seen) and len(seen) == 3


def test_requantizing_needs_consent(model_variants, tmp_path):
    rc, err = 0, io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = cli.main(["quantize", str(model_variants["Q8_0"]), str(tmp_path / "x.gguf"), "Q4_0"])
    assert rc == 1 and "requantiz" in err.getvalue()
    assert not (tmp_path / "x.gguf").exists()


def test_unknown_type_is_refused(synth, tmp_path):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = cli.main(["quantize", str(synth[0]), str(tmp_path / "x.gguf"), "IQ2_XXS"])
    assert rc == 2 and "Q4_K_M" in err.getvalue()


def test_quantize_then_perplexity_equals_llama_cpps_pair(starter_f16, tmp_path):
    """`ember quantize` F16 -> Q4_K_M then `ember perplexity` gives llama-quantize +
    llama-perplexity's number (test_perplexity.py's bars: same chunks, PPL within 0.5%)."""
    path, doc = starter_f16
    ref = doc["runs"]["Q4_K_M"]["perplexity"]
    dst = tmp_path / "q4km.gguf"
    assert ember_quantize(path, dst, "Q4_K_M")[0] == 0
    text = Path(__file__).resolve().parents[2] / ref["text"]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main(["perplexity", "-t", "2", "-m", str(dst), "-f", str(text), "-c", str(ref["ctx"])])
    assert rc == 0, err.getvalue()
    m = re.search(r"Final estimate: PPL = ([0-9.]+) \+/- ([0-9.]+)", out.getvalue())
    n = re.search(r"calculating perplexity over (\d+) chunks", err.getvalue())
    assert m and n
    assert int(n.group(1)) == ref["n_chunks"]
    # the file is llama-quantize's byte for byte (above); what remains is each engine's
    # arithmetic on 504 scored tokens, where llama.cpp's own two attention paths differ:
    # within 0.5% of one of them, and within 1% of both
    ppl = float(m.group(1))
    refs = [ref["ppl"], ref["ppl_fa_off"]]
    assert min(abs(ppl / r - 1) for r in refs) <= 0.005, (ppl, refs)
    assert max(abs(ppl / r - 1) for r in refs) <= 0.01, (ppl, refs)
    assert float(m.group(2)) == pytest.approx(ref["ppl_err"], rel=0.01)
