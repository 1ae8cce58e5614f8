"""The desktop app on a Qwen3.5 file (gated delta-net blocks: a recurrent state, not a KV
cache that can be cut back): Regenerate and Edit restore a state snapshot and re-evaluate
the tail, and what they answer is what a fresh greedy generation of the same chat gives."""
from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QPlainTextEdit, QPushButton

from tests.support.ui import (  # noqa: F401
    GEN_TIMEOUT_MS,
    data_dir,
    find,
    load_by_drop,
    make_window,
    type_and_send,
)
from tests.ui.test_ui_chat import greedy_reply
from tools import make_arch_models

pytestmark = pytest.mark.native


@pytest.fixture(scope="module")
def qwen35_path(golden_meta):
    from tools.make_variants import file_sha256_cached
    p = make_arch_models.build("qwen35")
    assert file_sha256_cached(p) == golden_meta["arch"]["families"]["qwen35"]["sha256"]
    return p


def test_regenerate_and_edit_on_a_recurrent_model(qtbot, data_dir, qwen35_path):
    win = make_window(qtbot, data_dir)
    load_by_drop(qtbot, win, qwen35_path)
    win.settings.max_new_tokens = 8
    question = "Tell me about rivers."
    type_and_send(qtbot, win, question)
    first = win.store.messages(win.current_conv)[-1]
    want = greedy_reply(qwen35_path, question, 8)
    assert want.strip()  # eight tokens of the synthetic model's text, not an empty reply
    assert first.role == "assistant" and first.content == want

    # Regenerate: the state is restored from the snapshot before the prompt's last token
    with qtbot.waitSignal(win.generation_finished, timeout=GEN_TIMEOUT_MS):
        qtbot.mouseClick(win.chat_view.messages()[-1].regenerate_button, Qt.LeftButton)
    msgs = win.store.messages(win.current_conv)
    assert [m.role for m in msgs] == ["user", "assistant"]
    assert msgs[1].id != first.id and msgs[1].content == want

    # a follow-up, then an edit of the first question: everything after it is replaced by
    # what a fresh chat with the new text answers
    type_and_send(qtbot, win, "And lakes?")
    assert len(win.store.messages(win.current_conv)) == 4
    qtbot.mouseClick(win.chat_view.messages()[0].edit_button, Qt.LeftButton)
    editor = find(win, QPlainTextEdit, "messageEditor")
    editor.setPlainText("Tell me about mountains.")
    with qtbot.waitSignal(win.generation_finished, timeout=GEN_TIMEOUT_MS):
        qtbot.mouseClick(find(win, QPushButton, "saveEditButton"), Qt.LeftButton)
    msgs = win.store.messages(win.current_conv)
    assert [(m.role, m.content) for m in msgs] == [
        ("user", "Tell me about mountains."),
        ("assistant", greedy_reply(qwen35_path, "Tell me about mountains.", 8))]
