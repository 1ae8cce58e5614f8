"""Settings (Ctrl+,): sampling, context and threads, backend, appearance."""
from __future__ import annotations

import copy

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QPalette, QStandardItemModel
from PySide6.QtWidgets import (
    QApplication,
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QSpinBox,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionComboBox,
    QStyleOptionViewItem,
    QStylePainter,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from ..placement import run_on_choices, unavailable_text
from ..storage.settings import Settings


def list_devices() -> list:
    """The engine's backend rows (its registry is read once per process and is safe to
    ask from any thread; no model is touched)."""
    from ..engine import EmberError, backend_devices
    try:
        return backend_devices()
    except (EmberError, OSError):
        return []


class ChoiceDelegate(QStyledItemDelegate):
    """A combo box's list rows drawn as a list's, so a greyed-out choice looks it (the
    menu-style rows draw every choice in the text colour), as tall as a menu's."""

    PAD = 8

    def sizeHint(self, option, index) -> QSize:
        s = super().sizeHint(option, index)
        return QSize(s.width() + 2 * self.PAD, max(s.height(), option.fontMetrics.height() + 10))

    def paint(self, painter, option, index) -> None:
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        style = opt.widget.style() if opt.widget else QApplication.style()
        style.drawPrimitive(QStyle.PE_PanelItemViewItem, opt, painter, opt.widget)
        inner = QStyleOptionViewItem(option)  # the text PAD in from the row's edges
        inner.rect = option.rect.adjusted(self.PAD, 0, -self.PAD, 0)
        super().paint(painter, inner, index)


class ElidedComboBox(QComboBox):
    """A combo box as wide as the dialog gives it (at a large font the dialog is held to
    the screen): its choice is shortened with "…" where it does not fit, whole in the
    tooltip, instead of being cut off."""

    def __init__(self, name: str, parent=None):
        super().__init__(parent)
        self.setObjectName(name)
        self.setSizeAdjustPolicy(QComboBox.AdjustToMinimumContentsLengthWithIcon)
        self.setMinimumContentsLength(16)
        self.currentIndexChanged.connect(self._update_tip)

    def _field_width(self) -> int:
        opt = QStyleOptionComboBox()
        self.initStyleOption(opt)
        r = self.style().subControlRect(QStyle.CC_ComboBox, opt, QStyle.SC_ComboBoxEditField,
                                        self)
        return r.width() - 6  # the label's own margin inside the field

    def shown_text(self) -> str:
        """The choice as drawn."""
        return self.fontMetrics().elidedText(self.currentText(), Qt.ElideRight,
                                             max(self._field_width(), 1))

    def _update_tip(self, *_) -> None:
        self.setToolTip(self.currentText() if self.shown_text() != self.currentText() else "")

    def resizeEvent(self, e) -> None:
        super().resizeEvent(e)
        self._update_tip()

    def showPopup(self) -> None:
        # the list as wide as its longest choice, not only as wide as the box
        view = self.view()
        view.setMinimumWidth(view.sizeHintForColumn(0) + 2 * view.frameWidth() + 24)
        super().showPopup()

    def paintEvent(self, _e) -> None:
        p = QStylePainter(self)
        opt = QStyleOptionComboBox()
        self.initStyleOption(opt)
        p.drawComplexControl(QStyle.CC_ComboBox, opt)
        opt.currentText = self.shown_text()
        p.drawControl(QStyle.CE_ComboBoxLabel, opt)


class SettingsDialog(QDialog):
    """devices: engine.backend_devices() rows (asked for when not given); max_layers: the
    loaded model's layer count with its output head, the most "GPU layers" can say;
    prompt_format: what Auto gives the loaded model, in the model card's words."""

    def __init__(self, settings: Settings, parent=None, devices: list | None = None,
                 max_layers: int | None = None, prompt_format: str | None = None):
        super().__init__(parent)
        self.devices = list_devices() if devices is None else list(devices)
        self.setObjectName("settingsDialog")
        self.setWindowTitle("Settings")
        self.setMinimumWidth(460)
        self.original = settings
        s = settings
        self.tabs = tabs = QTabWidget()

        # generation
        gen = QWidget()
        f = self._form(gen)
        self.temperature = self._dspin("temperature", 0, 5, 0.05, s.temperature, 2)
        self.top_k = self._spin("topK", 0, 1000, s.top_k)
        self.top_p = self._dspin("topP", 0, 1, 0.01, s.top_p, 2)
        self.min_p = self._dspin("minP", 0, 1, 0.01, s.min_p, 2)
        self.repeat_penalty = self._dspin("repeatPenalty", 0.5, 3, 0.05, s.repeat_penalty, 2)
        seed_row = QHBoxLayout()
        self.random_seed = QCheckBox("Random")
        self.random_seed.setObjectName("randomSeed")
        self.seed = self._spin("seed", 0, 2**31 - 1, s.seed or 0)
        self.random_seed.setChecked(s.seed is None)
        self.seed.setEnabled(s.seed is not None)
        self.random_seed.toggled.connect(lambda on: self.seed.setEnabled(not on))
        seed_row.addWidget(self.seed, 1)
        seed_row.addWidget(self.random_seed)
        self.max_new_tokens = self._spin("maxNewTokens", 1, 32768, s.max_new_tokens)
        f.addRow("Temperature", self.temperature)
        f.addRow("Top-k", self.top_k)
        f.addRow("Top-p", self.top_p)
        f.addRow("Min-p", self.min_p)
        f.addRow("Repeat penalty", self.repeat_penalty)
        f.addRow("Seed", seed_row)
        f.addRow("Max new tokens", self.max_new_tokens)
        self.prompt_lookup = QCheckBox("Draft from the conversation (prompt lookup)")
        self.prompt_lookup.setObjectName("promptLookup")
        self.prompt_lookup.setChecked(s.prompt_lookup)
        self.prompt_lookup.setToolTip(
            "Speculative decoding: tokens that repeat earlier text are guessed and checked "
            "in one pass. The replies are the same; those that quote the prompt (edited code, "
            "a document's sentences) come faster.")
        f.addRow("Speed", self.prompt_lookup)
        self.system_prompt = QPlainTextEdit(s.system_prompt)
        self.system_prompt.setObjectName("defaultSystemPrompt")
        self.system_prompt.setPlaceholderText("For new chats (empty: the model's own default)")
        self.system_prompt.setFixedHeight(70)
        f.addRow("System prompt", self.system_prompt)
        tabs.addTab(gen, "Generation")

        # model
        mod = QWidget()
        f = self._form(mod)
        self.n_ctx = self._spin("contextLength", 128, 131072, s.n_ctx)
        self.n_ctx.setSingleStep(512)
        self.n_ctx.setSuffix(" tokens")
        self.n_threads = self._spin("threads", 0, 256, s.n_threads)
        self.n_threads.setSpecialValueText("Auto")
        self.backend = ElidedComboBox("backend")
        # rows drawn as a list's (the menu-style rows draw a greyed-out entry like the rest)
        self.backend.setItemDelegate(ChoiceDelegate(self.backend))
        self._add_run_on_choices(s.backend)
        self.gpu_layers = self._spin("gpuLayers", -1, max(max_layers or 999, s.gpu_layers),
                                     s.gpu_layers)
        self.gpu_layers.setSpecialValueText("Auto (as many as fit)")
        self.gpu_layers.setSuffix(" layers")
        self.gpu_layers.setToolTip("Layers on the GPU, counted from the last (the output head "
                                   "counts as one); the rest run on the CPU. Auto fits as many "
                                   "as the device's free memory allows.")
        self.backend.currentIndexChanged.connect(self._update_gpu_layers)
        self._update_gpu_layers()
        self.context_policy = ElidedComboBox("contextPolicy")
        self.context_policy.addItem("Drop oldest messages (keep the system prompt)", "drop_oldest")
        self.context_policy.addItem("Stop and tell me", "stop")
        self.context_policy.setCurrentIndex(max(0, self.context_policy.findData(s.context_policy)))
        self.prompt_mode = ElidedComboBox("promptMode")
        # the model card's words: "chat template", "Gemma (built-in)", "raw completion"
        self.prompt_mode.addItem(f"Auto: {prompt_format}" if prompt_format else
                                 "Auto (the model's own format)", "auto")
        self.prompt_mode.setItemData(
            0, "The model's chat template; for a file without one, the built-in format its "
               "vocabulary points to (such as Gemma (built-in)); raw completion for a base "
               "model with neither. The model card says which.", Qt.ToolTipRole)
        self.prompt_mode.addItem("Chat template", "chat")
        self.prompt_mode.addItem("Raw completion", "raw")
        self.prompt_mode.setCurrentIndex(max(0, self.prompt_mode.findData(s.prompt_mode)))
        f.addRow("Context length", self.n_ctx)
        f.addRow("Threads", self.n_threads)
        f.addRow("Run on", self.backend)
        f.addRow("GPU layers", self.gpu_layers)
        unavailable = unavailable_text(self.devices)
        if unavailable:
            note = QLabel(unavailable)
            note.setWordWrap(True)
            note.setObjectName("backendNote")
            note.setEnabled(False)
            f.addRow("", note)
        f.addRow("When the context is full", self.context_policy)
        f.addRow("Prompt format", self.prompt_mode)
        reload_note = QLabel("Context length, threads, Run on and GPU layers apply when the "
                             "model is reloaded (Ember reloads it for you).")
        reload_note.setWordWrap(True)
        reload_note.setEnabled(False)
        f.addRow("", reload_note)
        port = s.serve_port or 8080
        self.serve = QCheckBox(f"Serve the loaded model on http://127.0.0.1:{port}")
        self.serve.setObjectName("serveModel")
        self.serve.setToolTip("An OpenAI-compatible API (/v1/chat/completions) for other "
                              "programs on this computer; nothing outside it can reach it")
        self.serve.setChecked(bool(s.serve))
        f.addRow("Server", self.serve)
        tabs.addTab(mod, "Model")

        # appearance
        app = QWidget()
        f = self._form(app)
        self.theme = QComboBox()
        self.theme.setObjectName("theme")
        for key, label in (("system", "System"), ("light", "Light"), ("dark", "Dark")):
            self.theme.addItem(label, key)
        self.theme.setCurrentIndex(max(0, self.theme.findData(s.theme)))
        self.font_size = self._spin("fontSize", 8, 28, s.font_size)
        self.font_size.setSuffix(" pt")
        f.addRow("Theme", self.theme)
        f.addRow("Font size", self.font_size)
        tabs.addTab(app, "Appearance")

        buttons = QDialogButtonBox(QDialogButtonBox.Ok | QDialogButtonBox.Cancel
                                   | QDialogButtonBox.RestoreDefaults)
        buttons.setObjectName("settingsButtons")
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        buttons.button(QDialogButtonBox.RestoreDefaults).clicked.connect(self.restore_defaults)
        lay = QVBoxLayout(self)
        lay.addWidget(tabs)
        lay.addWidget(buttons)

    def showEvent(self, e) -> None:
        super().showEvent(e)
        self._fit_wrapped_text()

    def _fit_wrapped_text(self) -> None:
        """As wide as its widest page needs (Qt holds a new window to two thirds of the
        screen, under that at a large font), and each page as tall as its wrapped notes
        need at that width: a form's size hint counts one line per note, so at a large
        font they were cut off below."""
        screen = self.screen().availableGeometry()
        self.resize(min(max(self.width(), self.minimumSizeHint().width()), screen.width()),
                    self.height())
        self.layout().activate()
        width = self.tabs.currentWidget().width()
        for i in range(self.tabs.count()):
            lay = self.tabs.widget(i).layout()
            if lay.hasHeightForWidth():
                self.tabs.widget(i).setMinimumHeight(lay.totalHeightForWidth(width))
        self.resize(self.width(), max(self.height(), self.sizeHint().height()))

    def _add_run_on_choices(self, saved: str) -> None:
        model: QStandardItemModel = self.backend.model()
        for choice in run_on_choices(self.devices, saved):
            self.backend.addItem(choice.label, choice.selector)
            item = model.item(self.backend.count() - 1)
            item.setToolTip(choice.tooltip)
            item.setEnabled(choice.usable)
            if not choice.usable:  # greyed out as the tooltip says why
                item.setForeground(self.palette().brush(QPalette.Disabled, QPalette.Text))
        self.backend.setCurrentIndex(max(0, self.backend.findData(saved)))

    def _update_gpu_layers(self) -> None:
        self.gpu_layers.setEnabled(self.backend.currentData() != "cpu")

    @staticmethod
    def _form(page: QWidget) -> QFormLayout:
        f = QFormLayout(page)
        # a label above its field where the two do not fit side by side (a large font in a
        # dialog held to the screen's width), never cut off beside it
        f.setRowWrapPolicy(QFormLayout.WrapLongRows)
        f.setFieldGrowthPolicy(QFormLayout.AllNonFixedFieldsGrow)
        return f

    def _spin(self, name, lo, hi, value) -> QSpinBox:
        w = QSpinBox()
        w.setObjectName(name)
        w.setRange(lo, hi)
        w.setValue(int(value))
        w.setAlignment(Qt.AlignRight)
        return w

    def _dspin(self, name, lo, hi, step, value, decimals) -> QDoubleSpinBox:
        w = QDoubleSpinBox()
        w.setObjectName(name)
        w.setRange(lo, hi)
        w.setSingleStep(step)
        w.setDecimals(decimals)
        w.setValue(float(value))
        w.setAlignment(Qt.AlignRight)
        return w

    def restore_defaults(self) -> None:
        d = Settings()
        self.temperature.setValue(d.temperature)
        self.top_k.setValue(d.top_k)
        self.top_p.setValue(d.top_p)
        self.min_p.setValue(d.min_p)
        self.repeat_penalty.setValue(d.repeat_penalty)
        self.random_seed.setChecked(True)
        self.max_new_tokens.setValue(d.max_new_tokens)
        self.prompt_lookup.setChecked(d.prompt_lookup)
        self.n_ctx.setValue(d.n_ctx)
        self.n_threads.setValue(d.n_threads)
        self.backend.setCurrentIndex(self.backend.findData(d.backend))
        self.gpu_layers.setValue(d.gpu_layers)
        self.context_policy.setCurrentIndex(self.context_policy.findData(d.context_policy))
        self.prompt_mode.setCurrentIndex(self.prompt_mode.findData(d.prompt_mode))
        self.theme.setCurrentIndex(self.theme.findData(d.theme))
        self.font_size.setValue(d.font_size)

    def result_settings(self) -> Settings:
        s = copy.deepcopy(self.original)
        s.temperature = self.temperature.value()
        s.top_k = self.top_k.value()
        s.top_p = self.top_p.value()
        s.min_p = self.min_p.value()
        s.repeat_penalty = self.repeat_penalty.value()
        s.seed = None if self.random_seed.isChecked() else self.seed.value()
        s.max_new_tokens = self.max_new_tokens.value()
        s.prompt_lookup = self.prompt_lookup.isChecked()
        s.system_prompt = self.system_prompt.toPlainText().strip()
        s.n_ctx = self.n_ctx.value()
        s.n_threads = self.n_threads.value()
        s.backend = self.backend.currentData()
        s.gpu_layers = self.gpu_layers.value()
        s.context_policy = self.context_policy.currentData()
        s.prompt_mode = self.prompt_mode.currentData()
        s.theme = self.theme.currentData()
        s.font_size = self.font_size.value()
        s.serve = self.serve.isChecked()
        return s.validate()
