"""Where the user writes: the message box, Send / Stop, the queue bar and the offer of the
chat's own model."""
from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
)

from .basics import _button, _tool, fitted_text, text_area_width

SHORT_PLACEHOLDERS = {"Message Ember…": "Message…", "Loading the model…": "Loading…",
                      "Open a model to continue this chat": "Open a model first"}


class ChatInput(QPlainTextEdit):
    """Enter sends, Shift+Enter starts a new line; grows with its text up to 8 lines."""

    submit = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self._placeholder = ""
        self.setObjectName("chatInput")
        self.setAccessibleName("Message")
        self.setPlaceholderText("Message Ember…")
        self.setTabChangesFocus(True)
        self.setFrameShape(QFrame.NoFrame)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        self.document().documentLayout().documentSizeChanged.connect(self._grow)
        self._grow()

    def setPlaceholderText(self, text: str) -> None:
        self._placeholder = text
        self._fit_placeholder()

    def full_placeholder(self) -> str:
        return self._placeholder

    def _fit_placeholder(self) -> None:
        """The placeholder as it fits the box: whole, its short form, or cut with "…"."""
        full = self._placeholder
        choices = (full, SHORT_PLACEHOLDERS[full]) if full in SHORT_PLACEHOLDERS else (full,)
        text = fitted_text(self.fontMetrics(), text_area_width(self), choices)
        # QPlainTextEdit repaints only when the placeholder appears or disappears, not when
        # its text changes while shown: the old text would stay on screen until a click
        if text != self.placeholderText():
            super().setPlaceholderText(text)
            self.viewport().update()
        self.setToolTip(full if text != full else "")

    def resizeEvent(self, e) -> None:
        super().resizeEvent(e)
        self._fit_placeholder()

    def keyPressEvent(self, e: QKeyEvent) -> None:
        if e.key() in (Qt.Key_Return, Qt.Key_Enter) and not (e.modifiers() & Qt.ShiftModifier):
            e.accept()
            self.submit.emit()
            return
        if e.key() in (Qt.Key_Return, Qt.Key_Enter):  # Shift+Enter
            self.insertPlainText("\n")
            e.accept()
            return
        super().keyPressEvent(e)

    def _grow(self, *_):
        line = self.fontMetrics().lineSpacing()
        n = int(self.document().size().height())
        lines = max(1, min(8, n))
        self.setVerticalScrollBarPolicy(Qt.ScrollBarAsNeeded if n > 8 else Qt.ScrollBarAlwaysOff)
        self.setFixedHeight(lines * line + 14)


class Composer(QFrame):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("composer")
        lay = QHBoxLayout(self)
        lay.setContentsMargins(12, 8, 8, 8)
        lay.setSpacing(8)
        self.input = ChatInput()
        lay.addWidget(self.input, 1)
        self.send_button = _button("Send", "sendButton", primary=True, tip="Send (Enter)")
        self.stop_button = _button("Stop", "stopButton", tip="Stop generating (Esc)")
        self.stop_button.hide()
        lay.addWidget(self.send_button, 0, Qt.AlignBottom)
        lay.addWidget(self.stop_button, 0, Qt.AlignBottom)

    def set_generating(self, on: bool) -> None:
        self.send_button.setVisible(not on)
        self.stop_button.setVisible(on)
        self.stop_button.setEnabled(on)


class QueueBar(QFrame):
    """Above the message box of a chat waiting for its turn: its place and a Cancel."""

    cancel = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("queueBar")
        lay = QHBoxLayout(self)
        lay.setContentsMargins(14, 6, 8, 6)
        self.text = QLabel("")
        self.text.setObjectName("queueText")
        self.text.setWordWrap(True)
        lay.addWidget(self.text, 1)
        self.cancel_button = _button("Cancel", "queueCancelButton",
                                     tip="Do not answer this chat's last message")
        self.cancel_button.clicked.connect(self.cancel)
        lay.addWidget(self.cancel_button)
        self.hide()

    def show_place(self, place: int, busy_title: str) -> None:
        ahead = "" if place == 1 else f", after {place - 1} other chat{'s' if place > 2 else ''}"
        self.text.setText(f"Queued ({place} in line): the reply starts when the one in "
                          f"“{busy_title}” finishes{ahead}.")
        self.show()


class ChatModelBar(QFrame):
    """Above the message box of a chat opened while another model (or none) is loaded:
    names the model the chat was written with and offers to load it."""

    load = Signal(str)  # the chat's model's path
    dismissed = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("chatModelBar")
        self.path: str | None = None
        lay = QHBoxLayout(self)
        lay.setContentsMargins(14, 6, 8, 6)
        self.text = QLabel("")
        self.text.setObjectName("chatModelText")
        self.text.setWordWrap(True)
        lay.addWidget(self.text, 1)
        self.load_button = _button("Load it", "chatModelLoadButton", primary=True)
        self.load_button.clicked.connect(lambda: self.path and self.load.emit(self.path))
        lay.addWidget(self.load_button)
        close = _tool("✕", "chatModelDismiss", "Keep the model loaded now for this chat")
        close.clicked.connect(self.dismissed)
        lay.addWidget(close)
        self.hide()

    def offer(self, path: str, name: str, loaded: str | None) -> None:
        self.path = path
        now = f"; {loaded} is loaded now" if loaded else ""
        self.text.setText(f"This chat was written with {name}{now}.")
        self.load_button.setText(f"Load {name}")
        self.load_button.setToolTip(path)
        self.show()


# ---- sidebar -------------------------------------------------------------------------------
