"""Engine failures arrive as one exception class per kind, so the app tells a missing
file from a broken one from an unsupported one without knowing the C status codes."""
from __future__ import annotations

import pytest

from ember import engine

pytestmark = pytest.mark.native


def test_missing_file_is_a_file_read_error(tmp_path):
    with pytest.raises(engine.FileReadError) as e:
        engine.Model(tmp_path / "nope.gguf", metadata_only=True)
    assert isinstance(e.value, engine.EmberError) and e.value.message


def test_text_file_is_a_format_error(tmp_path):
    p = tmp_path / "notes.gguf"
    p.write_text("just some notes, not a model\n" * 10)
    with pytest.raises(engine.ModelFormatError):
        engine.Model(p, metadata_only=True)


def test_cancelled_load_is_cancelled_error(starter_model_path):
    with pytest.raises(engine.CancelledError):
        engine.Model(starter_model_path, progress=lambda f: False)


def test_system_info_names_the_active_isa():
    info = engine.system_info()
    assert "active=" in info or "ISA=" in info
