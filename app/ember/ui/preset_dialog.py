"""Chat > Presets…: the editor of presets (a named system prompt with sampling settings,
chosen per chat from the chat header's Preset button)."""
from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
)

from ..storage.store import StoreError

# (field, label, kind, low, high, step, decimals): the preset's sampling, as Settings has it
FIELDS = (
    ("temperature", "Temperature", float, 0.0, 5.0, 0.05, 2),
    ("top_k", "Top-k", int, 0, 1000, 1, 0),
    ("top_p", "Top-p", float, 0.0, 1.0, 0.01, 2),
    ("min_p", "Min-p", float, 0.0, 1.0, 0.01, 2),
    ("repeat_penalty", "Repeat penalty", float, 0.5, 3.0, 0.05, 2),
    ("max_new_tokens", "Reply length (tokens)", int, 1, 32768, 1, 0),
)


class PresetDialog(QDialog):
    """chat: the ChatController (it writes the presets); defaults: the sampling a new
    preset starts from (Settings' own)."""

    def __init__(self, chat, defaults: dict, parent=None, select: int | None = None):
        super().__init__(parent)
        self.chat = chat
        self.defaults = dict(defaults)
        self.editing: int | None = None  # the preset in the form; None: a new one
        self.setObjectName("presetDialog")
        self.setWindowTitle("Presets")
        self.setMinimumWidth(560)
        top = QHBoxLayout()
        left = QVBoxLayout()
        self.list = QListWidget()
        self.list.setObjectName("presetList")
        self.list.currentItemChanged.connect(self._show_current)
        left.addWidget(self.list, 1)
        buttons = QHBoxLayout()
        self.new_button = QPushButton("New")
        self.new_button.setObjectName("presetNew")
        self.new_button.clicked.connect(self.new_preset)
        self.delete_button = QPushButton("Delete")
        self.delete_button.setObjectName("presetDelete")
        self.delete_button.clicked.connect(self.delete_preset)
        buttons.addWidget(self.new_button)
        buttons.addWidget(self.delete_button)
        left.addLayout(buttons)
        top.addLayout(left, 2)
        right = QVBoxLayout()
        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.AllNonFixedFieldsGrow)
        self.name = QLineEdit()
        self.name.setObjectName("presetName")
        self.name.setPlaceholderText("e.g. Terse, Translator, Coder")
        form.addRow("Name", self.name)
        self.system_prompt = QPlainTextEdit()
        self.system_prompt.setObjectName("presetSystemPrompt")
        self.system_prompt.setPlaceholderText("Becomes the chat's system prompt (empty: the "
                                              "chat keeps its own)")
        self.system_prompt.setMinimumHeight(80)
        form.addRow("System prompt", self.system_prompt)
        self.spins: dict[str, QSpinBox | QDoubleSpinBox] = {}
        for name, label, kind, lo, hi, step, decimals in FIELDS:
            w = QDoubleSpinBox() if kind is float else QSpinBox()
            w.setObjectName("preset_" + name)
            w.setRange(lo, hi)
            w.setSingleStep(step)
            if kind is float:
                w.setDecimals(decimals)
            w.setAlignment(Qt.AlignRight)
            self.spins[name] = w
            form.addRow(label, w)
        right.addLayout(form)
        self.error = QLabel("")
        self.error.setObjectName("presetError")
        self.error.setWordWrap(True)
        self.error.hide()
        right.addWidget(self.error)
        self.save_button = QPushButton("Save preset")
        self.save_button.setObjectName("presetSave")
        self.save_button.setDefault(True)
        self.save_button.clicked.connect(self.save)
        right.addWidget(self.save_button, 0, Qt.AlignRight)
        top.addLayout(right, 3)
        lay = QVBoxLayout(self)
        lay.addLayout(top, 1)
        close = QDialogButtonBox(QDialogButtonBox.Close)
        close.rejected.connect(self.reject)
        lay.addWidget(close)
        self._fill(select)
        if self.list.count() == 0:
            self.new_preset()

    def _fill(self, select: int | None = None) -> None:
        self.list.blockSignals(True)
        self.list.clear()
        chosen = None
        for p in self.chat.store.presets():
            item = QListWidgetItem(p.name)
            item.setData(Qt.UserRole, p.id)
            self.list.addItem(item)
            if p.id == select:
                chosen = item
        self.list.blockSignals(False)
        if chosen is not None:
            self.list.setCurrentItem(chosen)
        elif self.list.count():
            self.list.setCurrentRow(0)
        self.delete_button.setEnabled(self.list.count() > 0)

    def _show_current(self, item, _previous=None) -> None:
        preset = self.chat.store.preset(item.data(Qt.UserRole)) if item is not None else None
        if preset is None:
            return
        self._load(preset.id, preset.name, preset.system_prompt, preset.params)

    def _load(self, preset_id: int | None, name: str, system_prompt: str, params: dict) -> None:
        self.editing = preset_id
        self.name.setText(name)
        self.system_prompt.setPlainText(system_prompt)
        for field, w in self.spins.items():
            value = params.get(field, self.defaults.get(field, w.minimum()))
            try:  # a hand-edited database may hold anything
                value = float(value) if isinstance(w, QDoubleSpinBox) else int(value)
            except (TypeError, ValueError):
                value = self.defaults.get(field, w.minimum())
            w.setValue(value)
        self.error.hide()

    def new_preset(self) -> None:
        self.list.clearSelection()
        self._load(None, "", "", self.defaults)
        self.name.setFocus()

    def values(self) -> dict:
        return {field: (w.value() if isinstance(w, QDoubleSpinBox) else int(w.value()))
                for field, w in self.spins.items()}

    def save(self) -> bool:
        try:
            pid = self.chat.save_preset(self.name.text(), self.system_prompt.toPlainText(),
                                        self.values(), self.editing)
        except StoreError as e:
            self.error.setText(str(e).capitalize() + ".")
            self.error.show()
            return False
        self._fill(pid)
        return True

    def delete_preset(self) -> None:
        item = self.list.currentItem()
        if item is None:
            return
        self.chat.delete_preset(item.data(Qt.UserRole))
        self._fill()
        if self.list.count() == 0:
            self.new_preset()
