"""The architecture table is the one list of supported families: the README's list and the
engine's refusal message are generated from it."""
from __future__ import annotations

from pathlib import Path

import pytest

from ember.engine import EmberError, Model, supported_architectures
from tests.support import gguf_writer as gw
from tests.engine.test_gguf_robustness import (  # noqa: F401 (fixtures)
    _replace_kv,
    base_spec,
    starter_vocab,
)
from tools import readme_archs

ROOT = Path(__file__).resolve().parents[2]


def test_table_names_the_families_the_issue_asks_for():
    archs = supported_architectures()
    for name in ("llama", "qwen2", "qwen3", "gemma3", "phi3"):
        assert name in archs and archs[name], name


def test_readme_lists_exactly_the_table():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme_archs.current_block(readme)
    assert block is not None, "README.md lost its generated architectures block"
    assert block == readme_archs.render(supported_architectures()), (
        "README.md's supported-models list differs from the engine's table: "
        "run python tools/readme_archs.py --write")


def test_readme_lists_exactly_the_weight_types():
    """The README's weight types are the engine's: each a type a model's weights may have,
    with its block from the type table; the types only the engine uses are not listed."""
    from ember.engine import weight_types
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme_archs.current_block(readme, readme_archs.TYPES_BEGIN, readme_archs.TYPES_END)
    assert block is not None, "README.md lost its generated weight-types block"
    types = weight_types()
    names = {name for name, _, _ in types.values()}
    # what gguf-py's GGMLQuantizationType calls these ids, and the inference types of #46/#47
    import gguf
    for tid, (name, block_size, nbytes) in types.items():
        assert gguf.GGMLQuantizationType(tid).name == name
        assert gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType(tid)] == (block_size, nbytes)
    assert {"F32", "F16", "BF16", "Q8_0", "Q4_K", "IQ4_XS", "MXFP4"} <= names
    assert not names & {"Q8_1", "Q8_K", "I32"}
    assert block == readme_archs.render_types(types), (
        "README.md's weight types differ from the engine's table: run python tools/readme_archs.py --write")


def test_unknown_architecture_message_lists_the_table(base_spec, tmp_path):
    p = tmp_path / "martian.gguf"
    p.write_bytes(_replace_kv(base_spec(), "general.architecture", gw.STRING, "martian").to_bytes())
    with pytest.raises(EmberError) as e:
        Model(p, n_ctx=32)
    assert "supported: " + ", ".join(supported_architectures()) in str(e.value)
