"""The sidebar's list of chats as a Qt item model: one row per conversation (pinned ones
first under a "Pinned" header, then newest first), its title editable in place, and a note
at the right ("replying", "queued 2", or the start date that tells two chats of the same
title apart)."""
from __future__ import annotations

import time
from dataclasses import dataclass

from PySide6.QtCore import QAbstractListModel, QModelIndex, QRect, Qt, Signal

ID_ROLE = Qt.UserRole
NOTE_ROLE = Qt.UserRole + 1
BADGE_ROLE = Qt.UserRole + 2
DATE_ROLE = Qt.UserRole + 3
HEADER_ROLE = Qt.UserRole + 4  # a group's header row ("Pinned", "Chats"), not a chat
PINNED_ROLE = Qt.UserRole + 5

PINNED_HEADER, OTHERS_HEADER = "Pinned", "Chats"


def day(ts: float) -> str:
    """A date that tells two chats of the same title apart ("3 Nov 14:05")."""
    t = time.localtime(ts)
    return f"{t.tm_mday} {time.strftime('%b', t)} {time.strftime('%H:%M', t)}"


@dataclass
class RowLayout:
    """Where a sidebar row's parts are drawn (ConversationDelegate.row_layout)."""
    title: str  # as drawn: elided to title_rect's width
    title_rect: QRect
    badge: str
    badge_rect: QRect
    date: str
    date_rect: QRect  # empty without a date


@dataclass
class _Row:
    id: int | None  # None: a header
    title: str
    created: float
    badge: str = ""
    same_title: bool = False  # another chat in the list has this title
    pinned: bool = False

    @property
    def header(self) -> bool:
        return self.id is None


class ConversationListModel(QAbstractListModel):
    renamed = Signal(int, str)  # conv id, the title the user typed (not yet cleaned)

    def __init__(self, parent=None):
        super().__init__(parent)
        self._rows: list[_Row] = []
        self._badges: dict[int, str] = {}

    # ---- filling ---------------------------------------------------------------------------
    def set_conversations(self, conversations) -> None:
        self.beginResetModel()
        chats = [_Row(c.id, c.title, c.created, self._badges.get(c.id, ""),
                      pinned=bool(getattr(c, "pinned", False))) for c in conversations]
        pinned = [r for r in chats if r.pinned]
        if pinned:  # the store lists pinned chats first; headers only where there are some
            rest = [r for r in chats if not r.pinned]
            chats = [_Row(None, PINNED_HEADER, 0.0), *pinned]
            if rest:
                chats += [_Row(None, OTHERS_HEADER, 0.0), *rest]
        self._rows = chats
        self._mark_same_titles()
        self.endResetModel()

    def _mark_same_titles(self) -> None:
        counts: dict[str, int] = {}
        chats = [r for r in self._rows if not r.header]
        for r in chats:
            counts[r.title] = counts.get(r.title, 0) + 1
        for r in chats:
            r.same_title = counts[r.title] > 1

    def set_title(self, conv_id: int, title: str) -> None:
        """A rename done elsewhere (the store has it already): no renamed signal."""
        i = self.row_of(conv_id)
        if i is None:
            return
        self._rows[i].title = title
        self._mark_same_titles()
        self.dataChanged.emit(self.index(0), self.index(len(self._rows) - 1))

    def set_badges(self, badges: dict[int, str]) -> None:
        self._badges = dict(badges)
        for i, r in enumerate(self._rows):
            badge = badges.get(r.id, "")
            if r.badge != badge:
                r.badge = badge
                self.dataChanged.emit(self.index(i), self.index(i),
                                      [NOTE_ROLE, BADGE_ROLE])

    # ---- lookups ---------------------------------------------------------------------------
    def row_of(self, conv_id: int) -> int | None:
        if conv_id is None:
            return None
        return next((i for i, r in enumerate(self._rows) if r.id == conv_id), None)

    def pinned(self, conv_id: int) -> bool:
        i = self.row_of(conv_id)
        return i is not None and self._rows[i].pinned

    def id_at(self, row: int) -> int | None:
        return self._rows[row].id if 0 <= row < len(self._rows) else None

    def titles(self) -> list[str]:
        return [r.title for r in self._rows if not r.header]

    def headers(self) -> list[tuple[int, str]]:
        """(row, text) of each group header shown."""
        return [(i, r.title) for i, r in enumerate(self._rows) if r.header]

    # ---- the model interface -----------------------------------------------------------------
    def rowCount(self, parent=QModelIndex()) -> int:  # noqa: B008 (Qt's signature)
        return 0 if parent.isValid() else len(self._rows)

    def data(self, index, role=Qt.DisplayRole):
        if not index.isValid() or not 0 <= index.row() < len(self._rows):
            return None
        r = self._rows[index.row()]
        if r.header:
            return r.title if role in (Qt.DisplayRole, HEADER_ROLE) else None
        date = day(r.created) if r.same_title else ""
        if role in (Qt.DisplayRole, Qt.EditRole):
            return r.title
        if role == Qt.ToolTipRole:
            if not r.same_title:
                return r.title
            return f"{r.title}\nStarted {time.strftime('%Y-%m-%d %H:%M', time.localtime(r.created))}"
        if role == ID_ROLE:
            return r.id
        if role == PINNED_ROLE:
            return r.pinned
        if role == BADGE_ROLE:
            return r.badge
        if role == DATE_ROLE:
            return date
        if role == NOTE_ROLE:
            return " · ".join(t for t in (r.badge, date) if t)
        return None

    def flags(self, index):
        if index.isValid() and self._rows[index.row()].header:
            return Qt.NoItemFlags  # neither selectable nor editable: the arrow keys skip it
        base = super().flags(index)
        return base | Qt.ItemIsEditable if index.isValid() else base

    def setData(self, index, value, role=Qt.EditRole) -> bool:
        if role != Qt.EditRole or not index.isValid():
            return False
        r = self._rows[index.row()]
        if r.header or str(value) == r.title:
            return False
        self.renamed.emit(r.id, str(value))  # the window cleans it, stores it, set_title()s
        return True
