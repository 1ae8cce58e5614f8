"""Dropping files Ember cannot run shows a clear error in the window, and the app
stays usable: the next good model loads and chats, and a bad drop never costs the
model that is already loaded."""
from __future__ import annotations

import html
import shutil

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QToolButton, QWidget

from tests.support.ui import (  # noqa: F401
    data_dir,
    drop_file,
    find,
    load_by_drop,
    make_window,
    type_and_send,
)

pytestmark = pytest.mark.native


# each kind: the file, the banner's heading, the sentence under it, and the engine's words
# (folded under "Details")
def not_gguf(tmp_path, starter):
    p = tmp_path / "notes.gguf"
    p.write_text("hello, these are my notes, not a model.\n")
    return (p, "This is a text file, not a model", "Ember opens GGUF model files (.gguf)",
            "magic is 'hell', expected 'GGUF'")


def wrong_magic(tmp_path, starter):
    p = tmp_path / "picture.gguf"
    p.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8)
    return (p, "This is not a model file", "this file is something else",
            "not a GGUF file (magic is")


def truncated(tmp_path, starter):
    p = tmp_path / "half-downloaded.gguf"
    with open(starter, "rb") as f:
        p.write_bytes(f.read(200_000))
    return (p, "This file is incomplete", "download it again",
            "array of 49152 strings is larger than the file")


def truncated_in_the_weights(tmp_path, starter):
    p = tmp_path / "cut-short.gguf"
    with open(starter, "rb") as f:
        p.write_bytes(f.read(20_000_000))
    return (p, "This file is incomplete", "download it again",
            "extends past the end of the file")


def unsupported_arch(tmp_path, starter):
    """The starter model with its architecture renamed in place to 'mamba'."""
    p = tmp_path / "mamba.gguf"
    shutil.copy(starter, p)
    with open(p, "r+b") as f:
        head = f.read(1 << 16)
        k = head.index(b"general.architecture") + len("general.architecture")
        assert head[k + 12:k + 17] == b"llama"
        f.seek(k + 12)
        f.write(b"mamba")
    return (p, "Ember can't run this model",
            "made for a model family Ember does not run yet: mamba",
            "architecture 'mamba' is not supported")


def unsupported_arch_gguf_py(tmp_path, starter):
    """A tiny file written by gguf-py: a valid GGUF that is no runnable model."""
    gguf = pytest.importorskip("gguf")
    import numpy as np
    p = tmp_path / "tiny.gguf"
    w = gguf.GGUFWriter(str(p), "mamba")
    w.add_block_count(1)
    w.add_context_length(128)
    w.add_embedding_length(8)
    w.add_tensor("token_embd.weight", np.zeros((16, 8), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return p, "This model file is damaged", "download it again", "no tokenizer"


def missing(tmp_path, starter):
    return (tmp_path / "gone.gguf", "The file could not be read", "moved or deleted",
            "does not exist")


KINDS = [not_gguf, wrong_magic, truncated, truncated_in_the_weights, unsupported_arch,
         unsupported_arch_gguf_py, missing]


def drop_and_wait_error(qtbot, win, path):
    with qtbot.waitSignal(win.model_failed, timeout=60_000) as blocker:
        if path.exists():
            assert drop_file(win.centralWidget(), path)
        else:
            win.open_model_path(str(path))
    return blocker.args[0]


def test_bad_files_show_an_error_and_the_app_stays_usable(qtbot, data_dir, tmp_path,
                                                         starter_model_path):
    win = make_window(qtbot, data_dir)
    banner = find(win, QWidget, "errorBanner")
    toggle = find(win, QToolButton, "errorBannerDetailsToggle")
    details = find(win, QLabel, "errorBannerDetails")
    for kind in KINDS:
        path, title, advice, raw = kind(tmp_path, starter_model_path)
        shown = drop_and_wait_error(qtbot, win, path)
        text = find(win, QLabel, "errorText").text()
        assert banner.isVisible(), kind.__name__
        assert text.startswith(f"<b>{html.escape(title, quote=False)}: {path.name}</b><br>"), text
        assert advice in html.unescape(text), (kind.__name__, text)
        # the parser's words are not what the user reads first, but one click away
        assert raw not in html.unescape(text) and not details.isVisible()
        qtbot.mouseClick(toggle, Qt.LeftButton)
        assert details.isVisible() and raw in details.text(), (kind.__name__, details.text())
        assert title in shown
        assert win.model is None and not win.loading
        assert not find(win, QWidget, "modelCard").isVisible()
        assert win.stack.currentWidget() is win.welcome
    # still usable: the real model loads and answers
    load_by_drop(qtbot, win, starter_model_path)
    assert not banner.isVisible()
    stats = type_and_send(qtbot, win, "Hi")
    assert stats["generated_tokens"] > 0


def test_a_bad_drop_keeps_the_loaded_model(qtbot, data_dir, tmp_path, starter_model_path):
    win = make_window(qtbot, data_dir)
    load_by_drop(qtbot, win, starter_model_path)
    model = win.model
    path, title, _, _ = unsupported_arch(tmp_path, starter_model_path)
    drop_and_wait_error(qtbot, win, path)
    assert title in find(win, QLabel, "errorText").text()
    assert win.model is model
    assert find(win, QLabel, "modelArch").text() == "llama"  # the card shows the loaded one
    assert win.composer.send_button.isEnabled()
    stats = type_and_send(qtbot, win, "Hi")
    assert stats["generated_tokens"] > 0


def test_load_can_be_cancelled(qtbot, data_dir, starter_model_path):
    win = make_window(qtbot, data_dir)
    win.open_model_path(str(starter_model_path))
    assert find(win, QWidget, "loadProgress").isVisible()
    win.engine.worker.load_progress.connect(lambda *_: win.cancel_load())
    qtbot.waitUntil(lambda: not win.loading, timeout=60_000)
    assert win.model is None
    assert "cancelled" in find(win, QLabel, "statusMessage").full_text()

