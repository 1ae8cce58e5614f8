"""The conversation: messages in a scroll area, the system prompt above the first one."""
from __future__ import annotations

from PySide6.QtCore import QPoint, Qt, QTimer
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QScrollArea,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from .basics import CONTENT_MAX_WIDTH
from .message import MessageWidget


class ChatView(QScrollArea):
    """The message list. Follows the stream while the user is at the bottom; scrolling
    up stops following until they scroll back down."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("messageList")
        self.setAccessibleName("Messages")
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        self.viewport().setObjectName("messageListViewport")
        inner = QWidget()
        inner.setObjectName("messageListViewport")
        outer = QHBoxLayout(inner)
        outer.setContentsMargins(24, 16, 24, 16)
        outer.addStretch(1)
        self.column = QWidget()
        self.column.setMaximumWidth(CONTENT_MAX_WIDTH)
        self.column.setSizePolicy(QSizePolicy.Expanding, QSizePolicy.Preferred)
        outer.addWidget(self.column, 100)
        outer.addStretch(1)
        self.col_layout = QVBoxLayout(self.column)
        self.col_layout.setContentsMargins(0, 0, 0, 0)
        self.col_layout.setSpacing(12)
        self.col_layout.addStretch(1)
        self.setWidget(inner)
        self.follow = True
        # a message held where it was on screen (msg id, px from the view's top) while the
        # layout settles, until the user scrolls
        self._anchor: tuple[int, int] | None = None
        bar = self.verticalScrollBar()
        bar.valueChanged.connect(self._on_scrolled)
        bar.rangeChanged.connect(self._on_range)
        bar.actionTriggered.connect(self._on_user_scroll)

    def _on_scrolled(self, value: int) -> None:
        self.follow = value >= self.verticalScrollBar().maximum() - 8

    def _mark_long(self) -> None:
        height = self.viewport().height()
        for w in self.messages():
            w.set_long(w.height() > height)

    def resizeEvent(self, e) -> None:
        super().resizeEvent(e)
        self._mark_long()

    def _on_user_scroll(self, _action: int) -> None:
        self._anchor = None

    def _on_range(self, _lo: int, hi: int) -> None:
        self._mark_long()
        if self._anchor is not None:
            self._place_anchor()
        elif self.follow:
            self.verticalScrollBar().setValue(hi)

    def messages(self) -> list[MessageWidget]:
        out = []
        for i in range(self.col_layout.count()):
            w = self.col_layout.itemAt(i).widget()
            if isinstance(w, MessageWidget):
                out.append(w)
        return out

    def widget_for(self, msg_id: int) -> MessageWidget | None:
        return next((w for w in self.messages() if w.msg_id == msg_id), None)

    def clear(self) -> None:
        for w in self.messages():
            self.col_layout.removeWidget(w)
            w.deleteLater()
        self.follow = True

    def add(self, w: MessageWidget) -> MessageWidget:
        self.col_layout.insertWidget(self.col_layout.count() - 1, w)
        return w

    def remove(self, msg_id: int) -> None:
        w = self.widget_for(msg_id)
        if w is not None:
            self.col_layout.removeWidget(w)
            w.deleteLater()

    def set_header(self, w: QWidget) -> None:
        """A widget above the first message (the chat's system prompt): it scrolls with
        the messages, so it can never cover one."""
        self.col_layout.insertWidget(0, w)

    def scroll_to_top(self) -> None:
        """To the header and the first message, once the layout has placed them."""
        self._anchor = None
        self.follow = False
        QTimer.singleShot(0, self, lambda: self.verticalScrollBar().setValue(0))

    def offset_of(self, w: QWidget) -> int:
        """Where w's top is in the view (from the view's top; negative: scrolled past)."""
        return w.mapTo(self.viewport(), QPoint(0, 0)).y()

    def keep_at(self, msg_id: int, offset: int) -> None:
        """Scrolls so the message's top is offset px from the view's top (where it was
        before the conversation was drawn again), and keeps it there while the layout
        settles, until the user scrolls."""
        self.follow = False
        self._anchor = (msg_id, offset)
        QTimer.singleShot(0, self, self._place_anchor)

    def _place_anchor(self) -> None:
        w = self.widget_for(self._anchor[0]) if self._anchor is not None else None
        if w is not None:
            bar = self.verticalScrollBar()
            bar.setValue(bar.value() + self.offset_of(w) - self._anchor[1])

    def scroll_to_bottom(self) -> None:
        self._anchor = None
        self.follow = True
        QTimer.singleShot(0, self, lambda: self.verticalScrollBar().setValue(
            self.verticalScrollBar().maximum()))


# ---- composer -----------------------------------------------------------------------------

# the composer's placeholders in a box too narrow for them (a large font, a small window)
