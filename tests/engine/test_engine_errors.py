"""Engine failures arrive as one exception class per kind (so the app tells a missing
file from a broken one without the C status codes), and sampling defaults come from C."""
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


def test_sampling_defaults_are_the_engines():
    """SamplingParams() takes ember_sampler_default_params, not a copy of it."""
    import dataclasses

    from ember.engine import native
    c = native.lib().ember_sampler_default_params()
    p = engine.SamplingParams()
    for f in dataclasses.fields(p):
        if f.name == "seed":
            continue
        assert getattr(p, f.name) == pytest.approx(getattr(c, f.name), rel=1e-6), f.name
    assert p.temperature == 0.8  # float32 0.8 reads back as the 0.8 it was written as
    assert engine.SamplingParams(top_k=3).top_k == 3
