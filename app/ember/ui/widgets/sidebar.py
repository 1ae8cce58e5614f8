"""The chat list: search, new chat, rename, pin, delete with Undo, and how a row is
drawn."""
from __future__ import annotations

from PySide6.QtCore import QEvent, QRect, QSize, Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListView,
    QSizePolicy,
    QStyledItemDelegate,
    QVBoxLayout,
)

from ..conversation_model import (
    BADGE_ROLE,
    DATE_ROLE,
    HEADER_ROLE,
    NOTE_ROLE,
    ConversationListModel,
    RowLayout,
)
from .basics import _button, fitted_text, text_area_width


class ConversationDelegate(QStyledItemDelegate):
    """Rows as tall as the font needs, and the inline rename editor over the whole row
    (the style would squeeze it into the item's padded text area and clip its text). A date
    that tells equal titles apart goes on a second line, so the title keeps the row's width;
    a short badge ("replying", "queued 2") sits at the right of the title. A group's header
    ("Pinned", "Chats") is a short muted line of its own."""

    def sizeHint(self, option, index) -> QSize:
        # no width of its own: a long title is elided to the list's width, never scrolled
        line = option.fontMetrics.height()
        if index.data(HEADER_ROLE):
            return QSize(0, line + 10)
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

    def header_rect(self, option) -> QRect:
        return option.rect.adjusted(10, 4, -10, 0)

    def paint(self, painter, option, index) -> None:
        if index.data(HEADER_ROLE):
            from PySide6.QtGui import QPalette
            painter.save()
            font = painter.font()
            font.setBold(True)
            painter.setFont(font)
            painter.setPen(option.palette.color(QPalette.PlaceholderText))
            painter.drawText(self.header_rect(option), Qt.AlignLeft | Qt.AlignVCenter,
                             str(index.data(HEADER_ROLE)))
            painter.restore()
            return None
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
        cid = self.model.id_at(index.row()) if index.isValid() else None
        if cid is not None and not self._filling:
            self.selected.emit(cid)

    def _menu(self, pos) -> None:
        index = self.list.indexAt(pos)
        cid = self.model.id_at(index.row()) if index.isValid() else None
        if cid is not None:  # a chat's row, not a header
            self.context_menu.emit(cid, self.list.mapToGlobal(pos))

    def show_undo(self, text: str) -> None:
        self.undo_text.setText(text)
        self.undo_bar.show()


# ---- model card -----------------------------------------------------------------------------
