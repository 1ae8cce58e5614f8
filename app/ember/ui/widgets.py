"""The window's parts: messages and the chat view, composer, sidebar, model card,
welcome view and banners. They hold no engine state; MainWindow wires them."""
from __future__ import annotations

import html
import time

from PySide6.QtCore import QEvent, QPoint, QRect, QSize, Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QDesktopServices, QGuiApplication, QKeyEvent, QTextOption
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QLayout,
    QLineEdit,
    QListView,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QStyledItemDelegate,
    QTextBrowser,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from ..chat.reasoning import Reply, split_reply
from ..model_card import estimate_ram
from . import markdown
from .conversation_model import BADGE_ROLE, DATE_ROLE, NOTE_ROLE, ConversationListModel, RowLayout
from .downloads import StarterPanel
from .format import human_bytes, human_count

CONTENT_MAX_WIDTH = 860
COPIED_MS = 1200  # how long "Copied" shows after a copy


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

    def _arrange(self, rect: QRect, apply: bool) -> int:
        m = self.contentsMargins()
        r = rect.adjusted(m.left(), m.top(), -m.right(), -m.bottom())
        items = self._visible()
        sp = self.spacing()
        hints = [it.sizeHint() for _, it in items]
        total = sum(h.width() for h in hints) + sp * max(len(items) - 1, 0)
        line_h = max((h.height() for h in hints), default=0)
        if total <= r.width():  # one line: left group at the left, the actions at the right
            if apply:
                x = r.x()
                right = [k for k, (i, _) in enumerate(items) if i >= self._split]
                for k, (i, it) in enumerate(items):
                    if right and k == right[0]:
                        x = r.right() + 1 - (sum(hints[j].width() for j in right)
                                             + sp * (len(right) - 1))
                    h = hints[k]
                    it.setGeometry(QRect(x, r.y() + (line_h - h.height()) // 2, h.width(),
                                         h.height()))
                    x += h.width() + sp
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


ROLE_NAMES = {"user": "You", "assistant": "Assistant", "system": "System"}


