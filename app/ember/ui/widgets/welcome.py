"""The first-run view (open a model, the starter download) and the no-model bar."""
from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from ..downloads import StarterPanel
from .basics import _button


class WelcomeView(QFrame):
    open_model = Signal()
    use_starter = Signal()
    open_recent = Signal(str)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("welcomeView")
        # in a window too short for it (a large font at 900x600) the page scrolls instead
        # of squeezing its labels and buttons into each other
        body = QWidget()
        body.setObjectName("welcomeBody")
        scroll = QScrollArea(self)
        scroll.setObjectName("welcomeScroll")
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.NoFrame)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        scroll.setWidget(body)
        scroll.viewport().setAutoFillBackground(False)
        page = QVBoxLayout(self)
        page.setContentsMargins(0, 0, 0, 0)
        page.addWidget(scroll)
        outer = QVBoxLayout(body)
        outer.setContentsMargins(40, 32, 40, 32)
        outer.addStretch(2)
        col = QVBoxLayout()
        col.setSpacing(14)
        title = QLabel("Welcome to Ember")
        title.setObjectName("welcomeTitle")
        title.setAlignment(Qt.AlignCenter)
        title.setWordWrap(True)
        col.addWidget(title)
        sub = QLabel("Private AI chat on your own computer. Nothing leaves it.")
        sub.setObjectName("welcomeSubtitle")
        sub.setAlignment(Qt.AlignCenter)
        sub.setWordWrap(True)
        col.addWidget(sub)
        self.drop_zone = QFrame()
        self.drop_zone.setObjectName("dropZone")
        self.drop_zone.setMinimumHeight(190)
        dz = QVBoxLayout(self.drop_zone)
        dz.setContentsMargins(24, 24, 24, 24)
        dz.setSpacing(12)
        icon = QLabel("⬇")
        icon.setObjectName("dropIcon")
        icon.setAlignment(Qt.AlignCenter)
        f = icon.font()
        f.setPointSize(f.pointSize() + 16)
        icon.setFont(f)
        dz.addWidget(icon)
        hint = QLabel("Drop a <b>.gguf</b> model file anywhere in this window")
        hint.setObjectName("dropHint")
        hint.setAlignment(Qt.AlignCenter)
        hint.setWordWrap(True)
        dz.addWidget(hint)
        row = QHBoxLayout()
        row.addStretch(1)
        self.open_button = _button("Open model…", "openModelButton", primary=True,
                                   tip="Choose a .gguf file (Ctrl+O)")
        self.open_button.clicked.connect(self.open_model)
        row.addWidget(self.open_button)
        self.starter_button = _button("Use the starter model", "starterModelButton",
                                      tip="SmolLM2 135M Instruct: small and quick")
        self.starter_button.clicked.connect(self.use_starter)
        row.addWidget(self.starter_button)
        row.addStretch(1)
        dz.addLayout(row)
        self.starter_panel = StarterPanel("welcomeStarterPanel", centered=True)
        dz.addWidget(self.starter_panel)
        col.addWidget(self.drop_zone)
        self.recent_label = QLabel("Recent models")
        self.recent_label.setObjectName("cardSection")
        col.addWidget(self.recent_label)
        self.recent = QListWidget()
        self.recent.setObjectName("recentModels")
        self.recent.setMaximumHeight(120)
        self.recent.itemActivated.connect(lambda it: self.open_recent.emit(it.data(Qt.UserRole)))
        col.addWidget(self.recent)
        wrap = QHBoxLayout()
        wrap.addStretch(1)
        box = QWidget()
        box.setLayout(col)
        box.setMaximumWidth(620)
        wrap.addWidget(box, 3)
        wrap.addStretch(1)
        outer.addLayout(wrap)
        outer.addStretch(3)

    def set_starter_available(self, available: bool) -> None:
        self.starter_button.setVisible(available)
        self.starter_panel.setVisible(not available)

    def set_recent(self, paths: list[str]) -> None:
        from pathlib import Path
        self.recent.clear()
        for p in paths:
            item = QListWidgetItem(Path(p).name)
            item.setToolTip(p)
            item.setData(Qt.UserRole, p)
            self.recent.addItem(item)
        self.recent.setVisible(bool(paths))
        self.recent_label.setVisible(bool(paths))

    def set_drag_active(self, on: bool) -> None:
        self.drop_zone.setProperty("active", on)
        self.drop_zone.style().unpolish(self.drop_zone)
        self.drop_zone.style().polish(self.drop_zone)


# ---- no model ------------------------------------------------------------------------------

class NoModelBar(QFrame):
    """Above the message box while no model is loaded (after a failed or cancelled load,
    with chats on screen): says so, and offers to open one."""

    open_model = Signal()
    use_starter = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("noModelBar")
        lay = QHBoxLayout(self)
        lay.setContentsMargins(14, 8, 8, 8)
        lay.setSpacing(8)
        self.text = QLabel("No model is loaded. Open one to continue this chat.")
        self.text.setObjectName("noModelText")
        self.text.setWordWrap(True)
        lay.addWidget(self.text, 1)
        self.open_button = _button("Open model…", "noModelOpenButton", primary=True,
                                   tip="Open a .gguf file (Ctrl+O)")
        self.open_button.clicked.connect(self.open_model)
        lay.addWidget(self.open_button)
        self.starter_button = _button("Use the starter model", "noModelStarterButton",
                                      tip="SmolLM2 135M Instruct: small and quick")
        self.starter_button.clicked.connect(self.use_starter)
        lay.addWidget(self.starter_button)
        self.hide()

    def set_starter_available(self, available: bool) -> None:
        self.starter_button.setVisible(available)


# ---- banners --------------------------------------------------------------------------------
