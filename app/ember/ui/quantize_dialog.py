""""Save a quantized copy…" from a model's card: the types with the file size each gives
(marked where the copy would be larger than its source), the choice to requantize an
already quantized file, then `ember quantize`'s work on a background thread with progress
and Cancel."""
from __future__ import annotations

import threading
from pathlib import Path

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QDialog,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
)

from ..commands import quantize
from . import theme
from .format import human_bytes

# what each choice is for, in a few words (llama-quantize's own table gives the trade-offs)
CHOICES = [
    ("Q4_K_M", "balanced: the usual choice"), ("Q5_K_M", "closer to the original, larger"),
    ("Q6_K", "nearly lossless"), ("Q8_0", "practically lossless, twice Q4's size"),
    ("Q4_K_S", "a little smaller than Q4_K_M"), ("Q5_K_S", ""), ("Q3_K_L", ""),
    ("Q3_K_M", "small, noticeably lossy"), ("Q3_K_S", ""), ("Q2_K", "smallest, lossy"),
    ("Q4_0", "legacy 4-bit"), ("Q4_1", "legacy 4-bit"), ("Q5_0", "legacy 5-bit"),
    ("Q5_1", "legacy 5-bit"), ("F16", "16-bit floats"), ("BF16", "16-bit brain floats"),
]


class _Relay(QObject):
    """Carries the worker thread's news to the dialog (queued onto the GUI thread)."""
    progress = Signal(int, int, str)
    finished = Signal(str)   # "" on success, else the reason