class MessageWidget(QFrame):
    """One message: who, when, the rendered text, and its actions."""

    action = Signal(str, int)  # "copy" | "edit" | "regenerate" | "continue" | "submit-edit"
    edit_submitted = Signal(int, str)

    def __init__(self, msg_id: int, role: str, content: str, colors: dict, *,
                 created: float | None = None, complete: bool = True, assistant_name: str = "",
                 parent=None):
        super().__init__(parent)
        self.msg_id = msg_id
        self.role = role
        self.content = content
        self.colors = colors
        self.streaming = False
        self.complete = complete
        self.code_blocks: list[str] = []
        self.copied_block: int | None = None  # its link reads "Copied" for a moment
        self.setObjectName("message")
        self.setProperty("role", role)
        self.setAccessibleName(f"{ROLE_NAMES.get(role, role)} message")
        lay = QVBoxLayout(self)
        lay.setContentsMargins(16, 10, 16, 10)
        lay.setSpacing(6)
        head = HeaderLayout()
        name = ROLE_NAMES.get(role, role) if role != "assistant" else (assistant_name or "Assistant")
        self.role_label = ElidedLabel(name)
        self.role_label.setObjectName("messageRole")
        head.add_left(self.role_label)
        self.time_label = QLabel(time.strftime("%H:%M", time.localtime(created or time.time())))
        self.time_label.setObjectName("messageTime")
        head.add_left(self.time_label)
        self.copy_button = _tool("Copy", "copyButton", "Copy this message")
        self.copy_button.clicked.connect(self.copy)
        self.edit_button = _tool("Edit", "editButton", "Edit this message and re-run from it")
        self.edit_button.clicked.connect(self.start_edit)
        self.regenerate_button = _tool("Regenerate", "regenerateButton", "Write this reply again")
        self.regenerate_button.clicked.connect(lambda: self.action.emit("regenerate", self.msg_id))
        self.continue_button = _tool("Continue", "continueButton", "Continue this reply")
        self.continue_button.clicked.connect(lambda: self.action.emit("continue", self.msg_id))
        # "‹ 2/3 ›": this message's versions (Edit and Regenerate keep the earlier ones)
        self.version_count = 1
        self.version_index = 1
        self._busy = False
        self.version_prev = _tool("‹", "versionPrevious", "Previous version")
        self.version_prev.clicked.connect(lambda: self.action.emit("version-prev", self.msg_id))
        self.version_label = QLabel("")
        self.version_label.setObjectName("versionLabel")
        self.version_next = _tool("›", "versionNext", "Next version")
        self.version_next.clicked.connect(lambda: self.action.emit("version-next", self.msg_id))
        for b in (self.version_prev, self.version_label, self.version_next, self.edit_button,
                  self.regenerate_button, self.continue_button, self.copy_button):
            head.addWidget(b)
        lay.addLayout(head)
        # Reasoning ("<think>...</think>") before the answer: a header to click and
        # the thoughts under it, open while the model thinks, folded once it answers.
        self.thoughts_user_choice: bool | None = None  # the user's own open/closed
        self.thought_code_blocks: list[str] = []
        self.thoughts_box = QFrame(self)
        self.thoughts_box.setObjectName("thoughtsBox")
        tb = QVBoxLayout(self.thoughts_box)
        tb.setContentsMargins(0, 0, 0, 0)
        tb.setSpacing(4)
        self.thoughts_toggle = QToolButton(self.thoughts_box)
        self.thoughts_toggle.setObjectName("thoughtsToggle")
        self.thoughts_toggle.setCheckable(True)
        self.thoughts_toggle.setAccessibleName("Thoughts")
        self.thoughts_toggle.setToolTip("Show or hide the model's reasoning")
        self.thoughts_toggle.setCursor(Qt.PointingHandCursor)
        self.thoughts_toggle.setToolButtonStyle(Qt.ToolButtonTextBesideIcon)
        self.thoughts_toggle.clicked.connect(self._toggle_thoughts)
        tb.addWidget(self.thoughts_toggle, 0, Qt.AlignLeft)
        self.thoughts_body = AutoTextBrowser(self.thoughts_box, "thoughtsBody")
        self.thoughts_body.anchorClicked.connect(self._thought_anchor)
        tb.addWidget(self.thoughts_body)
        self.thoughts_box.hide()
        lay.addWidget(self.thoughts_box)
        self.body = AutoTextBrowser(self)
        self.body.anchorClicked.connect(self._anchor)
        lay.addWidget(self.body)
        self.editor: QPlainTextEdit | None = None
        self.editor_box: QWidget | None = None
        foot = HeaderLayout()  # the counts at the left, the actions at the right, wrapping
        self.footer = QLabel("")
        self.footer.setObjectName("messageFooter")
        self.footer.hide()
        foot.add_left(self.footer)
        # a reply taller than the view has its actions again at its end, where its reader is
        self.long = False
        self._last_assistant = False
        self.bottom_copy = _tool("Copy", "copyButtonBottom", "Copy this message")
        self.bottom_copy.clicked.connect(self.copy)
        self.bottom_regenerate = _tool("Regenerate", "regenerateButtonBottom",
                                       "Write this reply again")
        self.bottom_regenerate.clicked.connect(
            lambda: self.action.emit("regenerate", self.msg_id))
        self.bottom_continue = _tool("Continue", "continueButtonBottom", "Continue this reply")
        self.bottom_continue.clicked.connect(lambda: self.action.emit("continue", self.msg_id))
        for b in (self.bottom_regenerate, self.bottom_continue, self.bottom_copy):
            b.hide()
            foot.addWidget(b)
        lay.addLayout(foot)
        self.set_actions(last_assistant=False)
        self.set_versions(1, 1)
        self.render()

    # content
    @property
    def reply(self) -> Reply:
        """The message split into reasoning and answer (user text is all answer)."""
        if self.role != "assistant":
            return Reply("", self.content)
        return split_reply(self.content, streaming=self.streaming)

    @property
    def answer_text(self) -> str:
        """What Copy gives: the answer, without the reasoning before it."""
        if self.role != "assistant":
            return self.content
        return split_reply(self.content).answer

    @property
    def thoughts_expanded(self) -> bool:
        return self.thoughts_box.isVisible() and self.thoughts_body.isVisibleTo(self.thoughts_box)

    def render(self) -> None:
        c = self.colors
        reply = self.reply
        self._render_thoughts(reply)
        text = reply.answer
        if self.role == "assistant" and not text and self.streaming:
            if reply.has_thoughts:  # the thoughts block says it is thinking
                self.body.hide()
            else:
                self.body.show()
                self.body.setHtml(f'<span style="color:{c["muted"]}">Thinking…</span>')
            self.code_blocks = []
            return
        if self.editor_box is None:
            self.body.show()
        r = markdown.render(text, c, copied=self.copied_block)
        body = r.html
        if self.streaming:
            body += f'<span style="color:{c["accent"]}">&#9613;</span>'
        elif self.role == "assistant" and not self.complete:
            body += (f'<p style="color:{c["muted"]}; margin:0"><i>(interrupted: the app '
                     f'closed before this reply finished)</i></p>')
        elif self.role == "assistant" and reply.thinking and not text:
            body += (f'<p style="color:{c["muted"]}; margin:0"><i>(no answer: the reply '
                     f'stopped while the model was still thinking)</i></p>')
        self.code_blocks = r.code_blocks
        self.body.setHtml(f'<div style="color:{c["text"]}">{body}</div>')

    def _render_thoughts(self, reply: Reply) -> None:
        if not reply.has_thoughts:
            self.thoughts_box.hide()
            self.thought_code_blocks = []
            return
        c = self.colors
        live = self.streaming and reply.thinking
        # open while the model thinks, folded once the answer starts, unless the user chose
        expanded = self.thoughts_user_choice if self.thoughts_user_choice is not None else live
        self.thoughts_toggle.setText("Thinking…" if live else "Thoughts")
        self.thoughts_toggle.setArrowType(Qt.DownArrow if expanded else Qt.RightArrow)
        self.thoughts_toggle.setChecked(expanded)
        self.thoughts_toggle.setAccessibleDescription(
            "expanded" if expanded else "collapsed")
        if expanded:
            r = markdown.render(reply.thoughts, c)
            self.thought_code_blocks = r.code_blocks
            body = r.html or "&nbsp;"
            if live:
                body += f'<span style="color:{c["accent"]}">&#9613;</span>'
            self.thoughts_body.setHtml(
                f'<div style="color:{c["muted"]}; font-style:italic">{body}</div>')
        self.thoughts_body.setVisible(expanded)
        self.thoughts_box.show()

    def _toggle_thoughts(self, checked: bool) -> None:
        self.thoughts_user_choice = bool(checked)
        self.render()

    def _thought_anchor(self, url: QUrl) -> None:
        s = url.toString()
        if s.startswith("copy-code:"):
            try:
                QGuiApplication.clipboard().setText(
                    self.thought_code_blocks[int(s.split(":", 1)[1])])
            except (ValueError, IndexError):
                pass
        elif url.scheme() in ("http", "https", "mailto"):
            QDesktopServices.openUrl(url)

    def set_content(self, text: str) -> None:
        self.content = text
        self.render()

    def set_streaming(self, on: bool) -> None:
        self.streaming = on
        self.render()
        self.set_actions(last_assistant=not on and self.regenerate_button.isVisible())

    def set_footer(self, text: str) -> None:
        self.footer.setText(text)
        self.footer.setVisible(bool(text))

    def set_versions(self, index: int, count: int) -> None:
        """Shows "‹ index/count ›" when the message has more than one version."""
        self.version_index, self.version_count = index, count
        self.version_label.setText(f"{index}/{count}")
        self.version_label.setAccessibleName(f"Version {index} of {count}")
        for w in (self.version_prev, self.version_label, self.version_next):
            w.setVisible(count > 1)
        self._update_version_buttons()

    def _update_version_buttons(self) -> None:
        self.version_prev.setEnabled(not self._busy and self.version_index > 1)
        self.version_next.setEnabled(not self._busy and self.version_index < self.version_count)

    def set_actions(self, last_assistant: bool, busy: bool = False,
                    can_continue: bool = True) -> None:
        """can_continue: the model can extend a reply (an endpoint's cannot)."""
        self._busy = busy
        self._update_version_buttons()
        self.edit_button.setVisible(self.role == "user")
        self.edit_button.setEnabled(not busy)
        self.regenerate_button.setVisible(self.role == "assistant" and last_assistant)
        self.continue_button.setVisible(self.role == "assistant" and last_assistant
                                        and can_continue)
        self.regenerate_button.setEnabled(not busy)
        self.continue_button.setEnabled(not busy)
        self._last_assistant = last_assistant
        self._update_bottom_actions()

    def set_long(self, on: bool) -> None:
        """Taller than the view: the reply's actions at its end too."""
        if on != self.long:
            self.long = on
            self._update_bottom_actions()

    def _update_bottom_actions(self) -> None:
        reply = self.long and self.role == "assistant" and not self.streaming
        self.bottom_copy.setVisible(reply)
        for bottom, top in ((self.bottom_regenerate, self.regenerate_button),
                            (self.bottom_continue, self.continue_button)):
            bottom.setVisible(reply and self._last_assistant)
            bottom.setEnabled(top.isEnabled())

    # actions
    def copy(self) -> None:
        QGuiApplication.clipboard().setText(self.answer_text)
        for b in (self.copy_button, self.bottom_copy):
            b.setText("Copied")
            QTimer.singleShot(COPIED_MS, b, lambda b=b: b.setText("Copy"))

    def _anchor(self, url: QUrl) -> None:
        s = url.toString()
        if s.startswith("copy-code:"):
            try:
                index = int(s.split(":", 1)[1])
                QGuiApplication.clipboard().setText(self.code_blocks[index])
            except (ValueError, IndexError):
                return
            # the same feedback as the message's Copy button: "Copied", then back
            self.copied_block = index
            self.render()
            QTimer.singleShot(COPIED_MS, self, self._end_copied)
        elif url.scheme() in ("http", "https", "mailto"):
            QDesktopServices.openUrl(url)  # the user's browser, never the app itself

    def _end_copied(self) -> None:
        if self.copied_block is not None:
            self.copied_block = None
            self.render()

    def start_edit(self) -> None:
        if self.editor is not None:
            self.editor.setFocus()
            return
        box = QWidget(self)
        v = QVBoxLayout(box)
        v.setContentsMargins(0, 0, 0, 0)
        self.editor = QPlainTextEdit(self.content)
        self.editor.setObjectName("messageEditor")
        self.editor.setMinimumHeight(80)
        v.addWidget(self.editor)
        row = QHBoxLayout()
        row.addStretch(1)
        cancel = _button("Cancel", "cancelEditButton")
        save = _button("Save && send", "saveEditButton", primary=True)
        save.setAccessibleName("Save and send")
        row.addWidget(cancel)
        row.addWidget(save)
        v.addLayout(row)
        cancel.clicked.connect(self.end_edit)
        save.clicked.connect(self._submit_edit)
        self.layout().insertWidget(2, box)
        self.editor_box = box
        self.body.hide()
        self.editor.setFocus()

    def _submit_edit(self) -> None:
        text = self.editor.toPlainText().strip() if self.editor else ""
        if text:
            self.end_edit()
            self.edit_submitted.emit(self.msg_id, text)

    def end_edit(self) -> None:
        if self.editor_box is not None:
            self.editor_box.deleteLater()
        self.editor_box = None
        self.editor = None
        self.body.show()


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


