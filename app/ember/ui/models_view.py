"""The Models page: every .gguf in the models folder with its card (read from the file's
header, so nothing is loaded), a button to open each, and the starter download."""
from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, QUrl, Signal
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import (
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from ..engine import EmberError, Model
from ..model_card import describe_model, explain_load_failure
from .downloads import StarterPanel
from .format import human_bytes, human_count
from .widgets import ElidedLabel


def read_card(path: Path) -> dict:
    """The card of a model file, or {"path", "name", "error"} when its header is bad."""
    try:
        head = Model(str(path), metadata_only=True)
    except EmberError as e:
        failure = explain_load_failure(e, path)
        return {"path": str(path), "file_name": path.name, "error":
                f"{failure.title}. {failure.advice}".strip(), "error_details": failure.details}
    except OSError as e:
        return {"path": str(path), "file_name": path.name, "error": str(e)}
    try:
        return describe_model(head, path)
    finally:
        head.close()


class ModelRow(QFrame):
    """One model's card: name, file, the header's facts, and Open."""

    open_model = Signal(str)

    def __init__(self, card: dict, loaded: bool, parent=None):
        super().__init__(parent)
        self.card = card
        self.setObjectName("modelRow")
        self.setProperty("loaded", loaded)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(16, 12, 16, 12)
        lay.setSpacing(6)
        top = QHBoxLayout()
        name = QLabel(card.get("name") or card["file_name"])
        name.setObjectName("modelRowName")
        name.setWordWrap(True)
        top.addWidget(name, 1)
        self.open_button = QPushButton("Loaded" if loaded else "Open")
        self.open_button.setObjectName("modelRowOpen")
        self.open_button.setEnabled(not loaded and "error" not in card)
        self.open_button.setAccessibleName(f"Open {card['file_name']}")
        self.open_button.clicked.connect(lambda: self.open_model.emit(card["path"]))
        top.addWidget(self.open_button, 0, Qt.AlignTop)
        lay.addLayout(top)
        file = ElidedLabel(card["file_name"])  # a long name without spaces cannot wrap
        file.setObjectName("modelRowFile")
        file.setProperty("field", True)
        file.setToolTip(card["path"])
        lay.addWidget(file)
        if "error" in card:
            err = QLabel(card["error"])
            err.setObjectName("modelRowError")
            err.setWordWrap(True)
            err.setToolTip(card.get("error_details", ""))  # the engine's words
            lay.addWidget(err)
            return
        # one fact a line: the page stays as narrow as a small window at a large font
        grid = QGridLayout()
        grid.setHorizontalSpacing(18)
        grid.setVerticalSpacing(4)
        facts = [("Architecture", card["arch"]), ("Parameters", human_count(card["n_params"])),
                 ("Quantization", card["ftype"]), ("File size", human_bytes(card["file_size"])),
                 ("Trained context", f"{card['n_ctx_train']:,} tokens"),
                 ("Prompt format", "chat template" if card["has_template"] else
                  f"{card.get('builtin_format_label') or 'ChatML'} (built-in)"
                  if card.get("builtin_format") else "raw completion")]
        self.values: dict[str, str] = {}
        for i, (k, v) in enumerate(facts):
            kl = QLabel(k)
            kl.setProperty("field", True)
            vl = QLabel(v)
            vl.setObjectName("modelRowValue")
            vl.setWordWrap(True)
            grid.addWidget(kl, i, 0)
            grid.addWidget(vl, i, 1)
            self.values[k] = v
        grid.setColumnStretch(1, 1)
        lay.addLayout(grid)
        self.quantize_button = QPushButton("Save a quantized copy…")
        self.quantize_button.setObjectName("modelRowQuantize")
        self.quantize_button.setAccessibleName(f"Save a quantized copy of {card['file_name']}")
        self.quantize_button.clicked.connect(self.open_quantize_dialog)
        lay.addWidget(self.quantize_button, 0, Qt.AlignLeft)

    def open_quantize_dialog(self):
        from .quantize_dialog import QuantizeDialog  # numpy and the quantizer, when first used
        dialog = QuantizeDialog(self.card["path"], self)
        dialog.setAttribute(Qt.WA_DeleteOnClose)
        dialog.show()
        return dialog


class EndpointRow(QFrame):
    """An OpenAI-compatible endpoint's model added before: its id, address, Open and Remove."""

    open_endpoint = Signal(dict)
    remove_endpoint = Signal(dict)

    def __init__(self, entry: dict, loaded: bool, parent=None):
        super().__init__(parent)
        self.entry = entry
        self.setObjectName("modelRow")
        self.setProperty("loaded", loaded)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(16, 10, 16, 10)
        col = QVBoxLayout()
        name = QLabel(entry["model"] or "the endpoint's first model")
        name.setObjectName("modelRowName")
        name.setWordWrap(True)
        col.addWidget(name)
        url = ElidedLabel(entry["url"])
        url.setObjectName("modelRowFile")
        url.setProperty("field", True)
        col.addWidget(url)
        lay.addLayout(col, 1)
        self.open_button = QPushButton("Loaded" if loaded else "Open")
        self.open_button.setObjectName("endpointRowOpen")
        self.open_button.setEnabled(not loaded)
        self.open_button.clicked.connect(lambda: self.open_endpoint.emit(entry))
        lay.addWidget(self.open_button, 0, Qt.AlignTop)
        self.remove_button = QPushButton("Remove")
        self.remove_button.setObjectName("endpointRowRemove")
        self.remove_button.setToolTip("Forget this endpoint and its API key")
        self.remove_button.clicked.connect(lambda: self.remove_endpoint.emit(entry))
        lay.addWidget(self.remove_button, 0, Qt.AlignTop)


class ModelsView(QFrame):
    open_model = Signal(str)
    open_endpoint = Signal(dict)
    remove_endpoint = Signal(dict)
    add_endpoint = Signal()
    back = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("modelsView")
        self.folder: Path | None = None
        outer = QVBoxLayout(self)
        outer.setContentsMargins(24, 16, 24, 16)
        outer.setSpacing(10)
        title = QLabel("Models")
        title.setObjectName("modelsTitle")
        outer.addWidget(title)
        head = QHBoxLayout()
        self.folder_label = ElidedLabel("")  # a path has no spaces to wrap at
        self.folder_label.setObjectName("modelsFolder")
        self.folder_label.setProperty("field", True)
        head.addWidget(self.folder_label, 1)
        self.folder_button = QPushButton("Show folder")
        self.folder_button.setObjectName("modelsFolderButton")
        self.folder_button.clicked.connect(self._show_folder)
        head.addWidget(self.folder_button)
        self.back_button = QPushButton("Back to chat")
        self.back_button.setObjectName("modelsBackButton")
        self.back_button.clicked.connect(self.back)
        head.addWidget(self.back_button)
        outer.addLayout(head)
        self.starter_panel = StarterPanel("modelsStarterPanel")
        outer.addWidget(self.starter_panel)
        self.scroll = QScrollArea()
        self.scroll.setObjectName("modelsScroll")
        self.scroll.setWidgetResizable(True)
        self.scroll.setFrameShape(QFrame.NoFrame)
        self.scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        self.list_widget = QWidget()
        self.list_widget.setObjectName("modelsList")
        self.list_layout = QVBoxLayout(self.list_widget)
        self.list_layout.setContentsMargins(0, 0, 0, 0)
        self.list_layout.setSpacing(10)
        self.scroll.setWidget(self.list_widget)
        outer.addWidget(self.scroll, 1)
        self.empty = QLabel("")
        self.empty.setObjectName("modelsEmpty")
        self.empty.setProperty("field", True)
        self.empty.setWordWrap(True)
        self.list_layout.addWidget(self.empty)
        self.endpoints_label = QLabel("ENDPOINTS")
        self.endpoints_label.setObjectName("cardSection")
        self.list_layout.addWidget(self.endpoints_label)
        self.endpoints_box = QVBoxLayout()
        self.endpoints_box.setSpacing(10)
        self.list_layout.addLayout(self.endpoints_box)
        add_row = QHBoxLayout()
        self.add_endpoint_button = QPushButton("Add an OpenAI-compatible endpoint…")
        self.add_endpoint_button.setObjectName("addEndpointButton")
        self.add_endpoint_button.setToolTip("Chat with a model another server runs (ember serve, "
                                            "llama-server, vLLM…)")
        self.add_endpoint_button.clicked.connect(self.add_endpoint)
        add_row.addWidget(self.add_endpoint_button)
        add_row.addStretch(1)
        self.list_layout.addLayout(add_row)
        self.list_layout.addStretch(1)
        self.rows: list[ModelRow] = []
        self.endpoint_rows: list[EndpointRow] = []

    def fill(self, folder: Path, loaded_path: str | None, starter_installed: bool,
             endpoints: list[dict] = ()) -> None:
        """Reads every model's header afresh: files come and go behind the app's back."""
        self.folder = Path(folder)
        try:
            self.folder.mkdir(parents=True, exist_ok=True)  # where the user is told to put models
        except OSError:
            pass
        self.folder_label.setText(str(self.folder))
        self.folder_label.setToolTip(str(self.folder))
        for r in self.rows:
            r.deleteLater()
        self.rows = []
        files = sorted((p for p in self.folder.glob("*.gguf") if p.is_file()),
                       key=lambda p: p.name.lower())
        for i, p in enumerate(files):
            row = ModelRow(read_card(p), loaded=bool(loaded_path) and "#" not in loaded_path
                           and Path(loaded_path).resolve() == p.resolve())
            row.open_model.connect(self.open_model)
            self.list_layout.insertWidget(i, row)
            self.rows.append(row)
        self.empty.setText(f"No models here yet. Put .gguf files in {self.folder}, drop one on "
                           "the window, or download the starter model.")
        self.empty.setVisible(not files)
        self.starter_panel.setVisible(not starter_installed)
        for r in self.endpoint_rows:
            r.deleteLater()
        self.endpoint_rows = []
        for e in endpoints:
            key = f"{e['url'].rstrip('/')}#{e['model']}"
            row = EndpointRow(e, loaded=loaded_path == key)
            row.open_endpoint.connect(self.open_endpoint)
            row.remove_endpoint.connect(self.remove_endpoint)
            self.endpoints_box.addWidget(row)
            self.endpoint_rows.append(row)
        self.endpoints_label.setVisible(bool(endpoints))

    def _show_folder(self) -> None:
        if self.folder is not None:
            QDesktopServices.openUrl(QUrl.fromLocalFile(str(self.folder)))
