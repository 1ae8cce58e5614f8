"""The library over a folder: what is stored, what re-indexing reads again (mtime, then
hash), removal, search in words, vectors and both, scope, cancel, progress, and a file that
goes away while it is indexed."""
from __future__ import annotations

import os

import pytest
from ember.chat.streaming import CancelToken
from ember.documents.indexer import index_paths
from ember.documents.library import Library, fts_query
from ember.documents.retrieval import reciprocal_rank_fusion, search

from tests.support.documents import HashEmbedder, make_pdf

DOCS = {
    "lease.md": "# Pets\nCats are allowed in the flat. Dogs need the landlord's written consent."
                "\n\n# Rent\nRent is due on the first day of each month.",
    "recipes/bread.txt": "Knead the dough for ten minutes. Let it rise for an hour.",
    "recipes/soup.txt": "Simmer the onions slowly. Add stock and season to taste.",
    "notes/garden.html": "<h1>Garden</h1><p>Water the tomatoes every evening in summer.</p>",
}


@pytest.fixture
def folder(tmp_path):
    root = tmp_path / "docs"
    for rel, text in DOCS.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    make_pdf(root / "manual.pdf", ["Boiler manual.\nReset the boiler by holding the red button.",
                                   "Service the boiler once a year."])
    (root / ".git").mkdir()
    (root / ".git" / "HEAD.txt").write_text("hidden: not indexed")
    (root / "image.png").write_bytes(b"\x89PNG")
    return root


@pytest.fixture
def lib(tmp_path):
    library = Library(tmp_path / "library.sqlite3")
    yield library
    library.close()


def paths(files):
    return sorted(os.path.basename(f) for f in files)


def test_a_folder_is_stored_file_by_file(lib, folder):
    r = index_paths(lib, [folder], HashEmbedder())
    assert paths(r.added) == ["bread.txt", "garden.html", "lease.md", "manual.pdf", "soup.txt"]
    assert r.failed == [] and not r.cancelled
    rows = {os.path.basename(f.path): f for f in lib.files()}
    assert rows["lease.md"].n_chunks == 2 and rows["manual.pdf"].n_chunks == 2
    assert all(f.status == "indexed" and f.embedder == "hash-64" for f in rows.values())
    assert lib.count_chunks() == sum(f.n_chunks for f in rows.values())
    assert lib.sources() == [str(folder.resolve())]
    assert lib.check() == []


def test_reindexing_reads_only_what_changed(lib, folder):
    emb = HashEmbedder()
    index_paths(lib, [folder], emb)
    calls = emb.calls
    r = index_paths(lib, [folder], emb)
    assert len(r.unchanged) == 5 and r.added == r.updated == [] and emb.calls == calls
    # the same bytes saved again: hashed, not read again
    bread = folder / "recipes" / "bread.txt"
    os.utime(bread, ns=(bread.stat().st_atime_ns, bread.stat().st_mtime_ns + 10**9))
    r = index_paths(lib, [folder], emb)
    assert len(r.unchanged) == 5 and emb.calls == calls
    assert lib.file(bread.resolve()).mtime_ns == bread.stat().st_mtime_ns
    # new words: the passages are replaced
    bread.write_text("Sourdough needs a starter fed daily.")
    r = index_paths(lib, [folder], emb)
    assert paths(r.updated) == ["bread.txt"]
    assert lib.search_words("knead") == []
    [(cid, _)] = lib.search_words("sourdough")
    assert lib.passage(cid).path == str(bread.resolve())
    assert lib.check() == []


def test_deleted_files_and_removed_folders_leave_the_library(lib, folder):
    index_paths(lib, [folder], HashEmbedder())
    (folder / "recipes" / "soup.txt").unlink()
    r = index_paths(lib, [folder], HashEmbedder())
    assert paths(r.removed) == ["soup.txt"] and lib.search_words("onions") == []
    assert lib.remove(folder.resolve() / "recipes") == 1
    assert paths(f.path for f in lib.files()) == ["garden.html", "lease.md", "manual.pdf"]
    assert lib.remove(folder.resolve()) == 3
    assert lib.files() == [] and lib.count_chunks() == 0 and lib.sources() == []
    assert lib.check() == []


