"""Versions in the chat store (schema 3): Edit and Regenerate add a sibling instead of
deleting, the conversation shown follows the active version at each turn, and every earlier
version (with the branch under it) can be shown again; old databases upgrade to chains."""
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


def shown(store, cid):
    return [m.content for m in store.messages(cid)]


def test_upgrades_a_version_2_database_to_chains(tmp_path):
    path = tmp_path / "v2.sqlite3"
    db = sqlite3.connect(path)
    for script in MIGRATIONS[:2]:
        db.executescript(script)
    db.execute("PRAGMA user_version = 2")
    for cid in (1, 2):
        db.execute("INSERT INTO conversations(title, created, updated) VALUES (?, 1, 1)",
                   (f"chat {cid}",))
    rows = [(1, "user", "a1"), (2, "user", "b1"), (1, "assistant", "a2"), (1, "user", "a3"),
            (2, "assistant", "b2")]
    for cid, role, text in rows:  # two chats written interleaved, as the app does
        db.execute("INSERT INTO messages(conversation_id, role, content, created, meta) "
                   "VALUES (?, ?, ?, 1, '{}')", (cid, role, text))
    db.commit()
    db.close()
    s = Store(path)
    assert s.schema_version == SCHEMA_VERSION >= 3
    assert shown(s, 1) == ["a1", "a2", "a3"] and shown(s, 2) == ["b1", "b2"]
    a = s.messages(1)
    assert [m.parent_id for m in a] == [None, a[0].id, a[1].id]
    assert all(s.versions(m.id) == [m.id] for m in a)
    # a new reply goes after the last one shown
    s.add_message(1, "assistant", "a4")
    assert shown(s, 1) == ["a1", "a2", "a3", "a4"]
    s.close()


def test_regenerate_keeps_the_earlier_reply_and_its_branch(store):
    cid = store.create_conversation("c")
    q = store.add_message(cid, "user", "q")
    r1 = store.add_message(cid, "assistant", "first answer")
    store.add_message(cid, "user", "follow-up")
    store.add_message(cid, "assistant", "follow-up answer")
    r2 = store.add_message(cid, "assistant", "second answer", parent_id=q)  # Regenerate
    assert shown(store, cid) == ["q", "second answer"]
    assert store.versions(r1) == store.versions(r2) == [r1, r2]
    assert store.version_counts(cid)[r1] == (1, 2) and store.version_counts(cid)[r2] == (2, 2)
    store.select_version(r1)  # "<": the first answer, with the turns that followed it
    assert shown(store, cid) == ["q", "first answer", "follow-up", "follow-up answer"]
    store.select_version(r2)
    assert shown(store, cid) == ["q", "second answer"]
    assert len(store.all_messages(cid)) == 5


def test_editing_the_first_message_is_a_version_too(store):
    cid = store.create_conversation("c")
    u1 = store.add_message(cid, "user", "hello")
    store.add_message(cid, "assistant", "hi")
    u2 = store.add_message(cid, "user", "good morning", parent_id=None)  # Edit, at the root
    assert shown(store, cid) == ["good morning"]
    store.add_message(cid, "assistant", "morning!")
    assert shown(store, cid) == ["good morning", "morning!"]
    assert store.versions(u1) == [u1, u2]
    store.select_version(u1)
    assert shown(store, cid) == ["hello", "hi"]


def test_deleting_the_shown_version_shows_the_newest_other(store):
    cid = store.create_conversation("c")
    q = store.add_message(cid, "user", "q")
    r1 = store.add_message(cid, "assistant", "one")
    r2 = store.add_message(cid, "assistant", "two", parent_id=q)
    r3 = store.add_message(cid, "assistant", "", parent_id=q)  # a reply that failed
    store.delete_message(r3)
    assert shown(store, cid) == ["q", "two"] and store.versions(r1) == [r1, r2]
    store.select_version(r1)
    store.delete_message(r2)  # not shown: the selection stays
    assert shown(store, cid) == ["q", "one"]


