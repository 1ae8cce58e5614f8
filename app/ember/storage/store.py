"""Chat history in SQLite (WAL) in the data folder.

The schema is versioned with ``PRAGMA user_version`` and upgraded by the ordered
migrations below, each in its own transaction. Assistant replies are written while
they stream (``update_message`` commits every batch), so if the process is killed
at most the last batch of text is lost; such a reply keeps ``complete = 0``.

Deleting a conversation is soft (``deleted_at``) so it can be undone; ``purge_deleted``
removes them for good.

Messages form a tree (schema 3): each has a ``parent_id`` (NULL for a chat's first
message), and Edit and Regenerate add a sibling beside the message they replace instead of
deleting it, so every earlier version stays. Among siblings one is ``active``; following the
active child from the root gives the conversation as shown and as sent to the model, which is
what ``messages()`` returns. ``versions()`` and ``select_version()`` move between siblings.

Presets (schema 4) are named system prompts with sampling settings; a chat may point at one
(``conversations.preset_id``), and its replies then use the preset's settings."""
from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ..chat.reasoning import strip_thoughts
from .paths import data_dir

EXPORT_FORMAT = "ember-chat-export"
# 2: each conversation also carries "versions", every message of its tree (the ones Edit
# and Regenerate kept beside the shown ones); "messages" stays the conversation as shown
EXPORT_VERSION = 2
ROLES = ("system", "user", "assistant")

# Each entry upgrades the schema from version i to i + 1.
MIGRATIONS: list[str] = [
    # 1: conversations and messages
    """
    CREATE TABLE conversations (
        id            INTEGER PRIMARY KEY AUTOINCREMENT,
        title         TEXT NOT NULL DEFAULT 'New chat',
        system_prompt TEXT NOT NULL DEFAULT '',
        model_path    TEXT,
        created       REAL NOT NULL,
        updated       REAL NOT NULL
    );
    CREATE TABLE messages (
        id              INTEGER PRIMARY KEY AUTOINCREMENT,
        conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
        role            TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant')),
        content         TEXT NOT NULL DEFAULT '',
        created         REAL NOT NULL,
        complete        INTEGER NOT NULL DEFAULT 1
    );
    CREATE INDEX messages_by_conversation ON messages(conversation_id, id);
    """,
    # 2: soft delete (undo), per-message generation details
    """
    ALTER TABLE conversations ADD COLUMN deleted_at REAL;
    ALTER TABLE messages ADD COLUMN meta TEXT NOT NULL DEFAULT '{}';
    CREATE INDEX conversations_by_updated ON conversations(updated);
    """,
    # 3: versions: messages form a tree (a chain for every existing conversation)
    """
    ALTER TABLE messages ADD COLUMN parent_id INTEGER REFERENCES messages(id) ON DELETE CASCADE;
    ALTER TABLE messages ADD COLUMN active INTEGER NOT NULL DEFAULT 1;
    UPDATE messages SET parent_id = (SELECT MAX(p.id) FROM messages p
                                     WHERE p.conversation_id = messages.conversation_id
                                       AND p.id < messages.id);
    CREATE INDEX messages_by_parent ON messages(parent_id);
    """,
    # 4: presets (a named system prompt and sampling settings), chosen per chat
    """
    CREATE TABLE presets (
        id            INTEGER PRIMARY KEY AUTOINCREMENT,
        name          TEXT NOT NULL UNIQUE,
        system_prompt TEXT NOT NULL DEFAULT '',
        params        TEXT NOT NULL DEFAULT '{}',
        created       REAL NOT NULL
    );
    ALTER TABLE conversations ADD COLUMN preset_id INTEGER
        REFERENCES presets(id) ON DELETE SET NULL;
    """,
    # 5: pins: a pinned chat is listed first; when it was pinned (NULL: not pinned)
    """
    ALTER TABLE conversations ADD COLUMN pinned_at REAL;
    """,
]
SCHEMA_VERSION = len(MIGRATIONS)


class StoreError(Exception):
    pass