def test_a_file_that_fails_is_kept_with_its_reason_and_not_read_again(lib, folder):
    (folder / "broken.pdf").write_bytes(b"%PDF-1.4\ngarbage")
    r = index_paths(lib, [folder], HashEmbedder())
    [(path, message)] = r.failed
    assert path.endswith("broken.pdf") and "damaged or not a PDF" in message
    rec = lib.file(path)
    assert rec.status == "failed" and rec.error == message and rec.n_chunks == 0
    r = index_paths(lib, [folder], HashEmbedder())
    assert r.failed == [] and path in r.unchanged
    make_pdf(folder / "broken.pdf", ["Fixed now."])
    r = index_paths(lib, [folder], HashEmbedder())
    assert r.updated == [path] and lib.file(path).status == "indexed"


def test_searches_find_the_passage_by_words_by_vectors_and_both(lib, folder):
    emb = HashEmbedder()
    index_paths(lib, [folder], emb)
    for mode in ("words", "vectors", "hybrid"):
        hits = search(lib, "how do I reset the boiler", emb, k=3, mode=mode)
        assert hits[0].passage.path.endswith("manual.pdf"), mode
        assert hits[0].passage.page == 1 and "red button" in hits[0].passage.text
    hits = search(lib, "are dogs allowed", emb, k=2)
    assert hits[0].passage.heading == "Pets" and hits[0].word_rank == 1


def test_scope_limits_the_search_to_attached_files_and_folders(lib, folder):
    emb = HashEmbedder()
    index_paths(lib, [folder], emb)
    scope = [folder.resolve() / "recipes"]
    for mode in ("words", "vectors", "hybrid"):
        hits = search(lib, "boiler onions dough", emb, k=5, mode=mode, scope=scope)
        assert paths(h.passage.path for h in hits) == ["bread.txt", "soup.txt"], mode


def test_reciprocal_rank_fusion():
    # 2 is second in both lists, 1 first in one and absent in the other
    fused = reciprocal_rank_fusion([1, 2, 3], [4, 2, 5], k=60)
    assert [i for i, _ in fused][:1] == [2]
    assert fused[0][1] == pytest.approx(2 / 62)
    assert {i for i, _ in fused} == {1, 2, 3, 4, 5}


def test_fts_query_quotes_words():
    assert fts_query('pets AND "dogs" NEAR(x)') == '"pets" OR "dogs" OR "near" OR "x"'
    assert fts_query("How do I reset the boiler?") == '"reset" OR "boiler"'
    assert fts_query("what is it") == '"what" OR "is" OR "it"'  # stopwords alone stay
    assert fts_query("?!") is None


def test_cancel_keeps_finished_files_and_leaves_the_current_one_untouched(lib, tmp_path):
    root = tmp_path / "many"
    root.mkdir()
    for i in range(6):
        # ~75 passages: three embedding batches a file
        (root / f"f{i}.txt").write_text(" ".join(f"Line {j} of file {i}." for j in range(1000)))
    token = CancelToken()

    def on_batch(texts):
        if "of file 2." in texts[0]:  # the third file's first batch
            token.cancel()
    progress = []
    r = index_paths(lib, [root], HashEmbedder(on_batch=on_batch), progress=progress.append,
                    cancel=token, max_chars=300)
    assert r.cancelled
    assert paths(r.added) == ["f0.txt", "f1.txt"]
    assert paths(f.path for f in lib.files()) == ["f0.txt", "f1.txt"]
    assert lib.check() == []
    assert progress[0].files_done == 0 and progress[0].files_total == 6
    assert [p.files_done for p in progress] == sorted(p.files_done for p in progress)
    assert any(p.chunks_total and p.chunks_done for p in progress)
    # indexing again finishes the job
    r = index_paths(lib, [root], HashEmbedder(), max_chars=300)
    assert paths(r.added) == ["f2.txt", "f3.txt", "f4.txt", "f5.txt"] and len(r.unchanged) == 2
    assert lib.check() == []


