"""File > Find models on Hugging Face…: search the hub's GGUF models, see a repository's
files with their quantization, size and whether each fits this machine's memory, and
download one into the models folder (progress, Cancel, resumed on the next Download). The
hub is asked only when the user searches, opens a repository or downloads."""
from __future__ import annotations

import threading
from pathlib import Path

from PySide6.QtCore import Qt, QThread, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QProgressBar,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
)

from .. import hub as hubmod
from .format import human_bytes

COLUMNS = ("File", "Quantization", "Size", "Memory")


class HubCall(QThread):
    """One catalog request off the UI thread: done(result) or failed(sentence)."""

    done = Signal(object)
    failed = Signal(str)

    def __init__(self, fn, *args, parent=None):
        super().__init__(parent)
        self.fn, self.args = fn, args

    def run(self) -> None:
        try:
            result = self.fn(*self.args)
        except hubmod.HubError as e:
            self.failed.emit(str(e))
        except Exception as e:  # a bug: say so, keep the app alive
            self.failed.emit(f"{type(e).__name__}: {e}")
        else:
            self.done.emit(result)


class HeaderEstimates(QThread):
    """Reads each file's header (by range) and judges it against the free memory."""

    estimated = Signal(int, str, bool, str)  # row, text, fits, detail

    def __init__(self, hub: hubmod.Hub, files: list, n_ctx: int, free: int, parent=None):
        super().__init__(parent)
        self.hub, self.files, self.n_ctx, self.free = hub, files, n_ctx, free
        self.stop = threading.Event()

    def run(self) -> None:
        from ..model_card import estimate_memory, memory_fit
        for row, f in enumerate(self.files):
            if self.stop.is_set():
                return
            if f.split_part is not None:
                continue
            try:
                info = self.hub.header_info(f)
            except Exception as e:  # an engine error on a bad header, or the network
                self.estimated.emit(row, "not a model Ember can read", False,
                                    getattr(e, "message", None) or str(e))
                continue
            fit = memory_fit(estimate_memory(info, self.n_ctx), self.free)
            self.estimated.emit(row, fit.text or human_bytes(estimate_memory(
                info, self.n_ctx).total), fit.fits, fit.detail)


class HubDownload(QThread):
    progress = Signal(str, int, int)  # phase, done, total
    finished_ok = Signal(str)  # the file's path
    failed = Signal(str)
    cancelled = Signal(int)  # bytes kept for the next Download

    def __init__(self, hub: hubmod.Hub, file: hubmod.HubFile, folder: Path, parent=None):
        super().__init__(parent)
        self.hub, self.file, self.folder = hub, file, Path(folder)
        self.cancel_event = threading.Event()

    def cancel(self) -> None:
        self.cancel_event.set()

    def _progress(self, phase: str, done: int, total: int) -> bool:
        self.progress.emit(phase, done, total)
        return not self.cancel_event.is_set()

    def run(self) -> None:
        try:
            path = self.hub.download(self.file, self.folder, self._progress)
        except hubmod.Cancelled:
            part = self.folder / (self.file.name + ".part")
            self.cancelled.emit(part.stat().st_size if part.exists() else 0)
        except OSError as e:
            self.failed.emit(str(e))
        except Exception as e:
            self.failed.emit(f"{type(e).__name__}: {e}")
        else:
            self.finished_ok.emit(str(path))


