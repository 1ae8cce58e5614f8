"""The backend layer, tested without a GPU through the test backend (libember-test.so: the
scalar CPU kernels behind the backend ABI, in a library of its own, loaded from
EMBER_BACKEND_PATH like libember-cuda.so from next to the engine).

Since the test backend runs the same scalar kernels as the CPU at EMBER_ISA=scalar, any
placement of the layers must give the CPU's logits bit for bit: a missing or misplaced copy
at a split, a wrong device address or a stale plan shows up as a difference (the test
backend's fresh memory is NaN bytes). The fallbacks (no library, no driver, ABI mismatch,
no device, too little memory, a type the backend lacks, an allocation that fails) must
leave the model running on the CPU with the reason readable, and nothing leaked."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import REPO_ROOT, require_native_lib

pytestmark = pytest.mark.native
PROBE = REPO_ROOT / "tests" / "support" / "backend_probe.py"
PROMPT = "The capital of France is Paris, and the capital of Germany is"
TEST_ENV_KEYS = ("EMBER_TEST_BACKEND_DEVICES", "EMBER_TEST_BACKEND_MEMORY", "EMBER_TEST_BACKEND_FAIL_INIT",
                 "EMBER_TEST_BACKEND_ABI", "EMBER_TEST_BACKEND_UNSUPPORTED", "EMBER_TEST_BACKEND_FAIL_ALLOC_AFTER")
MARGIN = 32 << 20  # the least free memory a fit leaves (context.cpp)


def test_backend_library() -> Path:
    env = os.environ.get("EMBER_TEST_BACKEND")
    if env:
        return Path(env)
    lib = require_native_lib()
    name = {"win32": "ember-test.dll", "darwin": "libember-test.dylib"}.get(sys.platform, "libember-test.so")
    for c in [lib.parent / name, REPO_ROOT / "build" / name, *sorted(REPO_ROOT.glob(f"build*/{name}"))]:
        if c.is_file():
            return c
    pytest.fail(f"{name} not found: build it (cmake --build build --target ember-test) or set "
                "EMBER_TEST_BACKEND", pytrace=False)


test_backend_library.__test__ = False  # a helper, not a test


def probe(tmp_path, model, backend="test", gpu_layers=-1, env=None, path=None, **spec):
    lib = require_native_lib()
    e = {k: v for k, v in os.environ.items() if k not in TEST_ENV_KEYS}
    e["EMBER_LIB"] = str(lib)
    e["EMBER_BACKEND_PATH"] = str(test_backend_library()) if path is None else path
    e.update(env or {})
    out_npz = tmp_path / f"probe{len(list(tmp_path.iterdir()))}.npz"
    spec = {"model": str(model), "backend": backend, "gpu_layers": gpu_layers, "prompt": PROMPT, **spec}
    r = subprocess.run([sys.executable, str(PROBE), json.dumps(spec), str(out_npz)], env=e, cwd=REPO_ROOT,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout.strip().splitlines()[-1])
    arrays = dict(np.load(out_npz)) if out_npz.exists() else {}
    return info, arrays


def same_bits(a: dict, b: dict, key: str = "0"):
    for part in ("prompt", "next"):
        x, y = a[part + key], b[part + "0"]
        assert x.shape == y.shape
        assert not np.isnan(x).any()
        assert np.array_equal(x.view(np.uint32), y.view(np.uint32)), f"{part} logits differ"


@pytest.fixture(scope="module")
def cpu_reference(tmp_path_factory, starter_model_path):
    info, arrays = probe(tmp_path_factory.mktemp("cpu"), starter_model_path, backend="cpu")
    assert info["contexts"][0]["backend"] == "CPU (scalar)"
    # the probe on the CPU reads the decode's matrices (scalar: no four-row copy, the file)
    from tests.commands.test_bench import decode_matrix_bytes
    assert info["contexts"][0]["probe_bytes"] == decode_matrix_bytes(starter_model_path)
    return arrays


def test_devices_are_listed_with_reasons(tmp_path, starter_model_path):
    info, _ = probe(tmp_path, starter_model_path, backend="cpu")
    rows = info["devices_before"]
    assert rows[0]["backend"] == "cpu" and rows[0]["usable"]
    test = [r for r in rows if r["backend"] == "test"]
    assert len(test) == 1 and test[0]["usable"] and test[0]["name"] == "Ember test device 0"
    assert test[0]["memory_total"] == test[0]["memory_free"] > 0
    cuda = [r for r in rows if r["backend"] == "cuda"]
    assert len(cuda) == 1
    assert cuda[0]["usable"] or cuda[0]["reason"], "an unusable CUDA backend must say why"


@pytest.mark.parametrize("gpu_layers, expect", [(-1, 31), (31, 31), (99, 31), (5, 5), (1, 1)])
def test_any_placement_gives_the_cpu_bits(tmp_path, starter_model_path, cpu_reference, gpu_layers, expect):
    info, arrays = probe(tmp_path, starter_model_path, gpu_layers=gpu_layers)
    c = info["contexts"][0]
    assert c["n_gpu_layers"] == expect and c["backend_name"] == "test"
    assert c["backend"] == f"Test: Ember test device 0, {expect}/31 layers"
    same_bits(arrays, cpu_reference)
    # `ember bench`'s read-rate probe measures the CPU: refused, with the reason, here
    assert "offloads layers" in c["probe_error"] and "probe_bytes" not in c


def test_gemma3_on_the_test_backend(tmp_path, gemma_model_path):
    """Sliding-window layers with their ring caches, soft-caps, scaled embeddings, post-norms."""
    ref_info, ref = probe(tmp_path, gemma_model_path, backend="cpu")
    for layers in (-1, 7):
        info, arrays = probe(tmp_path, gemma_model_path, gpu_layers=layers)
        assert info["contexts"][0]["n_gpu_layers"] == (19 if layers < 0 else 7)
        same_bits(arrays, ref)


def test_gemma4_on_the_test_backend(tmp_path, starter_model_path):
    """Gemma 4's per-layer embeddings, per-layer head sizes and shared-KV layers on a device:
    all layers there give the CPU's bits; a count that would put a shared layer and the layer
    whose cache it reads on different devices keeps only the output head there, and says why."""
    import gguf
    from tests.support import gguf_writer as gw
    r = gguf.GGUFReader(starter_model_path)
    strings = lambda key: [bytes(r.fields[key].parts[i]).decode("utf-8") for i in r.fields[key].data]  # noqa: E731
    model = tmp_path / "tiny-gemma4.gguf"
    model.write_bytes(gw.tiny_gemma4(strings("tokenizer.ggml.tokens"), strings("tokenizer.ggml.merges")).to_bytes())
    ref_info, ref = probe(tmp_path, model, backend="cpu")
    info, arrays = probe(tmp_path, model, gpu_layers=-1)
    assert info["contexts"][0]["n_gpu_layers"] == 5
    same_bits(arrays, ref)
    info, arrays = probe(tmp_path, model, gpu_layers=3)
    c = info["contexts"][0]
    assert c["n_gpu_layers"] == 1 and "whose KV cache it reads" in c["note"], c
    same_bits(arrays, ref)


def test_contexts_share_the_weights_and_free_everything(tmp_path, starter_model_path, cpu_reference):
    one, _ = probe(tmp_path, starter_model_path)
    two, arrays = probe(tmp_path, starter_model_path, contexts=2)
    dev = lambda rows: [r for r in rows if r["backend"] == "test"][0]  # noqa: E731
    total = dev(one["devices_before"])["memory_total"]
    used1 = total - dev(one["devices_open"])["memory_free"]
    used2 = total - dev(two["devices_open"])["memory_free"]
    assert used1 > 0
    # the second context adds its caches and buffers, not another copy of the weights
    assert used2 - used1 < used1 / 2
    assert dev(two["devices_after"])["memory_free"] == total  # nothing left once both are closed
    same_bits(arrays, cpu_reference, "1")


def test_auto_fits_the_free_memory(tmp_path, starter_model_path, cpu_reference):
    info, arrays = probe(tmp_path, starter_model_path, env={"EMBER_TEST_BACKEND_MEMORY": str(100 << 20)})
    c = info["contexts"][0]
    assert 1 < c["n_gpu_layers"] < 31
    assert f"{c['n_gpu_layers']} of 31 layers fit" in c["note"]
    dev = [r for r in info["devices_open"] if r["backend"] == "test"][0]
    assert dev["memory_free"] >= MARGIN
    same_bits(arrays, cpu_reference)


def test_asking_for_more_layers_than_fit_takes_what_fits(tmp_path, starter_model_path, cpu_reference):
    info, arrays = probe(tmp_path, starter_model_path, gpu_layers=31, env={"EMBER_TEST_BACKEND_MEMORY": str(100 << 20)})
    assert 1 < info["contexts"][0]["n_gpu_layers"] < 31
    same_bits(arrays, cpu_reference)


def test_a_type_the_backend_lacks_stays_on_the_cpu(tmp_path, starter_model_path, cpu_reference):
    # the starter's blocks are Q4_1, its tied output head Q8_0
    info, arrays = probe(tmp_path, starter_model_path, env={"EMBER_TEST_BACKEND_UNSUPPORTED": "Q4_1"})
    c = info["contexts"][0]
    assert c["n_gpu_layers"] == 1
    assert c["note"] == "30 layers kept on the CPU (Test has no mul_mat of Q4_1)"
    same_bits(arrays, cpu_reference)


@pytest.mark.parametrize("env, backend, note", [
    ({"EMBER_TEST_BACKEND_MEMORY": str(1 << 20)}, "auto", "Test: too little memory on Ember test device 0"),
    ({"EMBER_TEST_BACKEND_FAIL_INIT": "no CUDA-capable driver (simulated)"}, "auto",
     "Test: no CUDA-capable driver (simulated)"),
    ({"EMBER_TEST_BACKEND_ABI": "99"}, "test", "was built for backend ABI 99"),
    ({"EMBER_TEST_BACKEND_DEVICES": "0"}, "test", "Test: no device found"),
    ({"EMBER_TEST_BACKEND_DEVICES": "2"}, "test:2", "Test: there is no device 2 (it has 2)"),
    ({"EMBER_TEST_BACKEND_FAIL_ALLOC_AFTER": "3"}, "test", "Test: failed allocating"),
    ({"EMBER_TEST_BACKEND_UNSUPPORTED": "Q4_1,Q8_0"}, "test", "cannot compute these layers (no mul_mat of Q8_0)"),
])
def test_fallbacks_run_on_the_cpu_and_say_why(tmp_path, starter_model_path, cpu_reference, env, backend, note):
    info, arrays = probe(tmp_path, starter_model_path, backend=backend, env=env)
    assert "error" not in info, info.get("error")
    c = info["contexts"][0]
    assert c["backend"] == "CPU (scalar)" and c["n_gpu_layers"] == 0 and c["backend_name"] == "cpu"
    assert note in c["note"]
    same_bits(arrays, cpu_reference)
    after = [r for r in info["devices_after"] if r["backend"] == "test" and r["usable"]]
    assert all(r["memory_free"] == r["memory_total"] for r in after), "a failed offload leaked device memory"


def test_a_missing_library_is_a_reason_not_a_crash(tmp_path, starter_model_path, cpu_reference):
    info, arrays = probe(tmp_path, starter_model_path, backend="auto", path=str(tmp_path / "libember-nothere.so"))
    c = info["contexts"][0]
    assert c["backend"] == "CPU (scalar)"
    assert "libember-nothere.so does not exist (EMBER_BACKEND_PATH)" in c["note"]
    same_bits(arrays, cpu_reference)


def test_second_device_and_explicit_cpu(tmp_path, starter_model_path, cpu_reference):
    info, arrays = probe(tmp_path, starter_model_path, backend="test:1", env={"EMBER_TEST_BACKEND_DEVICES": "2"})
    assert info["contexts"][0]["backend"] == "Test: Ember test device 1, 31/31 layers"
    same_bits(arrays, cpu_reference)
    info, _ = probe(tmp_path, starter_model_path, backend="test", gpu_layers=0)
    assert info["contexts"][0]["backend"] == "CPU (scalar)"
    assert info["contexts"][0]["note"] == "no layers offloaded (0 GPU layers asked for)"


def test_an_unknown_backend_name_is_an_error(tmp_path, starter_model_path):
    info, _ = probe(tmp_path, starter_model_path, backend="cdua")
    assert info["error"].startswith("no backend named 'cdua' (known: auto, cpu, test, cuda")


def test_upload_reports_progress_and_cancels_cleanly(tmp_path, starter_model_path):
    info, _ = probe(tmp_path, starter_model_path, contexts=2)
    f = info["progress"]
    # the first context copies the weights in steps; the second finds them there
    assert len(f) > 10 and f == sorted(f[:f.index(1.0) + 1]) + f[f.index(1.0) + 1:]
    assert f.count(1.0) == 2
    info, _ = probe(tmp_path, starter_model_path, cancel_at=0.5)
    assert info["error_type"] == "CancelledError" and "copying the weights" in info["error"]
    dev = [r for r in info["devices_after"] if r["backend"] == "test"][0]
    assert dev["memory_free"] == dev["memory_total"], "a cancelled upload left memory on the device"
