"""Presets in the chat database: a named system prompt and sampling settings, chosen per
chat; the settings a chat's replies use."""
from __future__ import annotations

import sqlite3

import pytest
from ember.storage.settings import Settings
from ember.storage.store import MIGRATIONS, Store, StoreError


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "h.sqlite3")
    yield s
    s.close()


def test_a_chat_keeps_its_preset_and_loses_it_when_the_preset_is_deleted(store):
    pid = store.save_preset("Terse", "Answer in one line.", {"temperature": 0.2})
    cid = store.create_conversation()
    store.set_conversation_preset(cid, pid)
    assert store.conversation(cid).preset_id == pid
    (p,) = store.presets()
    assert (p.name, p.system_prompt, p.params) == ("Terse", "Answer in one line.",
                                                   {"temperature": 0.2})
    store.delete_preset(pid)
    assert store.conversation(cid).preset_id is None and store.presets() == []


def test_preset_names_are_unique_and_needed(store):
    pid = store.save_preset("Coder")
    with pytest.raises(StoreError, match="already a preset named"):
        store.save_preset("coder")
    with pytest.raises(StoreError, match="needs a name"):
        store.save_preset("  ")
    assert store.save_preset("Coder", "Write Python.", preset_id=pid) == pid  # its own name
    assert store.preset(pid).system_prompt == "Write Python."


def test_a_version_3_database_gains_presets_keeping_its_chats(tmp_path):
    path = tmp_path / "old.sqlite3"
    db = sqlite3.connect(path)
    for script in MIGRATIONS[:3]:
        db.executescript(script)
    db.execute("PRAGMA user_version = 3")
    db.execute("INSERT INTO conversations(title, created, updated) VALUES ('old', 1, 2)")
    db.commit()
    db.close()
    s = Store(path)
    (c,) = s.conversations()
    assert (c.title, c.preset_id) == ("old", None)
    s.close()


def test_a_preset_sets_only_sampling_and_length_clamped():
    base = Settings(temperature=0.7, max_new_tokens=1024, n_ctx=2048)
    s = base.with_preset({"temperature": 9.0, "max_new_tokens": 3, "n_ctx": 128,
                          "top_k": 5})
    assert (s.temperature, s.max_new_tokens, s.top_k, s.n_ctx) == (5.0, 3, 5, 2048)
    assert base.temperature == 0.7  # a copy
