"""Fixtures for the document library's tests: the fetched MiniLM folder and its GGUF
conversions (made once per session)."""
from __future__ import annotations

from pathlib import Path

import pytest

from tools import fetch_assets


@pytest.fixture(scope="session")
def minilm_dir() -> Path:
    return fetch_assets.minilm_dir()


@pytest.fixture(scope="session")
def minilm_gguf(minilm_dir, tmp_path_factory):
    """outtype -> the converter's file, converted on first use."""
    from tools.convert_minilm import convert

    made: dict[str, Path] = {}

    def get(outtype: str = "f16") -> Path:
        if outtype not in made:
            out = tmp_path_factory.mktemp("minilm") / f"minilm.{outtype}.gguf"
            made[outtype] = convert(minilm_dir, out, outtype)
        return made[outtype]
    return get