def describe_write_error(exc: sqlite3.Error, path: Path) -> str:
    """A write that failed, in words a user can act on."""
    text = str(exc).lower()
    if "full" in text:  # SQLITE_FULL: the disk (or the file system's quota) is full
        why = "the disk is full"
    elif "readonly" in text or "read-only" in text:
        why = "the history file is read-only"
    elif "locked" in text or "busy" in text:
        why = "another program is holding the history file locked"
    else:
        why = str(exc)
    return (f"Could not save to {path}: {why}. The chat stays open and what was already "
            "saved is kept; it will be saved once writing works again.")


def _writes(method):
    """Write methods raise StoreError (with describe_write_error's words) on a failed write."""
    def wrapper(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except sqlite3.OperationalError as exc:
            raise StoreError(describe_write_error(exc, self.path)) from exc
    wrapper.__name__, wrapper.__doc__ = method.__name__, method.__doc__
    return wrapper


@dataclass
class Message:
    id: int
    conversation_id: int
    role: str
    content: str
    created: float
    complete: bool = True
    meta: dict = field(default_factory=dict)
    parent_id: int | None = None

    def as_chat(self) -> dict:
        return {"role": self.role, "content": self.content}


@dataclass
class Conversation:
    id: int
    title: str
    system_prompt: str
    model_path: str | None
    created: float
    updated: float
    deleted_at: float | None = None
    preset_id: int | None = None
    pinned_at: float | None = None

    @property
    def pinned(self) -> bool:
        return self.pinned_at is not None


@dataclass
class Preset:
    id: int
    name: str
    system_prompt: str = ""
    params: dict = field(default_factory=dict)  # sampling settings by Settings' field names


def default_path() -> Path:
    return data_dir() / "history.sqlite3"


class Store:
    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path else default_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # autocommit mode: every statement outside an explicit transaction commits at once
        self.db = sqlite3.connect(str(self.path), isolation_level=None, timeout=5.0)
        self.db.row_factory = sqlite3.Row
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")  # durable against a killed process
        self.db.execute("PRAGMA foreign_keys=ON")
        self.migrate()

    # ---- schema -----------------------------------------------------------------
    @property
    def schema_version(self) -> int:
        return int(self.db.execute("PRAGMA user_version").fetchone()[0])

    def migrate(self) -> None:
        version = self.schema_version
        if version > SCHEMA_VERSION:
            raise StoreError(f"{self.path} was written by a newer Ember (schema {version}, "
                             f"this version knows {SCHEMA_VERSION})")
        for v in range(version, SCHEMA_VERSION):
            self.db.execute("BEGIN IMMEDIATE")
            try:
                for stmt in _statements(MIGRATIONS[v]):
                    self.db.execute(stmt)
                self.db.execute(f"PRAGMA user_version = {v + 1}")
                self.db.execute("COMMIT")
            except BaseException:
                self._rollback()
                raise

    def _rollback(self) -> None:
        # SQLite has already rolled back after some errors (SQLITE_FULL among them); a
        # second ROLLBACK would raise and hide the error that matters
        if self.db.in_transaction:
            self.db.execute("ROLLBACK")

    def close(self) -> None:
        if self.db is not None:
            self.db.close()
            self.db = None

    # ---- conversations --------------------------------------------------------------
    @_writes
    def create_conversation(self, title: str = "New chat", system_prompt: str = "",
                            model_path: str | None = None, created: float | None = None) -> int:
        now = created if created is not None else time.time()
        cur = self.db.execute(
            "INSERT INTO conversations(title, system_prompt, model_path, created, updated) "
            "VALUES (?, ?, ?, ?, ?)", (title, system_prompt, model_path, now, now))
        return int(cur.lastrowid)

    def conversation(self, conv_id: int) -> Conversation | None:
        row = self.db.execute("SELECT * FROM conversations WHERE id = ?", (conv_id,)).fetchone()
        return _conversation(row) if row else None

    def conversations(self, query: str = "", include_deleted: bool = False) -> list[Conversation]:
        """Pinned chats first, then the rest, each newest first; query matches the title or
        any message (case-insensitive)."""
        sql = "SELECT * FROM conversations c WHERE 1"
        args: list = []
        if not include_deleted:
            sql += " AND deleted_at IS NULL"
        q = query.strip()
        if q:
            like = "%" + q.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
            sql += (" AND (title LIKE ? ESCAPE '\\' OR EXISTS (SELECT 1 FROM messages m WHERE "
                    "m.conversation_id = c.id AND m.content LIKE ? ESCAPE '\\'))")
            args += [like, like]
        sql += " ORDER BY pinned_at IS NULL, updated DESC, id DESC"
        return [_conversation(r) for r in self.db.execute(sql, args)]

    @_writes
    def update_conversation(self, conv_id: int, *, title: str | None = None,
                            system_prompt: str | None = None, model_path: str | None = None,
                            touch: bool = False) -> None:
        sets, args = [], []
        for name, value in (("title", title), ("system_prompt", system_prompt),
                            ("model_path", model_path)):
            if value is not None:
                sets.append(f"{name} = ?")
                args.append(value)
        if touch:
            sets.append("updated = ?")
            args.append(time.time())
        if sets:
            self.db.execute(f"UPDATE conversations SET {', '.join(sets)} WHERE id = ?",
                            (*args, conv_id))

    def rename_conversation(self, conv_id: int, title: str) -> None:
        self.update_conversation(conv_id, title=title.strip() or "Untitled")

    @_writes
    def set_pinned(self, conv_id: int, pinned: bool) -> None:
        """Pins (listed first) or unpins a chat; pinning a pinned chat keeps its time."""
        if pinned:
            self.db.execute("UPDATE conversations SET pinned_at = COALESCE(pinned_at, ?) "
                            "WHERE id = ?", (time.time(), conv_id))
        else:
            self.db.execute("UPDATE conversations SET pinned_at = NULL WHERE id = ?",
                            (conv_id,))

    def delete_conversation(self, conv_id: int) -> None:
        """Soft delete: hidden from lists until restore_conversation or purge_deleted."""
        self.db.execute("UPDATE conversations SET deleted_at = ? WHERE id = ?",
                        (time.time(), conv_id))

    def restore_conversation(self, conv_id: int) -> None:
        self.db.execute("UPDATE conversations SET deleted_at = NULL WHERE id = ?", (conv_id,))

    def purge_deleted(self, older_than: float | None = None) -> int:
        """Removes soft-deleted conversations (deleted before older_than, if given)."""
        cutoff = older_than if older_than is not None else float("inf")
        cur = self.db.execute("DELETE FROM conversations WHERE deleted_at IS NOT NULL "
                              "AND deleted_at < ?", (cutoff,))
        return cur.rowcount

    # ---- presets ----------------------------------------------------------------------
    def presets(self) -> list[Preset]:
        """By name (case-insensitive)."""
        return [_preset(r) for r in self.db.execute(
            "SELECT * FROM presets ORDER BY name COLLATE NOCASE, id")]

    def preset(self, preset_id: int | None) -> Preset | None:
        if preset_id is None:
            return None
        row = self.db.execute("SELECT * FROM presets WHERE id = ?", (preset_id,)).fetchone()
        return _preset(row) if row else None

    @_writes
    def save_preset(self, name: str, system_prompt: str = "", params: dict | None = None,
                    preset_id: int | None = None) -> int:
        """Adds a preset, or changes preset_id's; a name another preset has is a
        StoreError."""
        name = name.strip()
        if not name:
            raise StoreError("a preset needs a name")
        clash = self.db.execute("SELECT id FROM presets WHERE name = ? COLLATE NOCASE "
                                "AND id IS NOT ?", (name, preset_id)).fetchone()
        if clash:
            raise StoreError(f"there is already a preset named {name!r}")
        body = json.dumps(params or {})
        if preset_id is None:
            cur = self.db.execute("INSERT INTO presets(name, system_prompt, params, created) "
                                  "VALUES (?, ?, ?, ?)", (name, system_prompt, body, time.time()))
            return int(cur.lastrowid)
        self.db.execute("UPDATE presets SET name = ?, system_prompt = ?, params = ? "
                        "WHERE id = ?", (name, system_prompt, body, preset_id))
        return preset_id

    @_writes
    def delete_preset(self, preset_id: int) -> None:
        """The chats that used it keep their system prompt and use Settings' sampling."""
        self.db.execute("DELETE FROM presets WHERE id = ?", (preset_id,))

    @_writes
    def set_conversation_preset(self, conv_id: int, preset_id: int | None) -> None:
        self.db.execute("UPDATE conversations SET preset_id = ? WHERE id = ?",
                        (preset_id, conv_id))

    # ---- messages -------------------------------------------------------------------
    _TAIL = object()

    @_writes
    def add_message(self, conv_id: int, role: str, content: str, *, complete: bool = True,
                    meta: dict | None = None, created: float | None = None,
                    parent_id: int | None | object = _TAIL) -> int:
        """Adds a message after parent_id (by default after the last message shown) as the
        active one among its siblings: a new version beside them when there are some."""
        if role not in ROLES:
            raise StoreError(f"unknown role {role!r}")
        now = created if created is not None else time.time()
        if parent_id is Store._TAIL:
            path = self.messages(conv_id)
            parent_id = path[-1].id if path else None
        self.db.execute("BEGIN")
        try:
            self._deactivate_children(conv_id, parent_id)
            cur = self.db.execute(
                "INSERT INTO messages(conversation_id, role, content, created, complete, meta, "
                "parent_id, active) VALUES (?, ?, ?, ?, ?, ?, ?, 1)",
                (conv_id, role, content, now, int(complete), json.dumps(meta or {}),
                 parent_id))
            self.db.execute("UPDATE conversations SET updated = ? WHERE id = ?",
                            (max(now, time.time()), conv_id))
            self.db.execute("COMMIT")
        except BaseException:
            self._rollback()
            raise
        return int(cur.lastrowid)

    @_writes
    def update_message(self, msg_id: int, *, content: str | None = None,
                       complete: bool | None = None, meta: dict | None = None) -> None:
        """Commits at once: called for every streamed batch of an assistant reply."""
        sets, args = [], []
        if content is not None:
            sets.append("content = ?")
            args.append(content)
        if complete is not None:
            sets.append("complete = ?")
            args.append(int(complete))
        if meta is not None:
            sets.append("meta = ?")
            args.append(json.dumps(meta))
        if sets:
            self.db.execute(f"UPDATE messages SET {', '.join(sets)} WHERE id = ?",
                            (*args, msg_id))

    def message(self, msg_id: int) -> Message | None:
        row = self.db.execute("SELECT * FROM messages WHERE id = ?", (msg_id,)).fetchone()
        return _message(row) if row else None

    def _deactivate_children(self, conv_id: int, parent_id: int | None) -> None:
        if parent_id is None:
            self.db.execute("UPDATE messages SET active = 0 WHERE conversation_id = ? "
                            "AND parent_id IS NULL", (conv_id,))
        else:
            self.db.execute("UPDATE messages SET active = 0 WHERE parent_id = ?", (parent_id,))

    def _tree(self, conv_id: int) -> dict[int | None, list]:
        children: dict[int | None, list] = {}
        for r in self.db.execute("SELECT * FROM messages WHERE conversation_id = ? ORDER BY id",
                                 (conv_id,)):
            children.setdefault(r["parent_id"], []).append(r)
        return children

    def messages(self, conv_id: int) -> list[Message]:
        """The conversation as shown: from the first message, the active version at each
        turn (the newest where none is marked)."""
        children = self._tree(conv_id)
        path, parent, seen = [], None, set()
        while parent in children and parent not in seen:
            seen.add(parent)
            rows = children[parent]
            row = next((r for r in reversed(rows) if r["active"]), rows[-1])
            path.append(_message(row))
            parent = row["id"]
        return path

    def all_messages(self, conv_id: int) -> list[Message]:
        """Every message of the conversation, every version, in the order written."""
        return [_message(r) for r in self.db.execute(
            "SELECT * FROM messages WHERE conversation_id = ? ORDER BY id", (conv_id,))]

    def versions(self, msg_id: int) -> list[int]:
        """The ids of msg_id's versions (itself and its siblings), oldest first."""
        row = self.db.execute("SELECT conversation_id, parent_id FROM messages WHERE id = ?",
                              (msg_id,)).fetchone()
        if row is None:
            return []
        if row["parent_id"] is None:
            cur = self.db.execute("SELECT id FROM messages WHERE conversation_id = ? AND "
                                  "parent_id IS NULL ORDER BY id", (row["conversation_id"],))
        else:
            cur = self.db.execute("SELECT id FROM messages WHERE parent_id = ? ORDER BY id",
                                  (row["parent_id"],))
        return [int(r[0]) for r in cur]

    def version_counts(self, conv_id: int) -> dict[int, tuple[int, int]]:
        """msg_id -> (its 1-based number among its versions, how many there are)."""
        out = {}
        for rows in self._tree(conv_id).values():
            for i, r in enumerate(rows):
                out[int(r["id"])] = (i + 1, len(rows))
        return out

    def select_version(self, msg_id: int) -> None:
        """Shows msg_id (and the branch under it) instead of its siblings."""
        row = self.db.execute("SELECT conversation_id, parent_id FROM messages WHERE id = ?",
                              (msg_id,)).fetchone()
        if row is None:
            return
        self.db.execute("BEGIN")
        try:
            self._deactivate_children(row["conversation_id"], row["parent_id"])
            self.db.execute("UPDATE messages SET active = 1 WHERE id = ?", (msg_id,))
            self.db.execute("COMMIT")
        except BaseException:
            self._rollback()
            raise

    @_writes
    def delete_message(self, msg_id: int) -> None:
        """Deletes a message with the branch under it; the newest remaining version
        beside it (if any) is shown in its place."""
        row = self.db.execute("SELECT conversation_id, parent_id, active FROM messages "
                              "WHERE id = ?", (msg_id,)).fetchone()
        if row is None:
            return
        self.db.execute("BEGIN")
        try:
            self.db.execute("DELETE FROM messages WHERE id = ?", (msg_id,))
            if row["active"]:
                if row["parent_id"] is None:
                    self.db.execute(
                        "UPDATE messages SET active = 1 WHERE id = (SELECT MAX(id) FROM messages "
                        "WHERE conversation_id = ? AND parent_id IS NULL)",
                        (row["conversation_id"],))
                else:
                    self.db.execute(
                        "UPDATE messages SET active = 1 WHERE id = (SELECT MAX(id) FROM messages "
                        "WHERE parent_id = ?)", (row["parent_id"],))
            self.db.execute("COMMIT")
        except BaseException:
            self._rollback()
            raise

    def delete_messages_after(self, conv_id: int, msg_id: int) -> int:
        """Drops every message shown after msg_id, with their versions (the branch under
        msg_id)."""
        count = "SELECT COUNT(*) FROM messages WHERE conversation_id = ?"
        before = self.db.execute(count, (conv_id,)).fetchone()[0]
        self.db.execute("DELETE FROM messages WHERE parent_id = ?", (msg_id,))
        return before - self.db.execute(count, (conv_id,)).fetchone()[0]

    # ---- export / import --------------------------------------------------------------
    def export_markdown(self, conv_id: int) -> str:
        conv = self.conversation(conv_id)
        if conv is None:
            raise StoreError(f"no conversation {conv_id}")
        lines = [f"# {conv.title}", ""]
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(conv.created))
        lines += [f"*Exported from Ember; started {when}"
                  + (f"; model `{Path(conv.model_path).name}`" if conv.model_path else "")
                  + "*", ""]
        if conv.system_prompt:
            lines += ["## System", "", conv.system_prompt, ""]
        names = {"user": "You", "assistant": "Assistant", "system": "System"}
        counts = self.version_counts(conv_id)
        for m in self.messages(conv_id):
            # a reply's reasoning stays in the database and the JSON export, not here
            text = strip_thoughts(m.content) if m.role == "assistant" else m.content
            lines += [f"## {names.get(m.role, m.role)}", ""]
            n, of = counts.get(m.id, (1, 1))
            if of > 1:  # the others are in the JSON export
                lines += [f"*(version {n} of {of})*", ""]
            lines += [text.rstrip(), ""]
            if not m.complete:
                lines += ["*(interrupted)*", ""]
        return "\n".join(lines).rstrip() + "\n"

    def export_json(self, conv_ids: Iterable[int] | None = None) -> dict:
        ids = list(conv_ids) if conv_ids is not None else [c.id for c in self.conversations()]
        out = []
        for cid in ids:
            c = self.conversation(cid)
            if c is None:
                continue
            out.append({
                "title": c.title, "system_prompt": c.system_prompt, "model_path": c.model_path,
                "created": c.created, "updated": c.updated,
                "messages": [{"role": m.role, "content": m.content, "created": m.created,
                              "complete": m.complete, "meta": m.meta}
                             for m in self.messages(cid)],
                "versions": self._export_tree(cid),
            })
        return {"format": EXPORT_FORMAT, "version": EXPORT_VERSION, "conversations": out}

    def _export_tree(self, conv_id: int) -> list[dict]:
        """Every message with its place in the tree: "key" (its position in this list),
        "parent" (the parent's key, None for a first message) and "active"."""
        rows = list(self.db.execute("SELECT * FROM messages WHERE conversation_id = ? "
                                    "ORDER BY id", (conv_id,)))
        key = {int(r["id"]): i for i, r in enumerate(rows)}
        return [{"key": i, "parent": key.get(r["parent_id"]), "active": bool(r["active"]),
                 "role": r["role"], "content": r["content"], "created": r["created"],
                 "complete": bool(r["complete"]), "meta": json.loads(r["meta"] or "{}")}
                for i, r in enumerate(rows)]

    def _import_tree(self, cid: int, versions: list, created: float) -> None:
        ids: dict[int, int] = {}
        for v in versions:
            if not isinstance(v, dict) or v.get("role") not in ROLES:
                raise StoreError("a version must be an object with a known role")
            parent = v.get("parent")
            if parent is not None and parent not in ids:
                raise StoreError(f"a version's parent {parent!r} comes later or is missing")
            cur = self.db.execute(
                "INSERT INTO messages(conversation_id, role, content, created, complete, meta, "
                "parent_id, active) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (cid, v["role"], str(v.get("content") or ""),
                 float(v.get("created") or created), int(bool(v.get("complete", True))),
                 json.dumps(v.get("meta") if isinstance(v.get("meta"), dict) else {}),
                 ids.get(parent), int(bool(v.get("active", True)))))
            ids[v.get("key", len(ids))] = int(cur.lastrowid)

    def import_json(self, data: dict | str) -> list[int]:
        """Adds the conversations of an export that are not here yet; returns their ids.
        Raises StoreError (and adds nothing) if the data is not an Ember export."""
        return self.import_export(data).new_ids

    def import_export(self, data: dict | str) -> ImportResult:
        """import_json, also counting the export's chats that were already here (same
        start time and the same messages as shown: see chat_fingerprint), which are skipped,
        so importing a file twice adds its chats once."""
        if isinstance(data, str):
            try:
                data = json.loads(data)
            except ValueError as e:
                raise StoreError(f"not JSON: {e}") from e
        if not isinstance(data, dict) or data.get("format") != EXPORT_FORMAT:
            raise StoreError("not an Ember chat export (missing \"format\": "
                             f"\"{EXPORT_FORMAT}\")")
        if int(data.get("version", 0)) > EXPORT_VERSION:
            raise StoreError(f"export version {data.get('version')} is newer than this Ember")
        convs = data.get("conversations")
        if not isinstance(convs, list):
            raise StoreError("\"conversations\" must be a list")
        new_ids = []
        here = {self._fingerprint(conv) for conv in self.conversations()}
        already = 0
        self.db.execute("BEGIN")
        try:
            for c in convs:
                if not isinstance(c, dict) or not isinstance(c.get("messages", []), list):
                    raise StoreError("a conversation must be an object with a messages list")
                if c.get("created"):  # as imported: a message without a time gets the chat's
                    start = float(c["created"])
                    key = chat_fingerprint(start, [
                        (m.get("role"), str(m.get("content") or ""), m.get("created") or start)
                        for m in c.get("messages", []) if isinstance(m, dict)])
                    if key in here:
                        already += 1
                        continue
                    here.add(key)  # the same chat twice in one file is imported once
                now = time.time()
                created = float(c.get("created") or now)
                cur = self.db.execute(
                    "INSERT INTO conversations(title, system_prompt, model_path, created, "
                    "updated) VALUES (?, ?, ?, ?, ?)",
                    (str(c.get("title") or "Imported chat"), str(c.get("system_prompt") or ""),
                     c.get("model_path"), created, float(c.get("updated") or created)))
                cid = int(cur.lastrowid)
                if isinstance(c.get("versions"), list) and c["versions"]:
                    self._import_tree(cid, c["versions"], created)
                    new_ids.append(cid)
                    continue
                parent = None
                for m in c.get("messages", []):
                    role = m.get("role") if isinstance(m, dict) else None
                    if role not in ROLES:
                        raise StoreError(f"a message has an unknown role {role!r}")
                    cur = self.db.execute(
                        "INSERT INTO messages(conversation_id, role, content, created, "
                        "complete, meta, parent_id) VALUES (?, ?, ?, ?, ?, ?, ?)",
                        (cid, role, str(m.get("content") or ""),
                         float(m.get("created") or created), int(bool(m.get("complete", True))),
                         json.dumps(m.get("meta") if isinstance(m.get("meta"), dict) else {}),
                         parent))
                    parent = int(cur.lastrowid)
                new_ids.append(cid)
            self.db.execute("COMMIT")
        except (StoreError, TypeError, ValueError, AttributeError) as e:
            self._rollback()
            raise e if isinstance(e, StoreError) else StoreError(f"bad export: {e}") from e
        return ImportResult(new_ids, already)

    def _fingerprint(self, conv: Conversation) -> str:
        return chat_fingerprint(conv.created, [(m.role, m.content, m.created)
                                               for m in self.messages(conv.id)])


