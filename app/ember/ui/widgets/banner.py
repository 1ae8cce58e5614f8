"""A banner over the chat: an error or a notice, with its details under a toggle."""
from __future__ import annotations

import html

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QToolButton,
    QVBoxLayout,
)

from .basics import _tool


class Banner(QFrame):
    """An in-window message (error or notice) with a close button."""

    def __init__(self, name: str, text_name: str, parent=None):
        super().__init__(parent)
        self.setObjectName(name)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(14, 10, 8, 10)
        column = QVBoxLayout()
        column.setSpacing(4)
        self.text = QLabel("")
        self.text.setObjectName(text_name)
        self.text.setWordWrap(True)
        self.text.setTextFormat(Qt.RichText)
        self.text.setTextInteractionFlags(Qt.TextSelectableByMouse | Qt.LinksAccessibleByMouse)
        column.addWidget(self.text)
        # the engine's own words, for a bug report: folded, as they mean little to most users
        self.details_toggle = QToolButton()
        self.details_toggle.setObjectName(name + "DetailsToggle")
        self.details_toggle.setText("Details")
        self.details_toggle.setCheckable(True)
        self.details_toggle.setArrowType(Qt.RightArrow)
        self.details_toggle.setToolButtonStyle(Qt.ToolButtonTextBesideIcon)
        self.details_toggle.setAutoRaise(True)
        self.details_toggle.toggled.connect(self._show_details)
        column.addWidget(self.details_toggle, 0, Qt.AlignLeft)
        self.details = QLabel("")
        self.details.setObjectName(name + "Details")
        self.details.setWordWrap(True)
        self.details.setTextFormat(Qt.PlainText)
        self.details.setTextInteractionFlags(Qt.TextSelectableByMouse)
        column.addWidget(self.details)
        lay.addLayout(column, 1)
        close = _tool("✕", name + "Close", "Dismiss")
        close.clicked.connect(self.hide)
        lay.addWidget(close, 0, Qt.AlignTop)
        self.details_toggle.hide()
        self.details.hide()
        self.hide()

    def show_message(self, title: str, detail: str = "", details: str = "") -> None:
        """detail: shown under the title; details: behind the "Details" toggle."""
        t = f"<b>{html.escape(title, quote=False)}</b>"
        if detail:
            t += "<br>" + html.escape(detail, quote=False).replace("\n", "<br>")
        self.text.setText(t)
        self.details.setText(details)
        self.details_toggle.setChecked(False)
        self.details_toggle.setVisible(bool(details))
        self._show_details(False)
        self.plain = "\n".join(x for x in (title, detail, details) if x)
        self.show()

    def _show_details(self, shown: bool) -> None:
        self.details_toggle.setArrowType(Qt.DownArrow if shown else Qt.RightArrow)
        self.details.setVisible(shown)