def test_a_file_removed_while_it_is_indexed_is_not_added(lib, tmp_path):
    root = tmp_path / "docs"
    root.mkdir()
    (root / "a.txt").write_text("Apples are red.")
    (root / "b.txt").write_text("Bananas are yellow.")
    (root / "c.txt").write_text("Cherries are dark.")

    def on_batch(texts):
        if "Bananas" in texts[0]:
            (root / "b.txt").unlink()
            (root / "c.txt").unlink()
    r = index_paths(lib, [root], HashEmbedder(on_batch=on_batch))
    assert paths(r.added) == ["a.txt"]
    assert sorted(m for _, m in r.failed) == [
        "b.txt was removed while it was being indexed", "c.txt was removed before it was read"]
    assert paths(f.path for f in lib.files()) == ["a.txt"] and lib.check() == []


def test_an_embedder_change_embeds_again(lib, folder):
    index_paths(lib, [folder], HashEmbedder())
    other = HashEmbedder(dim=32, name="hash-32")
    r = index_paths(lib, [folder], other)
    assert len(r.updated) == 5
    assert {f.embedder for f in lib.files()} == {"hash-32"}
    assert lib.vector_matrix("hash-32")[2].shape[1] == 32


def test_chat_attachments_last_and_a_version_1_library_upgrades(tmp_path, folder):
    import sqlite3

    from ember.documents.library import MIGRATIONS, SCHEMA_VERSION
    path = tmp_path / "old.sqlite3"
    db = sqlite3.connect(path)
    for stmt in MIGRATIONS[0]:
        db.execute(stmt)
    db.execute("INSERT INTO files(path, mtime_ns, size, sha256, status, n_chunks, indexed_at) "
               "VALUES ('/d/a.txt', 1, 2, 'x', 'indexed', 0, 0)")
    db.execute("PRAGMA user_version = 1")
    db.commit()
    db.close()
    lib = Library(path)
    assert int(lib.db.execute("PRAGMA user_version").fetchone()[0]) == SCHEMA_VERSION == 2
    assert [f.path for f in lib.files()] == ["/d/a.txt"]
    assert lib.attachment(7) == (False, None)
    lib.attach(7)
    lib.attach(8, scope=[folder / "recipes"])
    lib.close()
    lib = Library(path)
    assert lib.attachment(7) == (True, None)
    assert lib.attachment(8) == (True, [str(folder / "recipes")])
    lib.detach(7)
    assert lib.attachment(7) == (False, None) and lib.check() == []
    lib.close()


def test_a_parser_bug_or_an_unreadable_file_fails_that_file_only(lib, folder, monkeypatch):
    from ember.documents import indexer
    real = indexer.parse

    def flaky(path, limits):
        if path.name == "soup.txt":
            raise ZeroDivisionError("a parser bug")
        if path.name == "bread.txt":
            raise PermissionError(13, "Permission denied")
        return real(path, limits)
    monkeypatch.setattr(indexer, "parse", flaky)
    r = index_paths(lib, [folder], HashEmbedder())
    assert paths(r.added) == ["garden.html", "lease.md", "manual.pdf"]
    assert sorted(m for _, m in r.failed) == [
        "Ember could not read soup.txt (ZeroDivisionError: a parser bug)",
        "bread.txt could not be read (Permission denied)"]
    # the parser's failure is kept (not read again until the file changes); the permission
    # problem is not, so the next run tries again
    assert lib.file(folder.resolve() / "recipes" / "soup.txt").status == "failed"
    assert lib.file(folder.resolve() / "recipes" / "bread.txt") is None
    monkeypatch.setattr(indexer, "parse", real)
    r = index_paths(lib, [folder], HashEmbedder())
    assert paths(r.added) == ["bread.txt"] and lib.check() == []