class HubDialog(QDialog):
    """folder: the models folder downloads go to; n_ctx: the context the memory estimate
    counts; free_memory: bytes free (model_card.system_memory_free)."""

    downloaded = Signal(str)  # a file now in the models folder
    open_model = Signal(str)

    def __init__(self, folder: Path, n_ctx: int, parent=None, *, hub: hubmod.Hub | None = None,
                 free_memory=None):
        super().__init__(parent)
        from ..model_card import system_memory_free
        self.hub = hub or hubmod.Hub()
        self.folder = Path(folder)
        self.n_ctx = n_ctx
        self.free_memory = free_memory or system_memory_free
        self.files: list[hubmod.HubFile] = []
        self.calls: list[QThread] = []  # running (kept referenced until they end)
        self.estimates: HeaderEstimates | None = None
        self.download: HubDownload | None = None
        self._repo_call: HubCall | None = None
        self.setObjectName("hubDialog")
        self.setWindowTitle("Find models on Hugging Face")
        self.resize(820, 560)
        lay = QVBoxLayout(self)
        row = QHBoxLayout()
        self.query = QLineEdit()
        self.query.setObjectName("hubQuery")
        self.query.setPlaceholderText("Search GGUF models (e.g. SmolLM2, Qwen, Llama)")
        self.query.returnPressed.connect(self.search)
        row.addWidget(self.query, 1)
        self.search_button = QPushButton("Search")
        self.search_button.setObjectName("hubSearchButton")
        self.search_button.clicked.connect(self.search)
        row.addWidget(self.search_button)
        lay.addLayout(row)
        self.note = QLabel(f"Ember asks {self.hub.host} only when you search, open a "
                           "repository or download; downloads go to your models folder.")
        self.note.setObjectName("hubNote")
        self.note.setProperty("field", True)
        self.note.setWordWrap(True)
        lay.addWidget(self.note)
        body = QHBoxLayout()
        self.repos = QListWidget()
        self.repos.setObjectName("hubRepos")
        self.repos.currentItemChanged.connect(self._open_repo)
        body.addWidget(self.repos, 2)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setObjectName("hubFiles")
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.setSelectionBehavior(QAbstractItemView.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.NoEditTriggers)
        self.table.verticalHeader().hide()
        self.table.setWordWrap(True)
        head = self.table.horizontalHeader()
        head.setSectionResizeMode(0, QHeaderView.Stretch)
        for c in range(1, len(COLUMNS)):
            head.setSectionResizeMode(c, QHeaderView.ResizeToContents)
        self.table.itemSelectionChanged.connect(self._update_buttons)
        body.addWidget(self.table, 5)
        lay.addLayout(body, 1)
        self.status = QLabel("")
        self.status.setObjectName("hubStatus")
        self.status.setWordWrap(True)
        lay.addWidget(self.status)
        bottom = QHBoxLayout()
        self.progress = QProgressBar()
        self.progress.setObjectName("hubProgress")
        self.progress.setRange(0, 1000)
        self.progress.setTextVisible(False)
        self.progress.hide()
        bottom.addWidget(self.progress, 1)
        self.download_button = QPushButton("Download")
        self.download_button.setObjectName("hubDownloadButton")
        self.download_button.clicked.connect(self.start_download)
        bottom.addWidget(self.download_button)
        self.cancel_button = QPushButton("Cancel download")
        self.cancel_button.setObjectName("hubCancelButton")
        self.cancel_button.clicked.connect(self.cancel_download)
        self.cancel_button.hide()
        bottom.addWidget(self.cancel_button)
        self.open_button = QPushButton("Open")
        self.open_button.setObjectName("hubOpenButton")
        self.open_button.clicked.connect(self._open_selected)
        bottom.addWidget(self.open_button)
        close = QPushButton("Close")
        close.setObjectName("hubCloseButton")
        close.clicked.connect(self.reject)
        bottom.addWidget(close)
        lay.addLayout(bottom)
        self._update_buttons()

    # ---- requests off the UI thread ----------------------------------------------------------
    def _call(self, fn, *args, done, failed=None) -> HubCall:
        call = HubCall(fn, *args, parent=self)
        call.done.connect(done)
        call.failed.connect(failed or self._failed)
        call.finished.connect(lambda: self.calls.remove(call) if call in self.calls else None)
        self.calls.append(call)
        call.start()
        return call

    def _failed(self, message: str) -> None:
        self.status.setText(message)
        self.search_button.setEnabled(True)

    def busy(self) -> bool:
        return bool(self.calls) or (self.estimates is not None and self.estimates.isRunning()) \
            or self.download is not None

    # ---- search and a repository ---------------------------------------------------------
    def search(self) -> None:
        q = self.query.text().strip()
        if not q:
            return
        self.status.setText(f"Searching {self.hub.host}…")
        self.search_button.setEnabled(False)
        self._call(self.hub.search, q, done=self._show_hits)

    def _show_hits(self, hits: list) -> None:
        self.search_button.setEnabled(True)
        self.repos.blockSignals(True)
        self.repos.clear()
        for h in hits:
            item = QListWidgetItem(f"{h.repo_id}\n{h.downloads:,} downloads")
            item.setData(Qt.UserRole, h.repo_id)
            item.setToolTip(h.repo_id)
            self.repos.addItem(item)
        self.repos.blockSignals(False)
        self._fill_files([])
        n = len(hits)
        self.status.setText(f"{n} repositor{'y' if n == 1 else 'ies'} with GGUF files"
                            if n else "No GGUF models match that search.")

    def _open_repo(self, item, _previous=None) -> None:
        if item is None:
            return
        repo = item.data(Qt.UserRole)
        self.status.setText(f"Listing the files of {repo}…")
        self._fill_files([])
        self._repo_call = self._call(self.hub.files, repo,
                                     done=lambda files, repo=repo: self._show_files(repo, files))

    def _show_files(self, repo: str, files: list) -> None:
        current = self.repos.currentItem()
        if current is None or current.data(Qt.UserRole) != repo:
            return  # another repository was opened meanwhile
        self._fill_files(files)
        n = len(files)
        self.status.setText(f"{n} GGUF file{'s' if n != 1 else ''} in {repo}" if n
                            else f"{repo} has no GGUF files.")
        if files:
            self.table.selectRow(0)
            self.estimates = HeaderEstimates(self.hub, files, self.n_ctx, self.free_memory(),
                                             self)
            self.estimates.estimated.connect(self._show_estimate)
            self.estimates.start()

    def _fill_files(self, files: list) -> None:
        if self.estimates is not None:
            self.estimates.stop.set()
        self.files = list(files)
        self.table.setRowCount(len(files))
        for r, f in enumerate(files):
            split = f.split_part
            cells = (f.name, f.quant or "—", human_bytes(f.size) if f.size else "—",
                     f"part {split[0]} of {split[1]}: split files are not supported yet"
                     if split else "reading the header…")
            for c, text in enumerate(cells):
                item = QTableWidgetItem(text)
                item.setToolTip(text)
                self.table.setItem(r, c, item)
        self._update_buttons()

    def _show_estimate(self, row: int, text: str, fits: bool, detail: str) -> None:
        if row >= len(self.files) or self.sender() is not self.estimates:
            return
        item = self.table.item(row, 3)
        item.setText(text)
        item.setToolTip(detail)
        if not fits:
            item.setForeground(QColor("#c0392b"))

    # ---- download ----------------------------------------------------------------------------
    def selected(self) -> hubmod.HubFile | None:
        rows = self.table.selectionModel().selectedRows()
        return self.files[rows[0].row()] if rows and rows[0].row() < len(self.files) else None

    def _update_buttons(self) -> None:
        f = self.selected()
        here = f is not None and (self.folder / f.name).exists()
        running = self.download is not None
        self.download_button.setVisible(not running)
        self.download_button.setEnabled(f is not None and not here and f.split_part is None)
        self.download_button.setText("In your models folder" if here else
                                     ("Resume download" if f is not None and (
                                         self.folder / (f.name + ".part")).exists()
                                      else "Download"))
        self.cancel_button.setVisible(running)
        self.open_button.setEnabled(here and not running)

    def start_download(self) -> None:
        f = self.selected()
        if f is None or self.download is not None:
            return
        self.download = d = HubDownload(self.hub, f, self.folder, self)
        d.progress.connect(self._on_progress)
        d.finished_ok.connect(self._on_downloaded)
        d.failed.connect(self._on_download_failed)
        d.cancelled.connect(self._on_cancelled)
        d.finished.connect(d.deleteLater)
        self.progress.setValue(0)
        self.progress.show()
        self.cancel_button.setEnabled(True)
        self.status.setText(f"Downloading {f.name}…")
        self._update_buttons()
        d.start()

    def cancel_download(self) -> None:
        if self.download is not None:
            self.download.cancel()
            self.cancel_button.setEnabled(False)
            self.status.setText("Cancelling…")

    def _on_progress(self, phase: str, done: int, total: int) -> None:
        self.progress.setValue(int(1000 * done / total) if total else 0)
        if phase == "check":
            self.status.setText(f"Checking the part downloaded before… {human_bytes(done)}")
        else:
            self.status.setText(f"Downloading… {human_bytes(done)} of {human_bytes(total)}")

    def _end_download(self, message: str) -> None:
        d, self.download = self.download, None
        if d is not None:
            d.wait()
        self.progress.hide()
        self.status.setText(message)
        self._update_buttons()

    def _on_downloaded(self, path: str) -> None:
        self._end_download(f"Saved {Path(path).name} in {self.folder}: open it from here or "
                           "from the Models page.")
        self.downloaded.emit(path)

    def _on_download_failed(self, message: str) -> None:
        self._end_download(message)

    def _on_cancelled(self, kept: int) -> None:
        self._end_download(f"Download cancelled; {human_bytes(kept)} kept, and Resume "
                           "download goes on from there." if kept else "Download cancelled.")

    def _open_selected(self) -> None:
        f = self.selected()
        if f is not None and (self.folder / f.name).exists():
            self.open_model.emit(str(self.folder / f.name))
            self.accept()

    # ---- closing ---------------------------------------------------------------------------
    def done(self, result: int) -> None:
        """Closing stops the download (its part stays for the next time) and the header
        reads, and waits for the threads."""
        if self.download is not None:
            self.download.cancel()
            self.download.wait()
            self.download = None
        if self.estimates is not None:
            self.estimates.stop.set()
            self.estimates.wait()
        for call in list(self.calls):
            call.wait()
        super().done(result)