# ---- sidebar -------------------------------------------------------------------------------

class ConversationDelegate(QStyledItemDelegate):
    """Rows as tall as the font needs, and the inline rename editor over the whole row
    (the style would squeeze it into the item's padded text area and clip its text). A date
    that tells equal titles apart goes on a second line, so the title keeps the row's width;
    a short badge ("replying", "queued 2") sits at the right of the title."""

    def sizeHint(self, option, index) -> QSize:
        # no width of its own: a long title is elided to the list's width, never scrolled
        line = option.fontMetrics.height()
        if index.data(DATE_ROLE):
            return QSize(0, max(36, 2 * line + 16))
        return QSize(0, max(36, line + 18))

    def row_layout(self, option, index) -> RowLayout:
        """Where the title, badge and date of a row go, and the title as elided to fit."""
        from PySide6.QtWidgets import QApplication, QStyle, QStyleOptionViewItem
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        style = opt.widget.style() if opt.widget else QApplication.style()
        # the style's own text margin inside the item's text area, as rows without a note
        margin = style.pixelMetric(QStyle.PM_FocusFrameHMargin, None, opt.widget) + 1
        area = style.subElementRect(QStyle.SE_ItemViewItemText, opt, opt.widget).adjusted(
            margin, 0, -margin, 0)
        fm = opt.fontMetrics
        badge = index.data(BADGE_ROLE) or ""
        date = index.data(DATE_ROLE) or ""
        line = fm.height()
        if date:
            top = area.y() + (area.height() - 2 * line) // 2
            title_line = QRect(area.x(), top, area.width(), line)
            date_rect = QRect(area.x(), top + line, area.width(), line)
        else:
            title_line = QRect(area.x(), area.y() + (area.height() - line) // 2,
                               area.width(), line)
            date_rect = QRect()
        badge_w = fm.horizontalAdvance(badge) + 12 if badge else 0
        title_rect = title_line.adjusted(0, 0, -badge_w, 0)
        badge_rect = QRect(title_rect.right() + 1, title_line.y(), badge_w, line)
        title = fm.elidedText(str(index.data(Qt.DisplayRole) or ""), Qt.ElideRight,
                              max(title_rect.width(), 20))
        return RowLayout(title, title_rect, badge, badge_rect, date, date_rect)

    def paint(self, painter, option, index) -> None:
        if not index.data(NOTE_ROLE):
            return super().paint(painter, option, index)
        # these Qt classes are looked up here, on the first note drawn, not at start-up
        from PySide6.QtGui import QPalette
        from PySide6.QtWidgets import QApplication, QStyle, QStyleOptionViewItem
        lay = self.row_layout(option, index)
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        opt.text = ""  # the background and selection from the style, the words from here
        style = opt.widget.style() if opt.widget else QApplication.style()
        style.drawControl(QStyle.CE_ItemViewItem, opt, painter, opt.widget)
        painter.save()
        painter.setPen(opt.palette.color(QPalette.Text))  # the theme's selection keeps it
        painter.drawText(lay.title_rect, Qt.AlignLeft | Qt.AlignVCenter, lay.title)
        painter.setPen(opt.palette.color(QPalette.PlaceholderText))
        if lay.badge:
            painter.drawText(lay.badge_rect, Qt.AlignRight | Qt.AlignVCenter, lay.badge)
        if lay.date:
            painter.drawText(lay.date_rect, Qt.AlignLeft | Qt.AlignVCenter,
                             opt.fontMetrics.elidedText(lay.date, Qt.ElideRight,
                                                        lay.date_rect.width()))
        painter.restore()
        return None

    def updateEditorGeometry(self, editor, option, index) -> None:
        r = option.rect
        h = min(r.height(), max(editor.sizeHint().height(), editor.minimumSizeHint().height()))
        editor.setGeometry(r.x() + 2, r.y() + (r.height() - h) // 2, r.width() - 4, h)


class Sidebar(QFrame):
    new_chat = Signal()
    selected = Signal(int)
    renamed = Signal(int, str)
    delete_requested = Signal(int)
    search_changed = Signal(str)
    undo = Signal()
    context_menu = Signal(int, object)  # conv id, global pos
    show_models = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("sidebar")
        self.setSizePolicy(QSizePolicy.Maximum, QSizePolicy.Preferred)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(12, 14, 12, 10)
        lay.setSpacing(10)
        top = QHBoxLayout()
        title = QLabel("Ember")
        title.setObjectName("sidebarTitle")
        title.setProperty("accent", True)
        top.addWidget(title)
        top.addStretch(1)
        lay.addLayout(top)
        self.new_button = _button("+  New chat", "newChatButton", tip="New chat (Ctrl+N)")
        self.new_button.setAccessibleName("New chat")
        self.new_button.clicked.connect(self.new_chat)
        lay.addWidget(self.new_button)
        self.search = QLineEdit()
        self.search.setObjectName("conversationSearch")
        self.search.setAccessibleName("Search chats")
        self.search.setToolTip("Search chats (Ctrl+F)")
        self.search.setClearButtonEnabled(True)
        self.search.textChanged.connect(self.search_changed)
        lay.addWidget(self.search)
        self.model = ConversationListModel(self)
        self.model.renamed.connect(self.renamed)
        self.list = QListView()
        self.list.setModel(self.model)
        self.list.setObjectName("conversationList")
        self.list.setAccessibleName("Conversations")
        self.list.setEditTriggers(QAbstractItemView.EditKeyPressed
                                  | QAbstractItemView.SelectedClicked)
        self.list.setContextMenuPolicy(Qt.CustomContextMenu)
        self.list.customContextMenuRequested.connect(self._menu)
        self.list.selectionModel().currentChanged.connect(self._current)
        self.list.installEventFilter(self)
        self.list.setVerticalScrollMode(QAbstractItemView.ScrollPerPixel)
        self.list.setTextElideMode(Qt.ElideRight)
        self.list.setItemDelegate(ConversationDelegate(self.list))
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        lay.addWidget(self.list, 1)
        self.empty = QLabel("Your chats will appear here.")
        self.empty.setObjectName("sidebarEmpty")
        self.empty.setProperty("field", True)
        self.empty.setWordWrap(True)
        self.empty.setAlignment(Qt.AlignHCenter | Qt.AlignTop)
        lay.addWidget(self.empty, 1)
        self.models_button = _button("Models", "modelsButton",
                                     tip="The models in your models folder (Ctrl+Shift+M)")
        self.models_button.setCheckable(True)
        self.models_button.clicked.connect(lambda: self.show_models.emit())
        lay.addWidget(self.models_button)
        self.undo_bar = QFrame()
        self.undo_bar.setObjectName("undoBar")
        ub = QHBoxLayout(self.undo_bar)
        ub.setContentsMargins(10, 6, 6, 6)
        self.undo_text = QLabel("Chat deleted")
        self.undo_text.setObjectName("undoText")
        # the chat's title on as many lines as it takes, never cut off under the button
        self.undo_text.setWordWrap(True)
        self.undo_text.setMinimumWidth(1)
        self.undo_text.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Preferred)
        ub.addWidget(self.undo_text, 1)
        self.undo_button = _button("Undo", "undoButton", tip="Bring the chat back (Ctrl+Z)")
        self.undo_button.clicked.connect(self.undo)
        ub.addWidget(self.undo_button)
        self.undo_bar.hide()
        lay.addWidget(self.undo_bar)
        self._filling = False
        self._fit_width()

    # its width in characters of the font: room for a title at any font size, and in a
    # narrow window down to the minimum, so the chat keeps the room it needs
    MIN_CHARS, MAX_CHARS = 18, 24
    SEARCH_PLACEHOLDERS = ("Search chats  (Ctrl+F)", "Search chats", "Search")

    def _fit_width(self) -> None:
        avg = self.fontMetrics().averageCharWidth()
        m = self.layout().contentsMargins()
        self.setMinimumWidth(max(210, self.MIN_CHARS * avg + m.left() + m.right()))
        self.widest = max(260, self.MAX_CHARS * avg + m.left() + m.right())
        self.setMaximumWidth(self.widest)
        self._fit_placeholder()

    def limit_width(self, room: int) -> None:
        """At most room px wide (never under its minimum): what the chat leaves it."""
        self.setMaximumWidth(max(self.minimumWidth(), min(self.widest, room)))

    def _fit_placeholder(self) -> None:
        self.search.setPlaceholderText(fitted_text(self.search.fontMetrics(),
                                                   text_area_width(self.search),
                                                   self.SEARCH_PLACEHOLDERS))

    def sizeHint(self) -> QSize:
        return QSize(self.maximumWidth(), super().sizeHint().height())

    def changeEvent(self, e) -> None:
        super().changeEvent(e)
        if e.type() in (QEvent.FontChange, QEvent.StyleChange):
            self._fit_width()

    def resizeEvent(self, e) -> None:
        super().resizeEvent(e)
        self._fit_placeholder()

    def eventFilter(self, obj, e):
        if obj is self.list and e.type() == QEvent.KeyPress and e.key() == Qt.Key_Delete:
            cid = self.current_id()
            if cid is not None:
                self.delete_requested.emit(cid)
                return True
        return super().eventFilter(obj, e)

    def fill(self, conversations, current: int | None) -> None:
        self._filling = True
        self.model.set_conversations(conversations)
        self.select(current)
        self._filling = False
        empty = self.model.rowCount() == 0
        self.list.setVisible(not empty)
        self.empty.setVisible(empty)
        self.empty.setText("No chats match." if self.search.text() else
                           "Your chats will appear here.")

    def set_badges(self, badges: dict[int, str]) -> None:
        """Marks chats that are replying or waiting in the queue ("queued 1")."""
        self.model.set_badges(badges)

    def current_id(self) -> int | None:
        index = self.list.currentIndex()
        return self.model.id_at(index.row()) if index.isValid() else None

    def index_for(self, conv_id: int):
        row = self.model.row_of(conv_id)
        return self.model.index(row) if row is not None else None

    def select(self, conv_id: int | None) -> None:
        index = self.index_for(conv_id) if conv_id is not None else None
        if index is not None:
            filling, self._filling = self._filling, True
            self.list.setCurrentIndex(index)
            self._filling = filling

    def set_title(self, conv_id: int, title: str) -> None:
        self.model.set_title(conv_id, title)

    def rename(self, conv_id: int) -> None:
        index = self.index_for(conv_id)
        if index is not None:
            self.list.edit(index)

    def _current(self, index, _prev) -> None:
        if index.isValid() and not self._filling:
            self.selected.emit(self.model.id_at(index.row()))

    def _menu(self, pos) -> None:
        index = self.list.indexAt(pos)
        if index.isValid():
            self.context_menu.emit(self.model.id_at(index.row()), self.list.mapToGlobal(pos))

    def show_undo(self, text: str) -> None:
        self.undo_text.setText(text)
        self.undo_bar.show()


# ---- model card -----------------------------------------------------------------------------

class ModelCard(QFrame):
    cancel_load = Signal()
    open_model = Signal()

    FIELDS = (("modelArch", "Architecture"), ("modelParams", "Parameters"),
              ("modelQuant", "Quantization"), ("modelFileSize", "File size"),
              ("modelTrainedContext", "Trained context"), ("modelHeads", "Attention heads"),
              ("modelContext", "Context"),
              ("modelRamEstimate", "Estimated RAM"), ("modelTemplate", "Prompt format"))

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
        params = human_count(info["n_params"])
        v = self.values
        v["modelArch"].setText(info["arch"])
        v["modelParams"].setText(params)
        v["modelParams"].setToolTip(f"{info['n_params']:,} parameters"
                                    + (f" ({size})" if size else ""))
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
        self.values["modelRamEstimate"].setText("≈ " + human_bytes(estimate_ram(self.info, n_ctx)))
        self.values["modelRamEstimate"].setToolTip(
            f"Weights {human_bytes(self.info['file_size'])} plus the KV cache and working "
            f"memory for a {n_ctx:,}-token context")
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