@dataclass
class ImportResult:
    new_ids: list[int]  # the chats added
    already_here: int  # the export's chats skipped as already in the store

    def summary(self) -> str:
        """ "2 chats imported, 3 already here" """
        n = len(self.new_ids)
        text = f"{n} chat{'s' if n != 1 else ''} imported"
        return text + (f", {self.already_here} already here" if self.already_here else "")


def chat_fingerprint(created: float, messages: Iterable[tuple]) -> str:
    """What makes two copies of a chat the same one: when it was started and its messages
    as shown (role, text, time written), each to the microsecond. The title is left out,
    so a chat renamed here is still recognised in an older export."""
    body = [round(float(created), 6), [[r, c, round(float(t), 6)] for r, c, t in messages]]
    return hashlib.sha256(json.dumps(body, ensure_ascii=False).encode("utf-8")).hexdigest()


def _statements(script: str) -> list[str]:
    return [s.strip() for s in script.split(";") if s.strip()]


def _conversation(row) -> Conversation:
    return Conversation(row["id"], row["title"], row["system_prompt"], row["model_path"],
                        row["created"], row["updated"], row["deleted_at"], row["preset_id"],
                        row["pinned_at"])


def _preset(row) -> Preset:
    try:
        params = json.loads(row["params"] or "{}")
    except ValueError:
        params = {}
    return Preset(row["id"], row["name"], row["system_prompt"],
                  params if isinstance(params, dict) else {})


def _message(row) -> Message:
    try:
        meta = json.loads(row["meta"] or "{}")
    except ValueError:
        meta = {}
    return Message(row["id"], row["conversation_id"], row["role"], row["content"],
                   row["created"], bool(row["complete"]), meta, row["parent_id"])
