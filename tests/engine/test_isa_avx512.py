"""The AVX-512 level against the AVX2 level on real weights: its prefill tiles
(cpu/kernels_avx512.cpp) compute the AVX2 tiles' integer sums and the same float
operations in the same order, so whole-model logits must be bit-identical, batched or
token by token. On a CPU without AVX-512 VNNI these tests are skipped, and say so: the
level is then covered by nothing on that machine (the fidelity tests only walk the levels
the CPU has). The last test runs everywhere: it reads the library's load-time code."""
from __future__ import annotations

import platform
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

from ember.engine import Model, supported_isas

pytestmark = pytest.mark.native

needs_avx512 = pytest.mark.skipif(
    "avx512" not in supported_isas(),
    reason="this CPU has no AVX-512 VNNI: the avx512 kernel level was NOT exercised here")


def _logits(path, isa: str, ids: list[int], one_by_one: bool) -> np.ndarray:
    m = Model(path, n_ctx=512, n_threads=2, n_batch=64, isa=isa)
    try:
        if not one_by_one:
            return m.eval_logits(ids)
        rows = []
        for pos, tok in enumerate(ids):
            m.decode([tok], pos)
            rows.append(m.logits())
        return np.stack(rows)
    finally:
        m.close()


@needs_avx512
@pytest.mark.parametrize("one_by_one", [False, True], ids=["prefill", "decode"])
def test_avx512_logits_equal_avx2_bits(gemma_model_path, one_by_one):
    """Gemma-3-270M Q4_K_M (Q4_K, Q5_0, Q6_K, Q8_0 weights): 160 tokens through the
    512-bit tiles (in batches of 64) or the decode path, against AVX2."""
    m = Model(gemma_model_path, n_ctx=512, n_threads=1)
    ids = m.tokenize("The lighthouse keeper counted the ships that passed in the night, "
                     "and wrote each one down in a book that nobody read. " * 8)[:160]
    m.close()
    assert len(ids) == 160
    wide = _logits(gemma_model_path, "avx512", ids, one_by_one)
    base = _logits(gemma_model_path, "avx2", ids, one_by_one)
    assert wide.shape == base.shape
    assert np.array_equal(wide.view(np.uint32), base.view(np.uint32))


@needs_avx512
def test_avx512_prefill_equals_its_decode(gemma_model_path):
    """Batch invariance within the level: a token's logits are the same bits whether it
    was evaluated in a batch (512-bit tiles) or alone (the decode path)."""
    m = Model(gemma_model_path, n_ctx=512, n_threads=1)
    ids = m.tokenize("Every morning the baker opened the shop before the sun was up.")
    m.close()
    batched = _logits(gemma_model_path, "avx512", ids, one_by_one=False)
    alone = _logits(gemma_model_path, "avx512", ids, one_by_one=True)
    assert np.array_equal(batched.view(np.uint32), alone.view(np.uint32))


@needs_avx512
@pytest.mark.parametrize("variant", ["Q4_1", "Q8_0", "Q4_0"])
def test_avx512_legacy_blocks_equal_avx2_bits(model_variants, variant):
    """SmolLM2-135M in the 32-element block types (the shipped Q4_1 file, and its Q8_0 and
    Q4_0 variants): the eight-row VNNI tiles against AVX2, prefill and decode."""
    path = model_variants[variant]
    m = Model(path, n_ctx=512, n_threads=1)
    ids = m.tokenize("A river runs through the valley, past the mill and the old stone bridge, "
                     "down to the sea. " * 6)[:150]
    m.close()
    for one_by_one in (False, True):
        wide = _logits(path, "avx512", ids, one_by_one)
        base = _logits(path, "avx2", ids, one_by_one)
        assert np.array_equal(wide.view(np.uint32), base.view(np.uint32)), one_by_one


def _cpu_has_amx() -> bool:
    try:
        flags = open("/proc/cpuinfo").read().split()
    except OSError:
        return False
    return "amx_tile" in flags and "amx_int8" in flags


needs_amx = pytest.mark.skipif(
    "avx512" not in supported_isas() or not _cpu_has_amx(),
    reason="this CPU (or OS) has no AMX-INT8: the AMX tiles of the avx512 level were NOT exercised here")

_AMX_OFF_PROBE = """
import sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from ember.engine import Model
ids = [int(t) for t in sys.argv[3].split(",")]
m = Model(sys.argv[2], n_ctx=512, n_threads=2, n_batch=64, isa="avx512")
np.save(sys.argv[4], m.eval_logits(ids))
m.close()
"""


@needs_amx
def test_amx_tiles_equal_512bit_tiles_bits(gemma_model_path, tmp_path):
    """The K-quant prefill on the tile unit (AMX) against the 512-bit tiles: the same
    Gemma-3-270M Q4_K_M prompt in batches of 64 (its Q4_K and Q6_K matrices on the tile
    unit here), and in a process with EMBER_AMX=0: the logits have the same bits."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    m = Model(gemma_model_path, n_ctx=512, n_threads=1)
    ids = m.tokenize("The orchard keeper counted the apples that fell in the storm, "
                     "and sold the bruised ones to the cider maker. " * 8)[:150]
    m.close()
    with_amx = _logits(gemma_model_path, "avx512", ids, one_by_one=False)
    app = Path(__file__).resolve().parents[2] / "app"
    out = tmp_path / "off.npy"
    env = {**os.environ, "EMBER_AMX": "0"}
    subprocess.run([sys.executable, "-c", _AMX_OFF_PROBE, str(app), str(gemma_model_path),
                    ",".join(map(str, ids)), str(out)], env=env, check=True)
    without = np.load(out)
    assert without.shape == with_amx.shape
    assert np.array_equal(with_amx.view(np.uint32), without.view(np.uint32))


def _static_initializers(lib: str) -> dict[str, str]:
    """The library's static-initializer functions (run by the loader on every CPU), each
    with its disassembly."""
    names = [line.split()[-1] for line in subprocess.run(
        ["nm", lib], capture_output=True, text=True, check=True).stdout.splitlines()
        if "_GLOBAL__sub_I_" in line]
    return {n: subprocess.run(["objdump", "-d", "--no-show-raw-insn", f"--disassemble={n}", lib],
                              capture_output=True, text=True, check=True).stdout for n in names}


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64") or sys.platform != "linux"
                    or not shutil.which("nm") or not shutil.which("objdump"),
                    reason="needs an x86-64 Linux build and binutils (nm, objdump)")
def test_library_load_runs_no_wide_vector_code():
    """Loading the library must not execute AVX or AVX-512 instructions: a namespace-scope
    __m512i in kernels_avx512.cpp was built by a static initializer compiled for AVX-512,
    which the loader ran on every CPU, so Ember died of SIGILL at import on an AVX2-only
    CPU (an AMD EPYC, Zen 3). Checked on the binary, so it holds on any build machine: each
    initializer's disassembly names no ymm / zmm / mask register."""
    from ember.engine.native import library_path
    lib = str(library_path())
    inits = _static_initializers(lib)
    assert any(inits.values()), "no static initializers found: is the library stripped?"
    wide = {n: [ln for ln in text.splitlines() if re.search(r"%(ymm|zmm)\d|%k[1-7]\b", ln)]
            for n, text in inits.items()}
    assert not {n: v for n, v in wide.items() if v}, wide
