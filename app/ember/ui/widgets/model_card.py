"""The model card: the loaded model's facts, memory estimate and load progress."""
from __future__ import annotations

from PySide6.QtCore import QEvent, Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QFrame,
    QGridLayout,
    QLabel,
    QProgressBar,
    QScrollArea,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from ...model_card import estimate_memory, memory_fit, parameters_text
from ..format import human_bytes, human_count
from .basics import _button


def params_value(info: dict) -> str:
    """The card's Parameters value: "134.5M", or "30.5B, 3.3B active, 128 experts (8 used)"
    for a mixture of experts."""
    text = human_count(info["n_params"])
    if info.get("n_expert"):
        text += (f", {human_count(info['n_params_active'])} active, {info['n_expert']} experts "
                 f"({info['n_expert_used']} used)")
    return text


class ModelCard(QFrame):
    cancel_load = Signal()
    open_model = Signal()

    FIELDS = (("modelArch", "Architecture"), ("modelParams", "Parameters"),
              ("modelQuant", "Quantization"), ("modelFileSize", "File size"),
              ("modelTrainedContext", "Trained context"), ("modelHeads", "Attention heads"),
              ("modelContext", "Context"),
              ("modelRamEstimate", "Estimated RAM"), ("modelMemoryFit", "Free memory"),
              ("modelTemplate", "Prompt format"))

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("modelCard")
        self.setAccessibleName("Model")
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        # the fields scroll in a window too short for them at a large font, instead of
        # making the window taller than the screen
        self.scroll = QScrollArea()
        self.scroll.setObjectName("modelCardScroll")
        self.scroll.setWidgetResizable(True)
        self.scroll.setFrameShape(QFrame.NoFrame)
        self.scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        self.scroll.viewport().setAutoFillBackground(False)
        body = QWidget()
        body.setObjectName("modelCardBody")
        self.scroll.setWidget(body)
        outer.addWidget(self.scroll)
        lay = QVBoxLayout(body)
        self._body_layout = lay
        lay.setContentsMargins(18, 18, 18, 14)
        lay.setSpacing(10)
        sec = QLabel("MODEL")
        sec.setObjectName("cardSection")
        lay.addWidget(sec)
        self.name = QLabel("No model")
        self.name.setObjectName("modelName")
        self.name.setWordWrap(True)
        self.name.setTextInteractionFlags(Qt.TextSelectableByMouse)
        lay.addWidget(self.name)
        self.file = QLabel("")
        self.file.setObjectName("modelFile")
        self.file.setProperty("field", True)
        self.file.setWordWrap(True)
        lay.addWidget(self.file)
        grid = QGridLayout()
        grid.setHorizontalSpacing(12)
        grid.setVerticalSpacing(7)
        self.values: dict[str, QLabel] = {}
        self.keys: dict[str, QLabel] = {}
        for row, (name, label) in enumerate(self.FIELDS):
            k = QLabel(label)
            k.setProperty("field", True)
            k.setSizePolicy(QSizePolicy.Minimum, QSizePolicy.Preferred)
            v = QLabel("—")
            v.setObjectName(name)
            v.setTextInteractionFlags(Qt.TextSelectableByMouse)
            v.setAlignment(Qt.AlignRight | Qt.AlignVCenter)
            v.setWordWrap(True)  # a value too long for the widest card wraps, never clips
            grid.addWidget(k, row, 0)
            grid.addWidget(v, row, 1)
            grid.setColumnStretch(1, 1)
            self.values[name] = v
            self.keys[name] = k
        lay.addLayout(grid)
        self.load_box = QWidget()
        lb = QVBoxLayout(self.load_box)
        lb.setContentsMargins(0, 6, 0, 0)
        self.load_status = QLabel("Loading…")
        self.load_status.setObjectName("loadStatus")
        lb.addWidget(self.load_status)
        self.progress = QProgressBar()
        self.progress.setObjectName("loadProgress")
        self.progress.setRange(0, 1000)
        self.progress.setTextVisible(False)
        lb.addWidget(self.progress)
        self.cancel_button = _button("Cancel", "loadCancelButton", tip="Stop loading this model")
        self.cancel_button.clicked.connect(self.cancel_load)
        lb.addWidget(self.cancel_button, 0, Qt.AlignRight)
        self.load_box.hide()
        lay.addWidget(self.load_box)
        lay.addStretch(1)
        self.notice = QLabel("")
        self.notice.setObjectName("modelNotice")
        self.notice.setWordWrap(True)
        self.notice.setProperty("field", True)
        self.notice.hide()
        lay.addWidget(self.notice)
        self.change_button = _button("Open another model…", "changeModelButton",
                                     tip="Open a .gguf file (Ctrl+O)")
        self.change_button.clicked.connect(self.open_model)
        lay.addWidget(self.change_button)
        self.info: dict | None = None
        self._fit_width()

    MIN_WIDTH, MAX_WIDTH = 270, 400

    def _fit_width(self) -> None:
        """As wide as the longest field name and value need at the current font size
        (between MIN_WIDTH and MAX_WIDTH; a longer value wraps)."""
        grid_w = (max(k.sizeHint().width() for k in self.keys.values()) + 12
                  + max(v.fontMetrics().horizontalAdvance(v.text()) + 4
                        for v in self.values.values()))
        m = self._body_layout.contentsMargins()
        need = max(grid_w, self.change_button.sizeHint().width()) + m.left() + m.right()
        self.setFixedWidth(max(self.MIN_WIDTH, min(self.MAX_WIDTH, need)))

    def changeEvent(self, e) -> None:
        super().changeEvent(e)
        if e.type() in (QEvent.FontChange, QEvent.StyleChange):
            QTimer.singleShot(0, self, self._fit_width)  # after the labels have the new font

    def show_info(self, info: dict, n_ctx: int, prompt_format: str = "") -> None:
        self.info = info
        self.name.setText(info["name"])
        general = info.get("general_name")
        self.name.setToolTip(f"Name in the file: {general}" if general and general != info["name"]
                             else "")
        self.file.setText(info["file_name"])
        self.file.setToolTip(info["path"])
        size = info.get("size_label")
        v = self.values
        v["modelArch"].setText(info["arch"])
        v["modelParams"].setText(params_value(info))
        exact = f"{info['n_params']:,} parameters" + (f" ({size})" if size else "")
        if info.get("n_expert"):
            exact = (f"{parameters_text(info)}\n{exact}, {info['n_params_active']:,} of them "
                     f"run for each token (the layers shared by all tokens and "
                     f"{info['n_expert_used']} of the {info['n_expert']} experts of each layer)")
        v["modelParams"].setToolTip(exact)
        v["modelQuant"].setText(info["ftype"])
        v["modelFileSize"].setText(human_bytes(info["file_size"]))
        v["modelTrainedContext"].setText(f"{info['n_ctx_train']:,} tokens")
        v["modelHeads"].setText(info.get("heads_text") or "—")
        v["modelHeads"].setToolTip(f"{info['n_layer']} layers; query heads, and key/value "
                                   f"heads where they differ (per layer where the file says)")
        self.set_context(n_ctx)
        v["modelTemplate"].setText(prompt_format or ("chat template" if info["has_template"]
                                                     else "raw completion"))
        self._fit_width()

    def show_remote(self, info: dict) -> None:
        """An endpoint's model: what the app knows of it is its id and address."""
        self.info = info
        self.name.setText(info["name"])
        self.name.setToolTip("")
        self.file.setText(info["url"])
        self.file.setToolTip(info["url"])
        for v in self.values.values():
            v.setText("—")
            v.setToolTip("")
        self.values["modelArch"].setText("OpenAI-compatible endpoint")
        self.values["modelContext"].setText("set by the endpoint")
        self.values["modelTemplate"].setText("the endpoint's")
        self._fit_width()

    def set_context(self, n_ctx: int) -> None:
        if self.info is None or self.info.get("remote"):
            return
        self.values["modelContext"].setText(f"{n_ctx:,} tokens")
        est = estimate_memory(self.info, n_ctx)
        ram = self.values["modelRamEstimate"]
        if est.sparse:
            # a mixture of experts: what a token reads, and the whole file that is mapped
            ram.setText(f"≈ {human_bytes(est.decode)} working set, "
                        f"{human_bytes(est.mapped)} mapped")
            ram.setToolTip(f"Each token reads {human_bytes(est.working_set)} of the "
                           f"{human_bytes(est.mapped)} file (the shared layers and the chosen "
                           f"experts), plus {human_bytes(est.allocated)} of KV cache and working "
                           f"memory for a {n_ctx:,}-token context; the rest of the file is "
                           f"mapped, and the system keeps it in memory only while there is room")
        else:
            ram.setText("≈ " + human_bytes(est.total))
            ram.setToolTip(f"Weights {human_bytes(self.info['file_size'])} plus the KV cache "
                           f"and working memory for a {n_ctx:,}-token context")
        fit = memory_fit(est, self.info.get("ram_free") or 0)
        fit_label = self.values["modelMemoryFit"]
        fit_label.setText(fit.text or "—")
        fit_label.setToolTip(fit.detail)
        fit_label.setProperty("warn", not fit.fits)
        fit_label.style().unpolish(fit_label)
        fit_label.style().polish(fit_label)
        self._fit_width()

    def set_notice(self, text: str | None) -> None:
        self.notice.setText(text or "")
        self.notice.setVisible(bool(text))

    def set_loading(self, on: bool, text: str = "Loading…") -> None:
        self.load_box.setVisible(on)
        self.load_status.setText(text)
        if on:
            self.progress.setValue(0)
        self.change_button.setEnabled(not on)

    def set_progress(self, fraction: float) -> None:
        self.progress.setValue(int(fraction * 1000))
        self.load_status.setText(f"Loading weights… {fraction * 100:.0f}%")


# ---- welcome --------------------------------------------------------------------------------
