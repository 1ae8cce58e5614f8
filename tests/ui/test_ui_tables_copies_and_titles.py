"""Small things a user notices: Markdown tables drawn as tables, "Copied" on a code
block's link as on the message's Copy button, disabled actions that look disabled, and
two chats of the same title told apart by their date."""
from __future__ import annotations

import time

from ember.ui import markdown
from ember.ui.theme import LIGHT
from PySide6.QtCore import QUrl
from PySide6.QtGui import QGuiApplication, QTextTable

from tests.support.ui import data_dir, make_window  # noqa: F401

TABLE = """Sizes:

| Model | Params | Note |
|:------|-------:|:----:|
| SmolLM2 | 135M | `small` |
| Gemma \\| 3 | 270M |
"""


def cell_texts(table):
    return [[table.cellAt(r, c).firstCursorPosition().block().text().replace("\xa0", " ").strip()
             for c in range(table.columns())] for r in range(table.rows())]


def test_markdown_table_renders_as_a_table():
    r = markdown.render(TABLE, LIGHT)
    assert "<table" in r.html and "<th" in r.html
    assert 'align="right"' in r.html and 'align="center"' in r.html
    assert "|" not in r.html.replace("Gemma | 3", "")  # no pipes left as text


def test_table_in_a_message_is_a_real_table(qtbot, data_dir):
    win = make_window(qtbot, data_dir, restore_last=False)
    cid = win.store.create_conversation("t")
    win.store.add_message(cid, "user", "sizes?")
    win.store.add_message(cid, "assistant", TABLE)
    win.select_conversation(cid)
    body = win.chat_view.messages()[-1].body
    tables = [f for f in body.document().rootFrame().childFrames() if isinstance(f, QTextTable)]
    assert len(tables) == 1
    t = tables[0]
    assert (t.rows(), t.columns()) == (3, 3)
    assert cell_texts(t) == [["Model", "Params", "Note"], ["SmolLM2", "135M", "small"],
                             ["Gemma | 3", "270M", ""]]


def test_a_half_streamed_table_already_shows_its_header():
    r = markdown.render("| a | b |\n|---|---|\n| 1 |", LIGHT)
    assert r.html.count("<th") == 2 and r.html.count("<td") == 2


def test_text_with_pipes_is_not_a_table():
    r = markdown.render("a | b\nplain text", LIGHT)
    assert "<table" not in r.html and "a | b" in r.html


def test_code_block_copy_says_copied_then_goes_back(qtbot, data_dir, monkeypatch):
    from ember.ui.widgets import message
    monkeypatch.setattr(message, "COPIED_MS", 0)  # the reset runs at the next event loop turn
    win = make_window(qtbot, data_dir, restore_last=False)
    cid = win.store.create_conversation("code")
    win.store.add_message(cid, "user", "show me")
    win.store.add_message(cid, "assistant", "```python\nprint('a')\n```\n\n```sh\nls\n```")
    win.select_conversation(cid)
    w = win.chat_view.messages()[-1]
    text = w.body.document().toPlainText
    assert text().count("Copy") == 2 and "Copied" not in text()
    w.body.anchorClicked.emit(QUrl("copy-code:1"))
    assert QGuiApplication.clipboard().text() == "ls"
    lines = text().splitlines()
    assert lines.count("Copied") == 1 and lines.count("Copy") == 1
    assert lines.index("Copied") > lines.index("Copy")  # the second block's link
    qtbot.waitUntil(lambda: "Copied" not in text())
    assert text().count("Copy") == 2


def darkest(widget) -> int:
    """The darkest drawn pixel: the label's text on the light theme."""
    img = widget.grab().toImage()
    return min(p.lightness() for p in (img.pixelColor(x, y) for x in range(img.width())
                                       for y in range(img.height())) if p.alpha() == 255)


def test_disabled_message_actions_look_disabled(qtbot, data_dir):
    win = make_window(qtbot, data_dir, restore_last=False)
    cid = win.store.create_conversation("t")
    win.store.add_message(cid, "user", "hi")
    win.store.add_message(cid, "assistant", "hello")
    win.select_conversation(cid)
    w = win.chat_view.messages()[0]
    w.set_actions(last_assistant=False, busy=False)
    enabled = darkest(w.edit_button)
    w.set_actions(last_assistant=False, busy=True)
    assert not w.edit_button.isEnabled()
    disabled = darkest(w.edit_button)
    # the text is drawn in a clearly fainter colour (lightness 0-255)
    assert disabled - enabled >= 40, (enabled, disabled)


