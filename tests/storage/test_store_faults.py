"""The chat store under faults: killed at random points while replies stream (50 runs),
a full disk, a read-only file and a file locked by another program. After each, PRAGMA
integrity_check is ok and nothing that was already stored is lost; a failed write is a
StoreError whose words say why, and the app shows it and keeps the chat in memory."""

from __future__ import annotations

import hashlib
import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from ember.storage.store import Store, StoreError

REPO = Path(__file__).resolve().parents[2]

# Streams replies the way the app does (an assistant row added incomplete, its content
# rewritten every batch, then marked complete) and prints DONE <id> <sha256> once a reply
# is marked complete: what the app would then show as complete.
WRITER = textwrap.dedent("""
    import hashlib, random, sys
    sys.path.insert(0, sys.argv[2])
    from ember.storage.store import Store
    store = Store(sys.argv[1])
    conv = store.create_conversation("kill loop")
    print("READY", flush=True)
    while True:
        store.add_message(conv, "user", "tell me more")
        mid = store.add_message(conv, "assistant", "", complete=False)
        rng, text = random.Random(mid), ""
        for _ in range(rng.randint(5, 40)):
            text += "".join(rng.choice("abcdefgh ") for _ in range(rng.randint(1, 30)))
            store.update_message(mid, content=text)
        store.update_message(mid, content=text, complete=True, meta={"n": len(text)})
        sys.stdout.write(f"DONE {mid} {hashlib.sha256(text.encode()).hexdigest()}\\n")  # one write
        sys.stdout.flush()
""")


def expected_chunks(mid: int) -> str:
    rng, text = random.Random(mid), ""
    for _ in range(rng.randint(5, 40)):
        text += "".join(rng.choice("abcdefgh ") for _ in range(rng.randint(1, 30)))
    return text


def test_kill_9_at_random_points_loses_no_complete_reply(tmp_path):
    db = tmp_path / "history.sqlite3"
    rng = random.Random(17)
    shown_complete: dict[int, str] = {}
    for run in range(50):
        child = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(db), str(REPO / "app")],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert child.stdout.readline() == "READY\n"
        # killed at a random point: before, during or after some replies
        try:
            child.wait(timeout=rng.uniform(0.0, 0.4))
        except subprocess.TimeoutExpired:
            pass
        os.kill(child.pid, signal.SIGKILL)
        out, _ = child.communicate()
        assert child.returncode == -signal.SIGKILL
        for line in out.splitlines(keepends=True):
            # a line the kill cut short was never shown: only whole ones count
            parts = line.split()
            if line.endswith("\n") and len(parts) == 3 and parts[0] == "DONE" and len(parts[2]) == 64:
                shown_complete[int(parts[1])] = parts[2]

        con = sqlite3.connect(db)
        assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",), f"run {run}"
        rows = {
            r[0]: r[1:]
            for r in con.execute(
                "SELECT id, content, complete FROM messages WHERE role = 'assistant'"
            )
        }
        con.close()
        for mid, sha in shown_complete.items():
            content, complete = rows[mid]
            assert complete == 1 and hashlib.sha256(content.encode()).hexdigest() == sha, (
                f"run {run}, id {mid}"
            )
        for mid, (content, complete) in rows.items():
            if not complete:  # the reply being written when the kill came: a prefix of it
                assert expected_chunks(mid).startswith(content), f"run {run}, id {mid}"
    assert (
        len(shown_complete) > 50
    )  # the kills came at many points, not only before the first reply


def _stored(path: Path) -> list[tuple]:
    con = sqlite3.connect(path)
    try:
        assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        return con.execute(
            "SELECT id, role, content, complete FROM messages ORDER BY id"
        ).fetchall()
    finally:
        con.close()


def _fill_disk(store: Store) -> None:
    # SQLITE_FULL, the error a full disk gives, at the current size of the database
    pages = store.db.execute("PRAGMA page_count").fetchone()[0]
    store.db.execute(f"PRAGMA max_page_count = {pages}")


def _read_only(store: Store) -> None:
    store.db.execute("PRAGMA query_only = 1")


def _locked_by_another(store: Store) -> None:
    other = sqlite3.connect(store.path, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    store._other = other  # held until the store is closed
    store.db.execute("PRAGMA busy_timeout = 50")


@pytest.mark.parametrize(
    "fault, words",
    [
        (_fill_disk, "the disk is full"),
        (_read_only, "the history file is read-only"),
        (_locked_by_another, "another program is holding the history file locked"),
    ],
)
def test_a_failed_write_says_why_and_loses_nothing_stored(tmp_path, fault, words):
    path = tmp_path / "history.sqlite3"
    store = Store(path)
    conv = store.create_conversation("faults")
    store.add_message(conv, "user", "hello")
    mid = store.add_message(conv, "assistant", "a first part", complete=False)
    before = _stored(path)
    fault(store)
    with pytest.raises(StoreError) as err:
        store.update_message(mid, content="a first part and " + "more " * 5000)
        store.add_message(conv, "user", "x" * 100_000)
    msg = str(err.value)
    assert words in msg and str(path) in msg and "what was already saved is kept" in msg
    with pytest.raises(StoreError):
        store.add_message(conv, "user", "y" * 100_000)
    store.close()
    assert _stored(path) == before


def test_a_real_full_file_system_gives_the_same_words(tmp_path):
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)],
        capture_output=True,
        check=False,
    )
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.decode().strip()}")
    try:
        store = Store(mnt / "history.sqlite3")
        conv = store.create_conversation("tiny disk")
        kept = [store.add_message(conv, "user", "short and stored")]
        with pytest.raises(StoreError) as err:
            for _ in range(200):  # 200 x 8 KB cannot fit in 256 KB
                kept.append(store.add_message(conv, "assistant", "z" * 8000))
        assert "the disk is full" in str(err.value)
        stored_ids = [m.id for m in store.all_messages(conv)]
        store.close()
        assert stored_ids == kept  # every message whose write returned is there
        assert _stored(mnt / "history.sqlite3")[0][2] == "short and stored"
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=True)
