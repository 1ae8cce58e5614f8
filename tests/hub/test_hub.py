"""The Hugging Face catalog against a hub on loopback (tests/support/fake_hub.py): search,
a repository's GGUF files with their quantization, size and memory estimate from the
header, and downloads that resume, check sha256 and cancel."""
from __future__ import annotations

import hashlib

import pytest
from ember import hub as hubmod
from ember.starter import SHA256 as STARTER_SHA256

from tests.support.fake_hub import FIRST_PART, FakeHub

pytestmark = pytest.mark.native

REPO = "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF"
NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.fixture
def fake(starter_model_path, tmp_path):
    h = FakeHub()
    h.add(REPO, starter_model_path, downloads=900, sha256=STARTER_SHA256)
    text = tmp_path / "notes.gguf"
    text.write_bytes(b"not a model\n" * 10)
    h.add("someone/SmolLM2-notes", text, downloads=3)
    yield h
    h.close()


def test_search_lists_gguf_repositories_most_downloaded_first(fake):
    hits = hubmod.Hub(fake.url).search("smollm2")
    assert [(r.repo_id, r.downloads) for r in hits] == [(REPO, 900), ("someone/SmolLM2-notes", 3)]
    (path, _), = fake.requests
    assert path.startswith("/api/models?") and "filter=gguf" in path and "search=smollm2" in path


def test_a_repositorys_files_have_quant_size_sha_and_a_memory_estimate(fake, starter_model_path):
    from ember.model_card import estimate_memory, memory_fit
    hub = hubmod.Hub(fake.url)
    (f,) = hub.files(REPO)  # the README is not a model
    assert (f.name, f.quant, f.size, f.sha256) == (
        NAME, "Q4_1", starter_model_path.stat().st_size, STARTER_SHA256)
    info = hub.header_info(f)
    assert (info["arch"], info["ftype"], info["n_layer"], info["file_size"]) == \
        ("llama", "Q4_1", 30, f.size)
    assert info["name"] == "SmolLM2-135M-Instruct" and info["path"].endswith("/" + NAME)
    # only the header was read, by range
    ((_, rng),) = fake.file_requests()
    assert rng == f"bytes=0-{hubmod.HEADER_FIRST - 1}"
    fit = memory_fit(estimate_memory(info, 4096), 8 << 30)
    assert fit.fits and fit.text == "fits in 8.0 GB free"
    assert not memory_fit(estimate_memory(info, 4096), 64 << 20).fits


def test_a_file_that_is_not_a_model_says_so(fake):
    from ember.engine import ModelFormatError
    hub = hubmod.Hub(fake.url)
    (f,) = hub.files("someone/SmolLM2-notes")
    with pytest.raises(ModelFormatError):
        hub.header_info(f)


def test_download_checks_sha256_and_takes_the_files_name(fake, tmp_path, starter_model_path):
    hub = hubmod.Hub(fake.url)
    (f,) = hub.files(REPO)
    seen = []
    dest = hub.download(f, tmp_path / "models", lambda *a: seen.append(a) or True)
    assert dest == tmp_path / "models" / NAME
    assert not (tmp_path / "models" / (NAME + ".part")).exists()
    assert dest.stat().st_size == f.size
    assert seen[-1] == ("download", f.size, f.size)
    with pytest.raises(hubmod.HubError, match="already in"):
        hub.download(f, tmp_path / "models")


def test_a_cancelled_download_resumes_from_its_part(fake, tmp_path, starter_model_path):
    hub = hubmod.Hub(fake.url)
    (f,) = hub.files(REPO)
    folder = tmp_path / "models"
    with pytest.raises(hubmod.Cancelled):
        hub.download(f, folder, lambda phase, done, total: done < 3 * FIRST_PART)
    part = folder / (NAME + ".part")
    kept = part.stat().st_size
    assert 3 * FIRST_PART <= kept < f.size
    assert part.read_bytes() == starter_model_path.read_bytes()[:kept]
    phases = []
    dest = hub.download(f, folder, lambda phase, done, total: phases.append(phase) or True)
    assert fake.file_requests()[-1][1] == f"bytes={kept}-"  # only the rest was asked for
    assert phases[0] == "check" and phases[-1] == "download"
    assert hashlib.sha256(dest.read_bytes()).hexdigest() == STARTER_SHA256


def test_a_damaged_download_is_refused_and_removed(fake, tmp_path):
    fake.corrupt.add(NAME)
    hub = hubmod.Hub(fake.url)
    (f,) = hub.files(REPO)
    with pytest.raises(hubmod.HubError, match="damaged on the way"):
        hub.download(f, tmp_path / "models")
    assert list((tmp_path / "models").iterdir()) == []


def test_an_unreachable_or_missing_repository_is_a_sentence(fake):
    with pytest.raises(hubmod.HubError, match="no such repository"):
        hubmod.Hub(fake.url).files("nobody/nothing")
    fake.close()
    with pytest.raises(hubmod.HubError, match="Could not reach 127.0.0.1"):
        hubmod.Hub(fake.url).search("x")
