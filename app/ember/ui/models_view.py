"""The Models page: every .gguf in the models folder and every model opened from elsewhere
before, each with its card (read from the file's header, so nothing is loaded), Open and
Delete; kept current by a watch on the folder; the starter download while there is none."""
from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QFileSystemWatcher, Qt, QTimer, QUrl, Signal
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
from ..model_library import library
from ..model_card import describe_model, explain_load_failure
from .downloads import StarterPanel
from .format import human_bytes, human_count
from .widgets import ElidedLabel
from .widgets.model_card import params_value


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
    """One model's card: name, file, the header's facts, Open, and Delete (a file in the
    models folder) or Remove from list (one opened from elsewhere)."""

    open_model = Signal(str)
    delete_model = Signal(str)  # path: the file, after the window asks
    forget_model = Signal(str)  # path: off the recent list, the file stays

    def __init__(self, card: dict, loaded: bool, parent=None, *, in_folder: bool = True):
        super().__init__(parent)
        self.card = card
        self.in_folder = in_folder
        if in_folder:
            self.delete_button = QPushButton("Delete model…")
            self.delete_button.setObjectName("modelRowDelete")
            self.delete_button.setAccessibleName(f"Delete {card['file_name']}")
            self.delete_button.clicked.connect(lambda: self.delete_model.emit(card["path"]))
        else:
            self.delete_button = QPushButton("Remove from list")
            self.delete_button.setObjectName("modelRowForget")
            self.delete_button.setToolTip("Ember forgets it; the file stays where it is")
            self.delete_button.clicked.connect(lambda: self.forget_model.emit(card["path"]))
        self.delete_button.setEnabled(not loaded)
        if loaded:
            self.delete_button.setToolTip("This is the model in use: open another one first")
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
        if card.get("n_expert"):
            moe = QLabel("MoE")
            moe.setObjectName("modelRowMoE")
            moe.setToolTip(f"A mixture of experts: each token runs {card['n_expert_used']} of "
                           f"its {card['n_expert']} experts per layer, so it runs about as fast "
                           f"as a {human_count(card['n_params_active'])} model and needs that "
                           f"much memory per token, not the whole file's")
            top.addWidget(moe, 0, Qt.AlignTop)
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
            lay.addWidget(self.delete_button, 0, Qt.AlignLeft)
            return
        # one fact a line: the page stays as narrow as a small window at a large font
        grid = QGridLayout()
        grid.setHorizontalSpacing(18)
        grid.setVerticalSpacing(4)
        facts = [("Architecture", card["arch"]), ("Parameters", params_value(card)),
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
        actions = QHBoxLayout()
        actions.addWidget(self.quantize_button)
        actions.addWidget(self.delete_button)
        actions.addStretch(1)
        lay.addLayout(actions)

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
    delete_model = Signal(str)
    forget_model = Signal(str)
    folder_changed = Signal()  # a file came, went or changed in the models folder
    open_endpoint = Signal(dict)
    remove_endpoint = Signal(dict)
    add_endpoint = Signal()
    find_on_hub = Signal()
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
        self.hub_button = QPushButton("Find on Hugging Face…")
        self.hub_button.setObjectName("modelsHubButton")
        self.hub_button.setToolTip("Search Hugging Face's GGUF models and download one into "
                                   "this folder")
        self.hub_button.clicked.connect(self.find_on_hub)
        head.addWidget(self.hub_button)
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
        self.folder_box = QVBoxLayout()
        self.folder_box.setSpacing(10)
        self.list_layout.addLayout(self.folder_box)
        self.empty = QLabel("")
        self.empty.setObjectName("modelsEmpty")
        self.empty.setProperty("field", True)
        self.empty.setWordWrap(True)
        self.list_layout.addWidget(self.empty)
        self.recent_label = QLabel("OPENED FROM OTHER FOLDERS")
        self.recent_label.setObjectName("cardSection")
        self.list_layout.addWidget(self.recent_label)
        self.recent_box = QVBoxLayout()
        self.recent_box.setSpacing(10)
        self.list_layout.addLayout(self.recent_box)
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
        # files copied in, deleted or still being written: the page refills itself, once
        # the burst of changes is over (a copy writes many times)
        self.watcher = QFileSystemWatcher(self)
        self.watcher.directoryChanged.connect(self._folder_touched)
        self.watcher.fileChanged.connect(self._folder_touched)
        self._settle = QTimer(self)
        self._settle.setSingleShot(True)
        self._settle.setInterval(250)
        self._settle.timeout.connect(self.folder_changed)

    def _folder_touched(self, _path: str) -> None:
        self._settle.start()

    def _watch(self, paths: list[str]) -> None:
        old = self.watcher.directories() + self.watcher.files()
        if old:
            self.watcher.removePaths(old)
        paths = [p for p in paths if Path(p).exists()]
        if paths:
            self.watcher.addPaths(paths)

    def fill(self, folder: Path, loaded_path: str | None, starter_installed: bool,
             endpoints: list[dict] = (), recent: list[str] = ()) -> None:
        """Reads every model's header afresh: files come and go behind the app's back.
        recent: models opened before, newest first (those outside the folder are listed
        after the folder's own)."""
        self.folder = Path(folder)
        try:
            self.folder.mkdir(parents=True, exist_ok=True)  # where the user is told to put models
        except OSError:
            pass
        self.folder_label.setText(str(self.folder))
        self.folder_label.setToolTip(str(self.folder))
        for r in self.rows:
            r.setParent(None)
            r.deleteLater()
        self.rows = []
        local = loaded_path if loaded_path and "#" not in loaded_path else None
        entries = library(self.folder, recent)
        for e in entries:
            loaded = local is not None and Path(local).resolve() == e.path.resolve()
            row = ModelRow(read_card(e.path), loaded=loaded, in_folder=e.in_folder)
            row.open_model.connect(self.open_model)
            row.delete_model.connect(self.delete_model)
            row.forget_model.connect(self.forget_model)
            (self.folder_box if e.in_folder else self.recent_box).addWidget(row)
            self.rows.append(row)
        self.recent_label.setVisible(any(not e.in_folder for e in entries))
        self.empty.setText(f"No models here yet. Put .gguf files in {self.folder}, drop one on "
                           "the window, or download the starter model.")
        self.empty.setVisible(not entries)
        # "No model yet? Download…" only to someone without a model (or while it downloads)
        self.starter_panel.setVisible(self.starter_panel.bar.isVisibleTo(self.starter_panel)
                                      or (not entries and not starter_installed))
        self._watch([str(self.folder)] + [str(e.path) for e in entries if e.in_folder])
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
