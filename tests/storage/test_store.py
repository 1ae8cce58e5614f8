"""Chat history in SQLite: schema migrations, streaming writes, soft delete with undo,
search, and Markdown/JSON export and JSON import."""
from __future__ import annotations

import json
import sqlite3

import pytest
from ember.storage.store import MIGRATIONS, SCHEMA_VERSION, Store, StoreError


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "h.sqlite3")
    yield s
    s.close()


def test_new_database_is_wal_and_current(store):
    assert store.schema_version == SCHEMA_VERSION == len(MIGRATIONS)
    assert store.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_upgrades_a_version_1_database_keeping_its_data(tmp_path):
    path = tmp_path / "old.sqlite3"
    db = sqlite3.connect(path)
    db.executescript(MIGRATIONS[0])
    db.execute("PRAGMA user_version = 1")
    db.execute("INSERT INTO conversations(title, created, updated) VALUES ('old chat', 1, 2)")
    db.execute("INSERT INTO messages(conversation_id, role, content, created) "
               "VALUES (1, 'user', 'hi', 1)")
    db.commit()
    db.close()
    s = Store(path)
    assert s.schema_version == SCHEMA_VERSION
    (c,) = s.conversations()
    assert c.title == "old chat" and c.deleted_at is None
    (m,) = s.messages(c.id)
    assert (m.role, m.content, m.meta) == ("user", "hi", {})
    s.close()


def test_refuses_a_newer_schema(tmp_path):
    path = tmp_path / "new.sqlite3"
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.close()
    with pytest.raises(StoreError, match="newer Ember"):
        Store(path)


def test_streamed_reply_is_visible_to_another_connection_at_once(store):
    cid = store.create_conversation("c")
    store.add_message(cid, "user", "q")
    mid = store.add_message(cid, "assistant", "", complete=False)
    other = sqlite3.connect(store.path)
    for text in ("Hel", "Hello", "Hello, world"):
        store.update_message(mid, content=text)
        assert other.execute("SELECT content, complete FROM messages WHERE id = ?",
                             (mid,)).fetchone() == (text, 0)
    store.update_message(mid, complete=True, meta={"generated_tokens": 3})
    assert store.message(mid).complete and store.message(mid).meta["generated_tokens"] == 3
    other.close()


def test_order_search_rename_and_edit_truncation(store):
    a = store.create_conversation("Alpha", created=1)
    b = store.create_conversation("Beta", created=2)
    store.add_message(a, "user", "tell me about 100% cotton")
    ids = [store.add_message(b, r, t) for r, t in
           [("user", "one"), ("assistant", "two"), ("user", "three"), ("assistant", "four")]]
    assert [c.title for c in store.conversations()] == ["Beta", "Alpha"]
    assert [c.title for c in store.conversations("COTTON")] == ["Alpha"]
    assert [c.title for c in store.conversations("100%")] == ["Alpha"]
    assert store.conversations("_") == []  # LIKE wildcards are literal
    store.rename_conversation(a, "  ")
    assert store.conversation(a).title == "Untitled"
    assert store.delete_messages_after(b, ids[1]) == 2
    assert [m.content for m in store.messages(b)] == ["one", "two"]


def test_soft_delete_restore_and_purge(store):
    a = store.create_conversation("A")
    store.add_message(a, "user", "x")
    store.delete_conversation(a)
    assert store.conversations() == []
    store.restore_conversation(a)
    assert [c.id for c in store.conversations()] == [a]
    store.delete_conversation(a)
    assert store.purge_deleted() == 1
    assert store.conversation(a) is None and store.messages(a) == []


def test_export_markdown_and_json_then_import(store, tmp_path):
    cid = store.create_conversation("Code talk", system_prompt="Be brief.",
                                    model_path="/m/model.gguf")
    store.add_message(cid, "user", "Show code")
    store.add_message(cid, "assistant", "```python\nprint(1)\n```", meta={"gen_tps": 5.0})
    store.add_message(cid, "assistant", "half", complete=False)
    md = store.export_markdown(cid)
    assert md.startswith("# Code talk\n")
    assert "## System\n\nBe brief." in md and "## You\n\nShow code" in md
    assert "```python\nprint(1)\n```" in md and "*(interrupted)*" in md
    assert "`model.gguf`" in md
    data = store.export_json([cid])
    text = json.dumps(data)
    other = Store(tmp_path / "other.sqlite3")  # another computer's history
    new = other.import_json(text)
    assert len(new) == 1
    got = other.conversation(new[0])
    assert (got.title, got.system_prompt, got.model_path) == ("Code talk", "Be brief.",
                                                              "/m/model.gguf")
    assert [(m.role, m.content, m.complete, m.meta) for m in other.messages(new[0])] == \
        [(m.role, m.content, m.complete, m.meta) for m in store.messages(cid)]
    other.close()


def test_an_export_imported_again_is_recognised_and_skipped(store):
    a = store.create_conversation("Pasta", created=10.5)
    store.add_message(a, "user", "How long?")
    b = store.create_conversation("Rust", created=20.25)
    store.add_message(b, "user", "Lifetimes?")
    data = json.dumps(store.export_json())
    result = store.import_export(data)  # into the history it came from: both already here
    assert (result.new_ids, result.already_here) == ([], 2)
    assert result.summary() == "0 chats imported, 2 already here"
    store.add_message(b, "assistant", "A borrow...")  # Rust has moved on since the export
    result = store.import_export(data)
    assert len(result.new_ids) == 1 and result.already_here == 1
    assert store.conversation(result.new_ids[0]).title == "Rust"
    assert result.summary() == "1 chat imported, 1 already here"
    store.delete_conversation(a)  # a deleted chat can be brought back by importing it
    assert len(store.import_export(data).new_ids) == 1


@pytest.mark.parametrize("bad", ["not json", "[]", '{"format": "other"}',
                                 '{"format": "ember-chat-export", "conversations": 3}',
                                 ('{"format": "ember-chat-export", "conversations": '
                                  '[{"title": "x", "messages": [{"role": "robot"}]}]}')])
def test_import_rejects_bad_data_and_adds_nothing(store, bad):
    with pytest.raises(StoreError):
        store.import_json(bad)
    assert store.conversations() == []
