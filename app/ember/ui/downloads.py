"""The in-app starter download: a worker thread around ember.starter.install and the
panel that offers it (a button, then a progress bar with Cancel)."""
from __future__ import annotations

import threading
from pathlib import Path

from PySide6.QtCore import Qt, QThread, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QProgressBar, QPushButton, QVBoxLayout

from .. import starter


class StarterDownload(QThread):
    progress = Signal(str, int, int)  # phase ("download" | "unpack"), done, total bytes
    installed = Signal(str)  # the model's path
    failed = Signal(str)
    cancelled = Signal()

    def __init__(self, dest_dir: Path, parent=None, *, source: starter.Source = starter.STARTER,
                 index: str | None = None):
        super().__init__(parent)
        self.dest_dir = Path(dest_dir)
        self.source = source
        self.index = index
        self.cancel_event = threading.Event()

    def cancel(self) -> None:
        self.cancel_event.set()

    def _progress(self, phase: str, done: int, total: int) -> bool:
        # every chunk (a quarter megabyte): a few hundred signals in all, and the last
        # count before a stalled connection is on screen, not held back by a throttle
        self.progress.emit(phase, done, total)
        return not self.cancel_event.is_set()

    def run(self) -> None:
        try:
            path = starter.install(self.source, self.dest_dir, index=self.index,
                                   progress=self._progress)
        except starter.Cancelled:
            self.cancelled.emit()
        except OSError as e:  # DownloadError, and a full disk or a read-only folder
            self.failed.emit(str(e))
        except Exception as e:  # a bug: say so, keep the app alive
            self.failed.emit(f"{type(e).__name__}: {e}")
        else:
            self.installed.emit(str(path))


def _mb(n: int) -> str:
    return f"{n / 2**20:.0f} MB"


class StarterPanel(QFrame):
    """Offers the starter model: "Download" until it is there, then progress and Cancel."""

    download = Signal()
    cancel = Signal()

    def __init__(self, name: str, parent=None, centered: bool = False):
        super().__init__(parent)
        self.setObjectName(name)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(6)
        self.text = QLabel("No model yet? Download a small one to start with: SmolLM2 135M "
                           f"Instruct, about {_mb(starter.DOWNLOAD_SIZE)} from {starter.index_name()}.")
        self.text.setObjectName("starterHint")
        self.text.setProperty("field", True)
        self.text.setWordWrap(True)
        lay.addWidget(self.text)
        row = QHBoxLayout()
        row.setSpacing(8)
        if centered:
            self.text.setAlignment(Qt.AlignCenter)
            row.addStretch(1)
        self.button = QPushButton("Download the starter model")
        self.button.setObjectName("starterDownloadButton")
        self.button.setToolTip("Downloads SmolLM2-135M-Instruct (Q4_1) into your models folder")
        self.button.clicked.connect(self.download)
        row.addWidget(self.button)
        self.bar = QProgressBar()
        self.bar.setObjectName("starterProgress")
        self.bar.setRange(0, 1000)
        self.bar.setTextVisible(False)
        row.addWidget(self.bar, 10)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setObjectName("starterCancelButton")
        self.cancel_button.setToolTip("Stop the download (nothing is kept)")
        self.cancel_button.clicked.connect(self.cancel)
        row.addWidget(self.cancel_button)
        if centered:
            row.addStretch(1)
        lay.addLayout(row)
        self.status = QLabel("")
        self.status.setObjectName("starterStatus")
        self.status.setProperty("field", True)
        self.status.setWordWrap(True)
        if centered:
            self.status.setAlignment(Qt.AlignCenter)
        lay.addWidget(self.status)
        self.set_running(False)

    def set_running(self, on: bool) -> None:
        self.button.setVisible(not on)
        self.bar.setVisible(on)
        self.cancel_button.setVisible(on)
        self.cancel_button.setEnabled(on)
        if on:
            self.bar.setValue(0)
            self.status.setText("Finding the starter model…")
            self.status.show()

    def set_progress(self, phase: str, done: int, total: int) -> None:
        # the download is most of the wait; unpacking and checking is the last tenth
        f = done / total if total else 0.0
        self.bar.setValue(int(1000 * (0.9 * f if phase == "download" else 0.9 + 0.1 * f)))
        self.status.setText(f"Downloading… {_mb(done)} of {_mb(total)}" if phase == "download"
                            else "Checking and unpacking…")

    def set_message(self, text: str) -> None:
        self.status.setText(text)
        self.status.setVisible(bool(text))

    def cancelling(self) -> None:
        self.cancel_button.setEnabled(False)
        self.status.setText("Cancelling…")
