"""What the Models page lists and what Delete may do, without the UI: the folder's models by
name, then the recent ones elsewhere (gone files and endpoints left out, the folder's own not
twice); Delete only inside the folder and never the loaded model."""
from __future__ import annotations

import pytest
from ember.model_library import DeleteRefused, delete_model, library


def test_the_folder_first_by_name_then_recent_models_elsewhere(tmp_path):
    folder, elsewhere = tmp_path / "models", tmp_path / "downloads"
    folder.mkdir()
    elsewhere.mkdir()
    for p in (folder / "b.gguf", folder / "A.gguf", elsewhere / "x.gguf", elsewhere / "y.gguf"):
        p.write_bytes(b"GGUF")
    (folder / "notes.txt").write_text("not a model")
    recent = [str(elsewhere / "y.gguf"), "http://10.0.0.5:8080#qwen", str(folder / "b.gguf"),
              str(elsewhere / "gone.gguf"), str(elsewhere / "x.gguf")]
    got = [(e.path.name, e.in_folder) for e in library(folder, recent)]
    assert got == [("A.gguf", True), ("b.gguf", True), ("y.gguf", False), ("x.gguf", False)]
    assert library(tmp_path / "missing", []) == []


def test_delete_is_refused_for_the_loaded_model_and_files_elsewhere(tmp_path):
    folder = tmp_path / "models"
    folder.mkdir()
    loaded, spare, outside = folder / "loaded.gguf", folder / "spare.gguf", tmp_path / "o.gguf"
    for p in (loaded, spare, outside):
        p.write_bytes(b"GGUF")
    with pytest.raises(DeleteRefused, match="model in use"):
        delete_model(loaded, folder, str(loaded))
    with pytest.raises(DeleteRefused, match="only removed from the list"):
        delete_model(outside, folder, str(loaded))
    assert loaded.exists() and outside.exists()
    delete_model(spare, folder, str(loaded))
    assert not spare.exists()
    delete_model(loaded, folder, "http://10.0.0.5:8080#qwen")  # an endpoint is loaded
    assert not loaded.exists()
