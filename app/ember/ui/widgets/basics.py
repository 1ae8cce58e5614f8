"""Small parts the window's widgets share: button makers, a header layout that wraps, a label that elides, a text browser that sizes to its text."""
from __future__ import annotations

from PySide6.QtCore import QEvent, QRect, QSize, Qt, Signal
from PySide6.QtGui import QTextOption
from PySide6.QtWidgets import (
    QFrame,
    QLabel,
    QLayout,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QSizePolicy,
    QTextBrowser,
    QToolButton,
    QWidget,
)

CONTENT_MAX_WIDTH = 860


def _button(text: str, name: str, primary: bool = False, tip: str = "") -> QPushButton:
    b = QPushButton(text)
    b.setObjectName(name)
    b.setAccessibleName(text.replace("…", ""))
    if primary:
        b.setProperty("primary", True)
    if tip:
        b.setToolTip(tip)
    b.setCursor(Qt.PointingHandCursor)
    return b


def _tool(text: str, name: str, tip: str) -> QToolButton:
    b = QToolButton()
    b.setText(text)
    b.setObjectName(name)
    b.setToolTip(tip)
    b.setAccessibleName(tip)
    b.setCursor(Qt.PointingHandCursor)
    return b


class HeaderLayout(QLayout):
    """A message's header: who and when at the left, the actions at the right, on one
    line where they fit; in a narrow window the items wrap onto more lines (left-aligned)
    instead of widening the message past the window's edge."""

    def __init__(self, parent=None, spacing: int = 6):
        super().__init__(parent)
        self._items: list = []
        self._split = 0  # items before this index go left, the rest right
        self.setSpacing(spacing)
        self.setContentsMargins(0, 0, 0, 0)

    def addItem(self, item) -> None:
        self._items.append(item)

    def add_left(self, w: QWidget) -> None:
        self.addWidget(w)
        self._items.insert(self._split, self._items.pop())
        self._split += 1

    def count(self) -> int:
        return len(self._items)

    def itemAt(self, i: int):
        return self._items[i] if 0 <= i < len(self._items) else None

    def takeAt(self, i: int):
        if 0 <= i < len(self._items):
            if i < self._split:
                self._split -= 1
            return self._items.pop(i)
        return None

    def expandingDirections(self):
        return Qt.Orientations(0)

    def hasHeightForWidth(self) -> bool:
        return True

    def heightForWidth(self, width: int) -> int:
        return self._arrange(QRect(0, 0, width, 0), apply=False)

    def _visible(self):
        return [(i, it) for i, it in enumerate(self._items) if not it.isEmpty()]

    def sizeHint(self) -> QSize:
        items = self._visible()
        w = sum(it.sizeHint().width() for _, it in items) + self.spacing() * max(len(items) - 1, 0)
        h = max((it.sizeHint().height() for _, it in items), default=0)
        m = self.contentsMargins()
        return QSize(w + m.left() + m.right(), h + m.top() + m.bottom())

    def minimumSize(self) -> QSize:
        items = self._visible()
        w = max((it.minimumSize().width() for _, it in items), default=0)
        h = max((it.minimumSize().height() for _, it in items), default=0)
        m = self.contentsMargins()
        return QSize(w + m.left() + m.right(), h + m.top() + m.bottom())

    def setGeometry(self, rect: QRect) -> None:
        super().setGeometry(rect)
        self._arrange(rect, apply=True)

    # a name shortened with "…" keeps this many average characters before the actions wrap
    NAME_FLOOR_CHARS = 6

    def _one_line(self, items, hints, width: int) -> list[int] | None:
        """The items' widths on one line, the left group's elided labels (the model's
        name) shortened down to NAME_FLOOR_CHARS first; None when even that does not fit
        (the actions then wrap: issue 45, bug 16, they went to a second row for the sake
        of a long name)."""
        widths = [h.width() for h in hints]
        excess = sum(widths) + self.spacing() * max(len(items) - 1, 0) - width
        for k, (i, it) in enumerate(items):
            if excess <= 0:
                break
            w = it.widget()
            if i < self._split and isinstance(w, ElidedLabel):
                floor = min(widths[k], self.NAME_FLOOR_CHARS * w.fontMetrics().averageCharWidth())
                take = min(excess, widths[k] - floor)
                widths[k] -= take
                excess -= take
        return widths if excess <= 0 else None

    def _arrange(self, rect: QRect, apply: bool) -> int:
        m = self.contentsMargins()
        r = rect.adjusted(m.left(), m.top(), -m.right(), -m.bottom())
        items = self._visible()
        sp = self.spacing()
        hints = [it.sizeHint() for _, it in items]
        line_h = max((h.height() for h in hints), default=0)
        widths = self._one_line(items, hints, r.width())
        if widths is not None:  # one line: left group at the left, the actions at the right
            if apply:
                x = r.x()
                right = [k for k, (i, _) in enumerate(items) if i >= self._split]
                for k, (i, it) in enumerate(items):
                    if right and k == right[0]:
                        x = r.right() + 1 - (sum(widths[j] for j in right)
                                             + sp * (len(right) - 1))
                    h = hints[k]
                    it.setGeometry(QRect(x, r.y() + (line_h - h.height()) // 2, widths[k],
                                         h.height()))
                    x += widths[k] + sp
            return line_h + m.top() + m.bottom()
        # more lines: who and when first, then the actions on lines of their own, at the right
        y = r.y()
        for group, align_right in (([k for k, (i, _) in enumerate(items) if i < self._split],
                                    False),
                                   ([k for k, (i, _) in enumerate(items) if i >= self._split],
                                    True)):
            lines, line, used = [], [], 0
            for k in group:
                w = min(hints[k].width(), r.width())
                if line and used + sp + w > r.width():
                    lines.append((line, used))
                    line, used = [], 0
                used += (sp if line else 0) + w
                line.append((k, w))
            if line:
                lines.append((line, used))
            for line, used in lines:
                lh = max(hints[k].height() for k, _ in line)
                x = r.right() + 1 - used if align_right else r.x()
                for k, w in line:
                    if apply:
                        items[k][1].setGeometry(QRect(x, y + (lh - hints[k].height()) // 2, w,
                                                      hints[k].height()))
                    x += w + sp
                y += lh + sp
        return max(y - sp - r.y(), 0) + m.top() + m.bottom()


