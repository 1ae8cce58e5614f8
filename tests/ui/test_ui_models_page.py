"""The Models page as a person uses it: models opened by a drop, File > Open or the command
line are listed (and remembered), files copied into the models folder appear while the page
is open, "Loaded" marks only the model in use, the download prompt shows only to someone
without a model, and Delete asks first and never deletes the model in use."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFileDialog, QLabel, QMessageBox, QPushButton

from tests.support.ui import LOAD_TIMEOUT_MS, data_dir, drop_file, find, make_window  # noqa: F401

pytestmark = pytest.mark.native


def model_file(starter: Path, where: Path, name: str) -> Path:
    """Another file holding the starter model (a hard link: no 100 MB copy)."""
    where.mkdir(parents=True, exist_ok=True)
    p = where / name
    try:
        os.link(starter, p)
    except OSError:
        import shutil
        shutil.copyfile(starter, p)
    return p


def open_models_page(qtbot, win):
    qtbot.mouseClick(find(win, QPushButton, "modelsButton"), Qt.LeftButton)
    assert win.stack.currentWidget() is win.models_view
    return win.models_view


def listed(view) -> list[tuple[str, str, bool]]:
    """(file name, Open button's text, listed under "opened from other folders") per row."""
    return [(Path(r.card["path"]).name, r.open_button.text(), not r.in_folder)
            for r in view.rows]


def test_a_model_dropped_on_the_models_page_is_listed_there_as_loaded(qtbot, data_dir,
                                                                      starter_model_path):
    win = make_window(qtbot, data_dir, restore_last=False)
    view = open_models_page(qtbot, win)
    assert find(view, QLabel, "modelsEmpty").isVisible()
    assert view.starter_panel.isVisible()  # nothing yet: the download is offered
    with qtbot.waitSignal(win.model_loaded, timeout=LOAD_TIMEOUT_MS):
        assert drop_file(view, starter_model_path)
    assert win.stack.currentWidget() is view
    assert not find(view, QLabel, "modelsEmpty").isVisible()
    assert listed(view) == [(starter_model_path.name, "Loaded", True)]
    assert view.recent_label.isVisible()
    assert not view.starter_panel.isVisible()  # a model is here: no "No model yet?"
    (row,) = view.rows
    assert row.delete_button.text() == "Remove from list" and not row.delete_button.isEnabled()


def test_models_opened_by_command_line_drop_and_file_open_are_remembered(
        qtbot, data_dir, tmp_path, starter_model_path, monkeypatch):
    a = model_file(starter_model_path, tmp_path / "cli", "a-model.gguf")
    b = model_file(starter_model_path, tmp_path / "dropped", "b-model.gguf")
    c = model_file(starter_model_path, tmp_path / "opened", "c-model.gguf")
    win = make_window(qtbot, data_dir, open_model=str(a))  # `ember a-model.gguf`
    qtbot.waitUntil(lambda: win.model is not None, timeout=LOAD_TIMEOUT_MS)
    with qtbot.waitSignal(win.model_loaded, timeout=LOAD_TIMEOUT_MS):
        assert drop_file(win.centralWidget(), b)
    monkeypatch.setattr(QFileDialog, "getOpenFileName", lambda *a, **k: (str(c), ""))
    with qtbot.waitSignal(win.model_loaded, timeout=LOAD_TIMEOUT_MS):
        win.findChild(type(win.menuBar().actions()[0]), "actionOpenModel").trigger()
    view = open_models_page(qtbot, win)
    assert listed(view) == [("c-model.gguf", "Loaded", True), ("b-model.gguf", "Open", True),
                            ("a-model.gguf", "Open", True)]
    assert not find(view, QLabel, "modelsEmpty").isVisible()
    assert not view.starter_panel.isVisible()
    win.close()
    # the list survives a relaunch
    win2 = make_window(qtbot, data_dir, restore_last=False)
    view2 = open_models_page(qtbot, win2)
    assert listed(view2) == [("c-model.gguf", "Open", True), ("b-model.gguf", "Open", True),
                             ("a-model.gguf", "Open", True)]
    # Remove from list forgets one; its file stays
    (row_b,) = [r for r in view2.rows if r.card["file_name"] == "b-model.gguf"]
    qtbot.mouseClick(row_b.delete_button, Qt.LeftButton)
    assert [n for n, _, _ in listed(view2)] == ["c-model.gguf", "a-model.gguf"]
    assert str(b) not in win2.settings.recent_models and b.is_file()


def test_files_copied_into_the_folder_appear_while_the_page_is_open(qtbot, data_dir,
                                                                    starter_model_path):
    win = make_window(qtbot, data_dir, restore_last=False)
    view = open_models_page(qtbot, win)
    assert view.rows == [] and view.starter_panel.isVisible()
    copied = model_file(starter_model_path, data_dir / "models", "copied.gguf")
    qtbot.waitUntil(lambda: listed(view) == [("copied.gguf", "Open", False)],
                    timeout=LOAD_TIMEOUT_MS)
    assert not find(view, QLabel, "modelsEmpty").isVisible()
    assert not view.starter_panel.isVisible()
    assert view.rows[0].values["Architecture"] == "llama"
    copied.unlink()
    qtbot.waitUntil(lambda: view.rows == [], timeout=LOAD_TIMEOUT_MS)
    assert find(view, QLabel, "modelsEmpty").isVisible() and view.starter_panel.isVisible()


def test_delete_asks_first_and_never_deletes_the_model_in_use(qtbot, data_dir,
                                                              starter_model_path, monkeypatch):
    keep = model_file(starter_model_path, data_dir / "models", "in-use.gguf")
    spare = model_file(starter_model_path, data_dir / "models", "spare.gguf")
    win = make_window(qtbot, data_dir, restore_last=False)
    view = open_models_page(qtbot, win)
    (row_keep,) = [r for r in view.rows if r.card["file_name"] == "in-use.gguf"]
    with qtbot.waitSignal(win.model_loaded, timeout=LOAD_TIMEOUT_MS):
        qtbot.mouseClick(row_keep.open_button, Qt.LeftButton)
    view = open_models_page(qtbot, win)
    assert listed(view) == [("in-use.gguf", "Loaded", False), ("spare.gguf", "Open", False)]
    in_use, other = view.rows
    assert in_use.delete_button.text() == "Delete model…"
    assert not in_use.delete_button.isEnabled()  # the model in use cannot be deleted
    asked = []

    def answer(reply):
        def question(parent, title, text, *a):
            asked.append(text)
            return reply
        monkeypatch.setattr(QMessageBox, "question", question)

    answer(QMessageBox.No)
    qtbot.mouseClick(other.delete_button, Qt.LeftButton)
    assert asked and "spare.gguf" in asked[0] and spare.is_file()
    assert len(view.rows) == 2
    answer(QMessageBox.Yes)
    qtbot.mouseClick(view.rows[1].delete_button, Qt.LeftButton)
    assert not spare.exists()
    assert listed(view) == [("in-use.gguf", "Loaded", False)]
    assert find(win, QLabel, "statusMessage").full_text() == "Deleted spare.gguf"
    # even asked directly, the loaded model is refused before any question
    asked.clear()
    assert not win.delete_model(str(keep))
    assert keep.is_file() and not asked
    assert "in-use.gguf was not deleted" in win.error_banner.plain
    assert "model in use" in win.error_banner.plain


@pytest.fixture(scope="module")
def server(starter_model_path):
    from tests.support.server_process import ServerProcess
    s = ServerProcess(starter_model_path, "--parallel", "1", "-c", "512")
    yield s
    s.stop()


def test_an_endpoint_says_loaded_only_while_it_is_the_model(qtbot, data_dir, server,
                                                           starter_model_path):
    win = make_window(qtbot, data_dir, restore_last=False)
    with qtbot.waitSignal(win.model_loaded, timeout=LOAD_TIMEOUT_MS):
        assert win.add_endpoint(server.url)
    view = open_models_page(qtbot, win)
    (endpoint,) = view.endpoint_rows
    assert endpoint.open_button.text() == "Loaded" and not endpoint.open_button.isEnabled()
    with qtbot.waitSignal(win.model_loaded, timeout=LOAD_TIMEOUT_MS):
        assert drop_file(view, starter_model_path)
    (endpoint,) = view.endpoint_rows
    assert endpoint.open_button.text() == "Open" and endpoint.open_button.isEnabled()
    assert listed(view) == [(starter_model_path.name, "Loaded", True)]
