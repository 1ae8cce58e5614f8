"""Dropping files Ember cannot run shows a clear error in the window, and the app
stays usable: the next good model loads and chats, and a bad drop never costs the
model that is already loaded."""
from __future__ import annotations

import shutil

import pytest
from PySide6.QtWidgets import QLabel, QWidget

from tests.test_ui_support import (  # noqa: F401
    data_dir,
    drop_file,
    find,
    load_by_drop,
    make_window,
    type_and_send,
)

pytestmark = pytest.mark.native


def not_gguf(tmp_path, starter):
    p = tmp_path / "notes.gguf"
    p.write_text("These are my notes, not a model.\n")
    return p, "not a valid GGUF model", "not a GGUF file"


def truncated(tmp_path, starter):
    p = tmp_path / "half-downloaded.gguf"
    with open(starter, "rb") as f:
        p.write_bytes(f.read(200_000))
    return p, "not a valid GGUF model", "larger than the file"


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
    return p, "can't run this model", "architecture 'mamba' is not supported"


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
    return p, "not a valid GGUF model", "no tokenizer"


def missing(tmp_path, starter):
    return tmp_path / "gone.gguf", "could not be read", "does not exist"


KINDS = [not_gguf, truncated, unsupported_arch, unsupported_arch_gguf_py, missing]


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
    for kind in KINDS:
        path, title, detail = kind(tmp_path, starter_model_path)
        shown = drop_and_wait_error(qtbot, win, path)
        text = find(win, QLabel, "errorText").text()
        assert banner.isVisible(), kind.__name__
        assert title in text and detail in text and path.name in text, (kind.__name__, text)
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
    path, title, _ = unsupported_arch(tmp_path, starter_model_path)
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
    assert "cancelled" in find(win, QLabel, "statusMessage").text()

