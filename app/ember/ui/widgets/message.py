"""One message of the chat: its text (Markdown, reasoning folded), versions, and actions."""
from __future__ import annotations

import re
import time
from html import escape
from pathlib import Path

from PySide6.QtCore import Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QDesktopServices, QGuiApplication
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from ...chat.reasoning import Reply, split_reply
from .. import markdown
from .basics import AutoTextBrowser, ElidedLabel, HeaderLayout, _button, _tool

COPIED_MS = 1200  # how long "Copied" shows after a copy
ROLE_NAMES = {"user": "You", "assistant": "Assistant", "system": "System"}


_CITATION_MARK = re.compile(r"\[(\d{1,3})\]")
_CODE_SPANS = re.compile(r"(<pre\b.*?</pre>|<code\b.*?</code>)", re.S)


class MessageWidget(QFrame):
    """One message: who, when, the rendered text, and its actions."""

    action = Signal(str, int)  # "copy" | "edit" | "regenerate" | "continue" | "submit-edit"
    edit_submitted = Signal(int, str)
    source_clicked = Signal(int, dict)  # msg_id, the cited passage (documents.grounding)

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
        # the documents a reply was written from, each a link that opens its passage
        self.sources_label = QLabel("")
        self.sources_label.setObjectName("messageSources")
        self.sources_label.setWordWrap(True)
        self.sources_label.setTextFormat(Qt.RichText)
        self.sources_label.linkActivated.connect(self._source_link)
        self.sources_label.hide()
        self.sources: list[dict] = []
        lay.addWidget(self.sources_label)
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
        if self.sources:
            body = self._link_citations(body)
        self.body.setHtml(f'<div style="color:{c["text"]}">{body}</div>')

    def _link_citations(self, html_text: str) -> str:
        """Each [n] of the answer that names a source it was given, a link to the passage;
        code (pre and code elements) is left as written."""
        known = {src["n"] for src in self.sources}

        def link(m):
            n = int(m.group(1))
            return f'<a href="source:{n}">[{n}]</a>' if n in known else m.group(0)
        parts = _CODE_SPANS.split(html_text)
        for i in range(0, len(parts), 2):  # the odd parts are code
            parts[i] = _CITATION_MARK.sub(link, parts[i])
        return "".join(parts)

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

    def set_sources(self, sources: list[dict], cited: list[int]) -> None:
        """The passages the reply was given; those its text cites ([n]) first, the rest
        after "also given"."""
        self.sources = list(sources)

        def link(src):
            label = Path(src["path"]).name + (f", page {src['page']}" if src.get("page") else "")
            return f'<a href="source:{src["n"]}">[{src["n"]}] {escape(label)}</a>'
        first = [src for n in cited for src in sources if src["n"] == n]
        rest = [src for src in sources if src["n"] not in cited]
        parts = []
        if first:
            parts.append("Sources: " + " · ".join(link(x) for x in first))
        if rest:
            parts.append(("Also given: " if first else "Given: ") + " · ".join(link(x) for x in rest))
        self.sources_label.setText("<br>".join(parts))
        self.sources_label.setVisible(bool(sources))
        self.render()  # the answer's [n] become links

    def _source_link(self, href: str) -> None:
        n = int(href.split(":", 1)[1])
        src = next((x for x in self.sources if x["n"] == n), None)
        if src is not None:
            self.source_clicked.emit(self.msg_id, src)

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
        elif s.startswith("source:"):
            self._source_link(s)
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