def test_the_choice_of_version_is_stored(tmp_path):
    path = tmp_path / "h.sqlite3"
    s = Store(path)
    cid = s.create_conversation("c")
    q = s.add_message(cid, "user", "q")
    r1 = s.add_message(cid, "assistant", "one")
    s.add_message(cid, "assistant", "two", parent_id=q)
    s.select_version(r1)
    s.close()
    s = Store(path)
    assert shown(s, cid) == ["q", "one"]
    s.close()


def test_import_and_export_follow_the_shown_versions(store, tmp_path):
    cid = store.create_conversation("c")
    q = store.add_message(cid, "user", "q")
    store.add_message(cid, "assistant", "old")
    store.add_message(cid, "assistant", "new", parent_id=q)
    data = store.export_json([cid])
    assert [m["content"] for m in data["conversations"][0]["messages"]] == ["q", "new"]
    other = Store(tmp_path / "other.sqlite3")
    (new_id,) = other.import_json(json.dumps(data))
    assert shown(other, new_id) == ["q", "new"]
    m = other.messages(new_id)
    assert m[1].parent_id == m[0].id
    other.add_message(new_id, "user", "more")
    assert shown(other, new_id) == ["q", "new", "more"]
    other.close()


def test_export_keeps_every_version_and_import_rebuilds_the_tree(store, tmp_path):
    """Export of all versions: the JSON carries the whole tree, and an import shows the
    same conversation with the same "‹ n/m ›" and the other branches one click away."""
    cid = store.create_conversation("c")
    q1 = store.add_message(cid, "user", "first question")
    store.add_message(cid, "assistant", "answer A")
    store.add_message(cid, "assistant", "answer B", parent_id=q1)  # Regenerate
    q2 = store.add_message(cid, "user", "edited question", parent_id=None)  # Edit
    store.add_message(cid, "assistant", "answer C", parent_id=q2)
    store.select_version(q1)  # the first branch shown, with its newest reply
    data = json.loads(json.dumps(store.export_json([cid])))
    conv = data["conversations"][0]
    assert data["version"] == 2
    assert [m["content"] for m in conv["messages"]] == ["first question", "answer B"]
    assert sorted(v["content"] for v in conv["versions"]) == [
        "answer A", "answer B", "answer C", "edited question", "first question"]
    there = Store(tmp_path / "other.sqlite3")
    (new,) = there.import_json(data)
    assert shown(there, new) == ["first question", "answer B"]
    counts = there.version_counts(new)
    got = {m.content: counts[m.id] for m in there.all_messages(new)}
    assert got == {"first question": (1, 2), "edited question": (2, 2),
                   "answer A": (1, 2), "answer B": (2, 2), "answer C": (1, 1)}
    other = next(m for m in there.all_messages(new) if m.content == "edited question")
    there.select_version(other.id)
    assert shown(there, new) == ["edited question", "answer C"]
    there.close()
    md = store.export_markdown(cid)
    assert "## You\n\n*(version 1 of 2)*\n\nfirst question" in md
    assert "*(version 2 of 2)*\n\nanswer B" in md


def test_a_version_1_export_still_imports_as_a_chain(store):
    data = {"format": "ember-chat-export", "version": 1, "conversations": [
        {"title": "old", "messages": [{"role": "user", "content": "hi"},
                                      {"role": "assistant", "content": "hello"}]}]}
    (new,) = store.import_json(data)
    assert shown(store, new) == ["hi", "hello"]


def test_a_tree_with_a_dangling_parent_is_refused_whole(store):
    before = len(store.conversations())
    data = {"format": "ember-chat-export", "version": 2, "conversations": [
        {"title": "bad", "messages": [], "versions": [
            {"key": 0, "parent": None, "role": "user", "content": "hi"},
            {"key": 1, "parent": 7, "role": "assistant", "content": "lost"}]}]}
    with pytest.raises(StoreError, match="parent 7"):
        store.import_json(data)
    assert len(store.conversations()) == before
