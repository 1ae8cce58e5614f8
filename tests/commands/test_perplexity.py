"""`ember perplexity` against llama-perplexity (issue 19): the same chunks, the same PPL, and
the same KL-divergence statistics on the same files.

References: tests/golden/meta.json "perplexity" (llama-perplexity -c 128 on essay.txt for
the starter model, its F16/Q8_0/Q4_0 variants and gemma-3-270m; tools/make_golden.py) and
tests/golden/perplexity.json (llama-perplexity --kl-divergence-base with F16, then
--kl-divergence for Q4_0/Q8_0/Q4_1, and every variant's running PPL with -fa off;
tools/make_perplexity_golden.py). Everything runs through the `ember` command line and is
read back from its printout, with the regexes the golden scripts apply to llama.cpp's.

Bars:
* chunk count equal; final PPL within 0.5% (its +/- within 1%), every variant;
* running per-chunk PPL within 0.5% at every chunk for F16 (float weights: both engines do
  the same arithmetic, and agree to 1e-4). For the quantized files the first chunks are
  small samples (63..189 scored tokens) on which 8-bit activation rounding moves the value:
  llama.cpp's own per-chunk values on these files move by up to 1.9% between its flash-
  attention and plain attention paths (perplexity.json "fa_off"). There: within 2% for
  chunks 1-3 and within 0.5% from chunk 4 (>= 252 tokens) on;
* KL divergence with a real quantization (Q4_0): mean KLD within 1%, same top p within 1
  point, mean delta-p within 0.25 points, per-chunk KLD within 2%. Q8_0 and Q4_1 are
  rounding-level copies of F16 (KLD ~0.004), where the KLD measures each engine's own
  arithmetic as much as the file: mean KLD within 15% there, the other bars the same.
"""
from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import pytest

from ember.commands import cli
from tools.make_perplexity_golden import parse_kld_output

pytestmark = pytest.mark.native

CTX = 128
VARIANTS = ["F16", "Q4_1", "Q8_0", "Q4_0", "gemma3"]


@pytest.fixture(scope="module")
def golden(golden_dir):
    return json.loads((golden_dir / "perplexity.json").read_text())


@pytest.fixture(scope="module")
def ppl_golden(golden_meta):
    assert golden_meta["perplexity"]["ctx"] == CTX
    return golden_meta["perplexity"]


@pytest.fixture(scope="module")
def models(model_variants, gemma_model_path):
    return {**model_variants, "gemma3": gemma_model_path}


@pytest.fixture(scope="module")
def essay(ppl_golden):
    return Path(__file__).resolve().parents[2] / ppl_golden["text"]


def ember(*argv) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main(["perplexity", "-t", "2", *map(str, argv)])
    return rc, out.getvalue(), err.getvalue()


def parse_ppl(out: str, err: str) -> dict:
    m = re.search(r"Final estimate: PPL = ([0-9.]+) \+/- ([0-9.]+)", out)
    assert m, out
    n = re.search(r"calculating perplexity over (\d+) chunks", err)
    assert n, err
    return {"ppl": float(m.group(1)), "ppl_err": float(m.group(2)), "n_chunks": int(n.group(1)),
            "running_ppl": [float(x) for x in re.findall(r"\[\d+\]([0-9.]+)", out)]}


@pytest.fixture(scope="module")
def f16_base(models, essay, tmp_path_factory):
    """`ember perplexity` on F16, saving the KL-divergence base on the way."""
    base = tmp_path_factory.mktemp("kld") / "f16.kld"
    rc, out, err = ember("-m", models["F16"], "-f", essay, "-c", CTX,
                         "--kl-divergence-base", base)
    assert rc == 0, err
    return out, err, base


@pytest.mark.parametrize("variant", VARIANTS)
def test_perplexity_matches_llama_cpp(variant, models, essay, ppl_golden, f16_base):
    if variant == "F16":
        _, out, err = (0, *f16_base[:2])
    else:
        rc, out, err = ember("-m", models[variant], "-f", essay, "-c", CTX)
        assert rc == 0, err
    ours, ref = parse_ppl(out, err), ppl_golden["results"][variant]
    assert ours["n_chunks"] == ref["n_chunks"]
    assert len(ours["running_ppl"]) == ref["n_chunks"]
    assert ours["ppl"] == pytest.approx(ref["ppl"], rel=0.005)
    assert ours["ppl_err"] == pytest.approx(ref["ppl_err"], rel=0.01)
    for i, (a, b) in enumerate(zip(ours["running_ppl"], ref["running_ppl"])):
        tol = 0.005 if variant == "F16" or i >= 3 else 0.02
        assert a == pytest.approx(b, rel=tol), f"chunk {i + 1}: {a} vs llama.cpp {b}"