def test_chats_with_the_same_title_show_their_dates(qtbot, data_dir):
    from PySide6.QtCore import Qt

    from ember.ui.conversation_model import NOTE_ROLE, day as _day
    win = make_window(qtbot, data_dir, restore_last=False)
    a = win.store.create_conversation("Trip plans")
    b = win.store.create_conversation("Trip plans")
    c = win.store.create_conversation("Recipes")
    win.store.db.execute("UPDATE conversations SET created=? WHERE id=?",
                           (time.mktime((2026, 3, 4, 9, 15, 0, 0, 0, -1)), a))
    renames = []
    win.sidebar.renamed.connect(lambda *a: renames.append(a))
    win.refresh_conversations()
    win.sidebar.set_badges({c: "queued 1"})
    assert renames == []  # a note on a row is no rename (it once wrote the title back)
    notes = {cid: win.sidebar.index_for(cid).data(NOTE_ROLE) for cid in (a, b, c)}
    assert notes[a] == "4 Mar 09:15"
    assert notes[b] == _day(win.store.conversation(b).created) and notes[b] != notes[a]
    assert notes[c] == "queued 1"
    assert "Started 2026-03-04 09:15" in win.sidebar.index_for(a).data(Qt.ToolTipRole)
    win.rename_conversation(b, "Trip plans, June")
    win.refresh_conversations()
    assert not win.sidebar.index_for(a).data(NOTE_ROLE)



def test_export_to_a_folder_that_does_not_exist_says_so(qtbot, data_dir, tmp_path):
    win = make_window(qtbot, data_dir, restore_last=False)
    cid = win.store.create_conversation("t")
    win.store.add_message(cid, "user", "hi")
    win.select_conversation(cid)
    target = tmp_path / "no such folder" / "chat.md"
    win.export_conversation(target, "md")
    assert not target.exists()
    assert win.error_banner.isVisible()
    assert win.error_banner.plain.startswith("Could not export to chat.md")


def test_export_all_writes_every_version(qtbot, data_dir, tmp_path):
    import json
    win = make_window(qtbot, data_dir, restore_last=False)
    cid = win.store.create_conversation("t")
    q = win.store.add_message(cid, "user", "hi")
    win.store.add_message(cid, "assistant", "one")
    win.store.add_message(cid, "assistant", "two", parent_id=q)
    win.export_conversation(tmp_path / "all.json", "all")
    data = json.loads((tmp_path / "all.json").read_text(encoding="utf-8"))
    (conv,) = data["conversations"]
    assert [m["content"] for m in conv["messages"]] == ["hi", "two"]
    assert sorted(v["content"] for v in conv["versions"]) == ["hi", "one", "two"]


def test_cpu_level_is_spelled_alike_before_and_after_a_load(qtbot, data_dir,
                                                            starter_model_path):
    import pytest
    from ember.placement import cpu_line
    from PySide6.QtWidgets import QLabel

    from tests.support.ui import find, load_by_drop
    pytest.importorskip("ember.engine.native")
    assert cpu_line("ISA=avx512 active=avx512 threads=2") == "CPU (AVX-512)"
    assert cpu_line("ISA=avx512 active=avx2 threads=2") == "CPU (AVX2)"  # the level in use
    assert cpu_line("ISA=neon active=neon") == "CPU (NEON)"
    assert cpu_line("ISA=scalar active=scalar") == "CPU (scalar)"
    assert cpu_line("threads=2") == "CPU"
    win = make_window(qtbot, data_dir)
    label = find(win, QLabel, "statusBackend")
    before = label.full_text()
    load_by_drop(qtbot, win, starter_model_path)
    after = label.full_text().split(" — ")[0]  # a note about other backends may follow
    assert before == after and before.startswith("CPU (")


def test_window_title_names_the_app_once(qtbot, data_dir, starter_model_path):
    from tests.support.ui import load_by_drop
    win = make_window(qtbot, data_dir)
    assert win.windowTitle() == "Ember"
    load_by_drop(qtbot, win, starter_model_path)
    # Qt adds the application's display name to a title that does not end with it
    app_name = QGuiApplication.applicationDisplayName()
    assert app_name == "Ember"
    assert win.windowTitle() == f"SmolLM2-135M-Instruct — {app_name}"
