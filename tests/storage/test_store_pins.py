"""Pinned chats in the chat database: listed first, kept across a reopen, and a version-4
database (before pins) upgraded keeping its chats, messages and presets, nothing pinned."""
from __future__ import annotations

import sqlite3

from ember.storage.store import MIGRATIONS, SCHEMA_VERSION, Store


def test_a_pinned_chat_is_listed_first_and_stays_pinned_after_a_reopen(tmp_path):
    path = tmp_path / "h.sqlite3"
    s = Store(path)
    old = s.create_conversation(title="old", created=1.0)
    s.create_conversation(title="middle", created=2.0)
    s.create_conversation(title="new", created=3.0)
    s.set_pinned(old, True)
    assert [c.title for c in s.conversations()] == ["old", "new", "middle"]
    when = s.conversation(old).pinned_at
    s.set_pinned(old, True)  # pinned again: the first pin's time kept
    assert s.conversation(old).pinned_at == when
    s.close()
    s = Store(path)
    assert [(c.title, c.pinned) for c in s.conversations()] == [
        ("old", True), ("new", False), ("middle", False)]
    # search keeps pins first too
    assert [c.title for c in s.conversations("d")] == ["old", "middle"]
    s.set_pinned(old, False)
    assert [c.title for c in s.conversations()] == ["new", "middle", "old"]
    s.close()


def test_a_version_4_database_gains_pins_keeping_its_chats(tmp_path):
    path = tmp_path / "v4.sqlite3"
    db = sqlite3.connect(path)
    for script in MIGRATIONS[:4]:
        db.executescript(script)
    db.execute("PRAGMA user_version = 4")
    db.execute("INSERT INTO presets(name, system_prompt, params, created) "
               "VALUES ('Terse', 'One line.', '{\"temperature\": 0.2}', 1)")
    db.execute("INSERT INTO conversations(title, created, updated, preset_id) "
               "VALUES ('first', 1, 5, 1)")
    db.execute("INSERT INTO conversations(title, created, updated) VALUES ('second', 2, 9)")
    db.execute("INSERT INTO messages(conversation_id, role, content, created) "
               "VALUES (1, 'user', 'hello', 1)")
    db.commit()
    db.close()
    s = Store(path)
    assert s.schema_version == SCHEMA_VERSION == 5
    convs = s.conversations()
    assert [(c.title, c.pinned, c.preset_id) for c in convs] == [
        ("second", False, None), ("first", False, 1)]
    assert [m.content for m in s.messages(convs[1].id)] == ["hello"]
    assert s.presets()[0].params == {"temperature": 0.2}
    s.set_pinned(convs[1].id, True)
    assert [c.title for c in s.conversations()] == ["first", "second"]
    s.close()