def test_quantized_tolerance_is_llama_cpps_own_spread(golden, ppl_golden):
    """The 2% allowed on the first chunks of quantized files is what llama.cpp itself moves
    by there between its two attention paths; on F16 it moves by < 0.05%."""
    spread = {k: max(abs(a / b - 1) for a, b in zip(v["running_ppl"][:3],
                                                    ppl_golden["results"][k]["running_ppl"]))
              for k, v in golden["fa_off"].items()}
    assert spread["F16"] < 0.0005
    assert 0.015 < max(spread[k] for k in ("Q8_0", "Q4_0", "Q4_1")) < 0.02


@pytest.mark.parametrize("variant", ["Q4_0", "Q8_0", "Q4_1"])
def test_kl_divergence_matches_llama_cpp(variant, models, golden, f16_base):
    rc, out, err = ember("-m", models[variant], "--kl-divergence-base", f16_base[2],
                         "--kl-divergence")
    assert rc == 0, err
    ours = parse_kld_output(out)
    ref = golden["kld"]["results"][variant]
    assert len(ours["chunks"]) == len(ref["chunks"]) == golden["kld"]["n_chunks"]
    s, r = ours["summary"], ref["summary"]
    assert set(s) == set(r), "the printout has llama-perplexity's statistics"
    kld_tol = 0.01 if variant == "Q4_0" else 0.15
    assert s["mean_kld"] == pytest.approx(r["mean_kld"], rel=kld_tol)
    assert abs(s["same_top_p"] - r["same_top_p"]) <= 1.0
    assert abs(s["mean_dp"] - r["mean_dp"]) <= 0.25
    assert s["ppl_q"] == pytest.approx(r["ppl_q"], rel=0.005)
    assert s["ppl_base"] == pytest.approx(r["ppl_base"], rel=0.005)
    if variant == "Q4_0":
        assert s["rms_dp"] == pytest.approx(r["rms_dp"], rel=0.02)
        assert s["mean_kld_err"] == pytest.approx(r["mean_kld_err"], rel=0.05)
        for a, b in zip(ours["chunks"], ref["chunks"]):
            assert a["kld"] == pytest.approx(b["kld"], rel=0.02), a["chunk"]


def test_kl_divergence_of_the_base_model_with_itself_is_zero(models, f16_base):
    rc, out, err = ember("-m", models["F16"], "--kl-divergence-base", f16_base[2],
                         "--kl-divergence", "--chunks", 2)
    assert rc == 0, err
    s = parse_kld_output(out)["summary"]
    assert len(parse_kld_output(out)["chunks"]) == 2
    assert abs(s["mean_kld"]) < 1e-5
    assert s["same_top_p"] == 100.0
    assert abs(s["mean_dp"]) < 0.01
    assert s["ppl_q"] == pytest.approx(s["ppl_base"], rel=1e-5)


def test_base_file_holds_the_scored_positions(f16_base, golden_meta, golden_dir):
    from ember.commands.perplexity import LP_FLOOR, KLDBase
    base = KLDBase(f16_base[2])
    try:
        h = base.header
        assert (h["n_ctx"], h["n_chunk"], h["first"], h["n_scored"]) == (CTX, 8, 64, 63)
        assert h["add_bos"] is False and h["model"].endswith("F16.gguf")
        want = golden_meta["texts"]["essay"]["tokens"]["smollm2"][: 8 * CTX]
        assert base.tokens == want
        rows = 0
        for c in range(h["n_chunk"]):
            tl, top, counts, ids, lp = base.read_chunk()
            assert (counts > 0).all() and (lp >= LP_FLOOR).all() and (lp <= 0).all()
            assert (tl <= 0).all()
            starts = [0, *counts.cumsum()[:-1]]
            for r in range(len(counts)):  # the top-1 id is an entry of its row
                assert top[r] in ids[starts[r]:starts[r] + counts[r]]
            rows += len(counts)
        assert base.f.read() == b""
    finally:
        base.close()
    assert rows == 8 * 63
    # what llama.cpp's dense base file takes for the same rows (uint16 per vocab entry)
    n_vocab = h["n_vocab"]
    dense = rows * (2 * ((n_vocab + 1) // 2) + 4) * 2
    assert f16_base[2].stat().st_size < 0.75 * dense


def test_too_short_text_is_refused_as_llama_cpp_does(models, tmp_path):
    t = tmp_path / "short.txt"
    t.write_text("Only a few words here, far fewer than two chunks of tokens.")
    rc, out, err = ember("-m", models["Q4_1"], "-f", t, "-c", CTX)
    assert rc == 1
    assert "you need at least 256 tokens" in err


def test_kl_divergence_needs_a_base_file(models, essay):
    rc, _, err = ember("-m", models["Q4_1"], "--kl-divergence")
    assert rc == 1 and "--kl-divergence-base" in err
    rc, _, err = ember("-m", models["Q4_1"], "--kl-divergence", "--kl-divergence-base", essay)
    assert rc == 1 and "not an Ember KL-divergence base file" in err