class ElidedLabel(QLabel):
    """A one-line label that shortens its text with "…" to the width it is given (the full
    text in its tooltip, unless set_tip gave one) instead of asking the layout for the whole
    text's width."""

    text_changed = Signal()

    def __init__(self, text: str = "", parent=None):
        super().__init__(parent)
        self._full = ""
        self._tip = ""
        self._tip_with_text = True
        self.setSizePolicy(QSizePolicy.Preferred, QSizePolicy.Preferred)
        self.setText(text)

    def full_text(self) -> str:
        return self._full

    def set_tip(self, tip: str, with_text: bool = True) -> None:
        """A tooltip of its own, shown whether or not the text is shortened; with_text:
        the whole text goes before it while the text is shortened (False: the tip says
        it already, in other words)."""
        self._tip = tip
        self._tip_with_text = with_text
        self._elide()

    def setText(self, text: str) -> None:
        changed = text != self._full
        self._full = text
        self._elide()
        if changed:
            self.text_changed.emit()

    def sizeHint(self) -> QSize:
        fm = self.fontMetrics()
        m = self.contentsMargins()
        return QSize(fm.horizontalAdvance(self._full) + m.left() + m.right() + 2,
                     super().sizeHint().height())

    def minimumSizeHint(self) -> QSize:
        return QSize(self.fontMetrics().horizontalAdvance("…") * 3,
                     super().minimumSizeHint().height())

    def resizeEvent(self, e) -> None:
        super().resizeEvent(e)
        self._elide()

    def changeEvent(self, e) -> None:
        super().changeEvent(e)
        if e.type() in (QEvent.FontChange, QEvent.StyleChange):
            self._elide()

    def elided(self) -> bool:
        return self.text() != self._full

    def _elide(self) -> None:
        width = self.contentsRect().width()
        shown = self.fontMetrics().elidedText(self._full, Qt.ElideRight, max(width, 1))
        super().setText(shown)
        tip = self._tip
        if shown != self._full and (self._tip_with_text or not tip):
            tip = f"{self._full}\n{tip}" if tip else self._full
        self.setToolTip(tip)
        self.setAccessibleName(self._full)


def text_area_width(edit: QLineEdit | QPlainTextEdit) -> int:
    """The width a line or text box has for its text (inside its frame and padding)."""
    if isinstance(edit, QLineEdit):
        from PySide6.QtWidgets import QStyle, QStyleOptionFrame
        opt = QStyleOptionFrame()
        edit.initStyleOption(opt)
        r = edit.style().subElementRect(QStyle.SE_LineEditContents, opt, edit)
        m = edit.textMargins()
        return r.width() - m.left() - m.right() - 4  # the cursor's and the text's own margin
    return edit.viewport().width() - int(2 * edit.document().documentMargin())


def fitted_text(fm, width: int, choices: tuple[str, ...]) -> str:
    """The first of choices (longest first) that fits width, else the last one elided."""
    for text in choices:
        if fm.horizontalAdvance(text) <= width:
            return text
    return fm.elidedText(choices[-1], Qt.ElideRight, max(width, 1))


# ---- messages ---------------------------------------------------------------------------

class AutoTextBrowser(QTextBrowser):
    """A read-only rich-text view as tall as its content (the chat view scrolls)."""

    def __init__(self, parent=None, name: str = "messageBody"):
        super().__init__(parent)
        self.setObjectName(name)
        self.setOpenLinks(False)
        self.setFrameShape(QFrame.NoFrame)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        self.setSizePolicy(QSizePolicy.Expanding, QSizePolicy.Fixed)
        self.setWordWrapMode(QTextOption.WrapAtWordBoundaryOrAnywhere)
        self.document().setDocumentMargin(0)
        self.viewport().setAutoFillBackground(False)
        self.document().documentLayout().documentSizeChanged.connect(self._fit)
        self.setTextInteractionFlags(Qt.TextBrowserInteraction | Qt.TextSelectableByKeyboard)

    def _fit(self, *_):
        h = int(self.document().size().height() + 0.999) + 2
        if self.height() != h:
            self.setFixedHeight(h)

    def resizeEvent(self, e):
        super().resizeEvent(e)
        w = self.viewport().width()
        if abs(self.document().textWidth() - w) > 0.5:
            self.document().setTextWidth(w)
        self._fit()

    def wheelEvent(self, e):  # let the chat view scroll
        e.ignore()