class QuantizeDialog(QDialog):
    def __init__(self, path: str, parent=None):
        super().__init__(parent)
        self.setObjectName("quantizeDialog")
        self.src = Path(path)
        self.setWindowTitle(f"Save a quantized copy of {self.src.name}")
        self.cancel_event = threading.Event()
        self.worker: threading.Thread | None = None
        self.out_path: Path | None = None
        lay = QVBoxLayout(self)
        lay.addWidget(QLabel("Type (the size each copy would have):"))
        # short rows, the words below them: a description in a row would need a horizontal
        # scrollbar in a dialog of ordinary width
        self.types = QListWidget()
        self.types.setObjectName("quantizeTypes")
        self.types.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        self.types.setTextElideMode(Qt.ElideRight)
        self.types.setSelectionMode(QAbstractItemView.SingleSelection)
        try:
            self.choices = quantize.estimate_choices(self.src, [c for c, _ in CHOICES])
        except (OSError, ValueError) as e:
            self.choices = {}
            lay.addWidget(QLabel(f"Cannot read this file: {e}"))
        self.sizes = {n: c.size for n, c in self.choices.items()}
        self.src_size = self.src.stat().st_size if self.choices else 0
        self.notes = dict(CHOICES)
        for name, _ in CHOICES:
            if name not in self.choices:
                continue
            item = QListWidgetItem(f"{name}  —  {human_bytes(self.sizes[name])}"
                                   + self._mark(name))
            item.setData(Qt.UserRole, name)
            self.types.addItem(item)
        lay.addWidget(self.types, 1)
        self.description = QLabel("")
        self.description.setObjectName("quantizeDescription")
        self.description.setWordWrap(True)
        lay.addWidget(self.description)
        quantized = sorted({t for c in self.choices.values() for t in c.requantizes})
        self.allow_requantize = QCheckBox("Allow requantizing (lower quality)")
        self.allow_requantize.setObjectName("quantizeAllowRequantize")
        self.allow_requantize.setChecked(False)
        self.requantize_note = QLabel(
            f"This file is already quantized ({', '.join(quantized)}). A copy made from it "
            "converts those weights a second time, which loses more quality than quantizing "
            "the original weights once. For the best copy, start from the model's F16 or "
            "BF16 file; tick the box to make this one anyway.")
        self.requantize_note.setObjectName("quantizeRequantizeNote")
        self.requantize_note.setWordWrap(True)
        self.requantize_note.setProperty("field", True)
        for w in (self.allow_requantize, self.requantize_note):
            w.setVisible(bool(quantized))
            lay.addWidget(w)
        self.types.currentRowChanged.connect(self._describe)
        self.types.setCurrentRow(self._first_smaller_row())
        self.progress = QProgressBar()
        self.progress.setObjectName("quantizeProgress")
        self.progress.setRange(0, 1000)
        self.progress.setVisible(False)
        lay.addWidget(self.progress)
        self.status = QLabel("")
        self.status.setObjectName("quantizeStatus")
        self.status.setWordWrap(True)
        lay.addWidget(self.status)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        self.save_button = QPushButton("Save as…")
        self.save_button.setObjectName("quantizeSave")
        self.save_button.setEnabled(bool(self.sizes))
        self.save_button.setDefault(True)  # drawn as the window's primary button
        self.save_button.clicked.connect(self._choose_and_start)
        self.cancel_button = QPushButton("Close")
        self.cancel_button.setObjectName("quantizeCancel")
        self.cancel_button.clicked.connect(self._cancel_or_close)
        buttons.addWidget(self.save_button)
        buttons.addWidget(self.cancel_button)
        lay.addLayout(buttons)
        self.relay = _Relay()
        self.relay.progress.connect(self._on_progress)
        self.relay.finished.connect(self._on_finished)

    def _larger(self, name: str) -> bool:
        return self.sizes[name] > self.src_size

    def _mark(self, name: str) -> str:
        if self.sizes[name] == self.src_size and not self.choices[name].requantizes:
            return "  (this file's own type)"
        return "  (larger than this file)" if self._larger(name) else ""

    def _first_smaller_row(self) -> int:
        for row in range(self.types.count()):
            if not self._larger(self.types.item(row).data(Qt.UserRole)):
                return row
        return 0

    def _describe(self, row: int) -> None:
        item = self.types.item(row)
        if item is None:
            self.description.setText("")
            return
        name = item.data(Qt.UserRole)
        words = [self.notes.get(name, "")]
        again = self.choices[name].requantizes
        if self._larger(name):
            why = (f"its weights are already {', '.join(again)}, and a copy cannot bring back "
                   "what quantizing took away" if again else
                   "a copy holds no more than its source does")
            words.append(f"Larger than this file ({human_bytes(self.src_size)}) and no more "
                         f"precise: {why}.")
        elif self.sizes[name] == self.src_size and not again:
            words.append("This file's own type: the copy would hold the same weights.")
        else:
            words.append(f"{human_bytes(self.src_size - self.sizes[name])} smaller than this "
                         "file.")
        text = ". ".join(w[0].upper() + w[1:] for w in words if w)
        self.description.setText(text if text.endswith(".") or not text else text + ".")

    def chosen_type(self) -> str:
        item = self.types.currentItem()
        return item.data(Qt.UserRole) if item else "Q4_K_M"

    def _choose_and_start(self) -> None:
        name = self.chosen_type()
        stem = self.src.stem.rsplit(".", 1)[0] if "." in self.src.stem else self.src.stem
        suggested = str(self.src.with_name(f"{stem}.{name}.gguf"))
        dst, _ = QFileDialog.getSaveFileName(self, "Save the quantized copy", suggested,
                                             "GGUF models (*.gguf)",
                                             options=theme.FILE_DIALOG_OPTIONS)
        if dst:
            self.start(dst, name)

    def start(self, dst: str, type_name: str, threads: int | None = None) -> None:
        """Quantizes on a background thread; the dialog stays responsive."""
        if Path(dst).resolve() == self.src.resolve():
            self.status.setText("Choose another file: the copy cannot replace its source.")
            return
        again = self.choices[type_name].requantizes if type_name in self.choices else ()
        if again and not self.allow_requantize.isChecked():
            self.status.setText(self._requantize_refusal(type_name, again))
            return
        self.out_path = Path(dst)
        self.cancel_event.clear()
        self.save_button.setEnabled(False)
        self.types.setEnabled(False)
        self.allow_requantize.setEnabled(False)
        self.cancel_button.setText("Cancel")
        self.progress.setValue(0)
        self.progress.setVisible(True)
        self.status.setText(f"Writing {self.out_path.name} ({type_name})…")
        allow = self.allow_requantize.isChecked()

        def work() -> None:
            try:
                quantize.quantize_file(
                    self.src, self.out_path, type_name, threads=threads, cancel=self.cancel_event,
                    allow_requantize=allow,
                    progress=lambda done, total, tp: self.relay.progress.emit(
                        done >> 10, max(1, total >> 10), tp.info.name))
                self.relay.finished.emit("")
            except quantize.CancelledError:
                self.relay.finished.emit("Cancelled; nothing was written.")
            except quantize.RequantizeError as e:
                self.relay.finished.emit(self._requantize_refusal(type_name, (e.type_name,)))
            except Exception as e:  # noqa: BLE001 - shown to the user, never lost
                self.relay.finished.emit(f"Could not write the copy: {e}")
        self.worker = threading.Thread(target=work, name="ember-quantize", daemon=True)
        self.worker.start()

    @staticmethod
    def _requantize_refusal(type_name: str, again: tuple[str, ...]) -> str:
        return (f"Nothing was written: this file is already {', '.join(again)}, so a "
                f"{type_name} copy would quantize its weights a second time and lose quality. "
                "Tick \u201cAllow requantizing\u201d to make it anyway.")

    def running(self) -> bool:
        return self.worker is not None and self.worker.is_alive()

    def _on_progress(self, done: int, total: int, name: str) -> None:
        self.progress.setValue(int(1000 * done / total))
        self.status.setText(f"Writing {self.out_path.name}: {name}")

    def _on_finished(self, error: str) -> None:
        self.save_button.setEnabled(True)
        self.types.setEnabled(True)
        self.allow_requantize.setEnabled(True)
        self.cancel_button.setText("Close")
        if error:
            self.progress.setVisible(False)
            self.status.setText(error)
        else:
            self.progress.setValue(1000)
            self.status.setText(f"Saved {self.out_path} "
                                f"({human_bytes(self.out_path.stat().st_size)}).")

    def _cancel_or_close(self) -> None:
        if self.running():
            self.cancel_event.set()
        else:
            self.accept()

    def closeEvent(self, event) -> None:
        if self.running():
            self.cancel_event.set()
            self.worker.join()
        super().closeEvent(event)
