"""The status bar while a reply streams and after it (issue 45, bug 6): the speeds and the
context count move as tokens arrive, and "prompt cached" is said only where the KV cache
held this chat's own prompt (a new chat after another shares no more than the template's
opening with it)."""
from __future__ import annotations

import re

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel

from tests.support.ui import (  # noqa: F401
    GEN_TIMEOUT_MS,
    data_dir,
    find,
    load_by_drop,
    make_window,
    type_and_send,
    write_settings,
)

pytestmark = pytest.mark.native


def status(win) -> tuple[str, str]:
    """The two segments' whole texts (as shown where the bar has room)."""
    labels = (find(win, QLabel, "statusTokensPerSecond"), find(win, QLabel, "statusContext"))
    return tuple(getattr(w, "full_text", w.text)() for w in labels)


def test_speeds_and_context_move_while_the_reply_streams(qtbot, data_dir,
                                                         starter_model_path):
    write_settings(data_dir, max_new_tokens=64)
    win = make_window(qtbot, data_dir)
    load_by_drop(qtbot, win, starter_model_path)
    type_and_send(qtbot, win, "Hi")  # the chat's last speeds are on the bar now
    before = status(win)
    seen: list[tuple[str, str]] = []
    win.reply_progress.connect(lambda *_: seen.append(status(win)))
    inp = win.composer.input
    qtbot.keyClicks(inp, "Write a long story about a dragon and a knight who become friends.")
    with qtbot.waitSignal(win.generation_finished, timeout=GEN_TIMEOUT_MS) as blocker:
        qtbot.keyClick(inp, Qt.Key_Return)
    stats = blocker.args[0]
    assert stats["generated_tokens"] >= 20 and len(seen) >= 3, (stats, seen)
    contexts = [int(re.match(r"context (\d[\d,]*) / 512", c).group(1).replace(",", ""))
                for _, c in seen]
    # the count grows with the reply, from the prompt towards prompt + reply
    assert len(set(contexts)) >= 3, contexts
    assert contexts == sorted(contexts)
    assert contexts[-1] <= stats["n_past"]
    assert contexts[0] != int(before[1].split()[1].replace(",", ""))
    # the speeds are this reply's, not "— t/s" nor the last reply's frozen numbers
    speeds = [t for t, _ in seen if re.search(r"generation \d+\.\d t/s", t)]
    assert len(speeds) >= 2, seen
    assert any(t != before[0] for t in speeds)
    assert "This reply so far" in win.status_tps.toolTip() or status(win)[0] != before[0]


def test_prompt_cached_only_where_the_cache_held_this_chat(qtbot, data_dir,
                                                          starter_model_path):
    win = make_window(qtbot, data_dir)
    load_by_drop(qtbot, win, starter_model_path)
    stats = type_and_send(qtbot, win, "Hi")
    # the first reply after the load: nothing in the cache
    assert stats["prompt_evaluated"] == stats["prompt_tokens"]
    assert "cached" not in status(win)[0]
    # the same chat again: its earlier turns come from the cache
    stats = type_and_send(qtbot, win, "Thanks")
    assert stats["prompt_evaluated"] < 16 < stats["prompt_tokens"], stats
    assert status(win)[0].startswith("prompt cached · generation "), status(win)
    assert f"{stats['prompt_tokens'] - stats['prompt_evaluated']:,} reused" in \
        win.status_tps.toolTip()
    # a new chat's first message: the engine reuses only the template's opening, which
    # is not this chat's prompt being cached
    win.new_chat()
    stats = type_and_send(qtbot, win, "Hi")
    assert 0 < stats["prompt_evaluated"] < stats["prompt_tokens"], stats
    text = status(win)[0]
    assert "cached" not in text and text.startswith("prompt "), text
    meta = win.store.messages(win.current_conv)[-1].meta
    assert meta["prompt_cached"] is False
