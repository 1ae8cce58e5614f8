"""The Hugging Face catalog in the window, against a hub on loopback: opened from the
Models page, nothing asked before Search; a repository's files with quantization, size
and memory; a download with progress that Cancel stops and Resume finishes by range,
checked by sha256, then listed on the Models page and opened from the dialog."""
from __future__ import annotations

import hashlib

import pytest
from PySide6.QtCore import Qt

from tests.support.fake_hub import FIRST_PART, FakeHub
from tests.support.ui import LOAD_TIMEOUT_MS, data_dir, make_window  # noqa: F401

pytestmark = pytest.mark.native

REPO = "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF"
NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
WAIT_MS = 120_000


@pytest.fixture
def fake(starter_model_path, monkeypatch):
    from ember.starter import SHA256
    h = FakeHub()
    h.add(REPO, starter_model_path, downloads=900, sha256=SHA256)
    h.add("someone/smollm2-tiny-GGUF", starter_model_path, name="tiny-00001-of-00002.gguf",
          downloads=5, sha256=SHA256)
    monkeypatch.setenv("EMBER_HF_ENDPOINT", h.url)
    monkeypatch.setattr("ember.model_card.system_memory_free", lambda: 8 << 30)
    yield h
    h.gate.set()
    h.close()


def open_catalog(qtbot, win):
    qtbot.mouseClick(win.sidebar.models_button, Qt.LeftButton)
    assert win.stack.currentWidget() is win.models_view
    qtbot.mouseClick(win.models_view.hub_button, Qt.LeftButton)
    dlg = win._hub_dialog
    assert dlg is not None and dlg.isVisible() and dlg.objectName() == "hubDialog"
    return dlg


def test_find_download_cancel_resume_and_open(qtbot, data_dir, fake, starter_model_path):
    from ember.starter import SHA256
    win = make_window(qtbot, data_dir, restore_last=False)
    dlg = open_catalog(qtbot, win)
    assert fake.requests == []  # the network only on the user's request
    qtbot.keyClicks(dlg.query, "smollm2")
    qtbot.mouseClick(dlg.search_button, Qt.LeftButton)
    qtbot.waitUntil(lambda: dlg.repos.count() == 2, timeout=WAIT_MS)
    assert dlg.repos.item(0).text() == f"{REPO}\n900 downloads"

    # a split model is listed, saying why it cannot be downloaded
    second = dlg.repos.item(1)
    qtbot.mouseClick(dlg.repos.viewport(), Qt.LeftButton,
                     pos=dlg.repos.visualItemRect(second).center())
    qtbot.waitUntil(lambda: dlg.table.rowCount() == 1, timeout=WAIT_MS)
    assert dlg.table.item(0, 3).text() == "part 1 of 2: split files are not supported yet"
    assert not dlg.download_button.isEnabled()

    first = dlg.repos.item(0)
    qtbot.mouseClick(dlg.repos.viewport(), Qt.LeftButton,
                     pos=dlg.repos.visualItemRect(first).center())
    qtbot.waitUntil(lambda: dlg.table.rowCount() == 1
                    and dlg.table.item(0, 0).text() == NAME, timeout=WAIT_MS)
    size = starter_model_path.stat().st_size
    assert [dlg.table.item(0, c).text() for c in range(3)] == [NAME, "Q4_1", "93.8 MB"]
    # the memory column from the header (read by range), judged against the free memory
    qtbot.waitUntil(lambda: dlg.table.item(0, 3).text() == "fits in 8.0 GB free",
                    timeout=WAIT_MS)
    assert dlg.table.item(0, 3).toolTip().startswith("Weights 0.1 GB mapped")
    assert all(r is not None and r.startswith("bytes=0-") for _, r in fake.file_requests())

    # download; Cancel while it runs keeps the part
    fake.gate.clear()
    assert dlg.download_button.text() == "Download" and dlg.download_button.isEnabled()
    qtbot.mouseClick(dlg.download_button, Qt.LeftButton)
    qtbot.waitUntil(lambda: dlg.progress.isVisible() and dlg.progress.value() > 0,
                    timeout=WAIT_MS)
    assert dlg.status.text().startswith("Downloading… ")
    assert dlg.cancel_button.isVisible()
    qtbot.mouseClick(dlg.cancel_button, Qt.LeftButton)
    fake.gate.set()
    qtbot.waitUntil(lambda: dlg.download is None, timeout=WAIT_MS)
    part = data_dir / "models" / (NAME + ".part")
    kept = part.stat().st_size
    assert 0 < kept <= FIRST_PART + (1 << 18) and kept < size  # Cancel came mid-file
    assert dlg.status.text().startswith("Download cancelled; ")
    assert dlg.download_button.text() == "Resume download"

    # Resume asks for the rest only; the file is checked and takes its name
    with qtbot.waitSignal(dlg.downloaded, timeout=WAIT_MS) as got:
        qtbot.mouseClick(dlg.download_button, Qt.LeftButton)
    dest = data_dir / "models" / NAME
    assert got.args == [str(dest)] and not part.exists()
    assert fake.file_requests()[-1][1] == f"bytes={kept}-"
    assert hashlib.sha256(dest.read_bytes()).hexdigest() == SHA256
    assert dlg.download_button.text() == "In your models folder"
    # the Models page lists it
    qtbot.waitUntil(lambda: [r.card["path"] for r in win.models_view.rows] == [str(dest)],
                    timeout=WAIT_MS)
    # Open loads it and closes the catalog
    with qtbot.waitSignal(win.model_loaded, timeout=LOAD_TIMEOUT_MS) as loaded:
        qtbot.mouseClick(dlg.open_button, Qt.LeftButton)
    assert loaded.args == [str(dest)] and win._hub_dialog is None
