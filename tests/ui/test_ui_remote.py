"""An OpenAI-compatible endpoint as the app's model, against a real `ember serve` on a
loopback port: added from the app, chatted with (the reply is the server's own answer),
listed on the Models page after a relaunch, its API key kept in the keyring and used again
after a relaunch, and a wrong address told in words."""
from __future__ import annotations

import json
import socket

import pytest
from PySide6.QtWidgets import QLabel

from tests.support.keyring_backends import memory_keyring  # noqa: F401
from tests.support.server_process import ServerProcess
from tests.support.ui import (  # noqa: F401
    GEN_TIMEOUT_MS,
    LOAD_TIMEOUT_MS,
    data_dir,
    find,
    make_window,
    type_and_send,
)

pytestmark = pytest.mark.native
MODEL = "SmolLM2-135M-Instruct.Q4_1"


@pytest.fixture(scope="module")
def server(starter_model_path):
    s = ServerProcess(starter_model_path, "--parallel", "1", "-c", "2048")
    yield s
    s.stop()


def whole_answer(server, text, max_tokens):
    _, _, body = server.request("POST", "/v1/chat/completions", {
        "model": MODEL, "messages": [{"role": "user", "content": text}],
        "max_tokens": max_tokens, "temperature": 0})
    return json.loads(body)["choices"][0]["message"]["content"]


def test_chat_through_an_endpoint(qtbot, data_dir, server):
    win = make_window(qtbot, data_dir, restore_last=False)
    with qtbot.waitSignal(win.model_loaded, timeout=LOAD_TIMEOUT_MS) as loaded:
        assert win.add_endpoint(server.url)
    assert loaded.args[0] == f"{server.url}#{MODEL}"
    assert win.model_info["remote"] and win.session is None
    assert find(win, QLabel, "modelArch").text() == "OpenAI-compatible endpoint"
    assert find(win, QLabel, "modelName").text() == MODEL
    stats = type_and_send(qtbot, win, "Name a fruit.")
    assert stats["stop_reason"] in ("eog", "length")
    msgs = win.store.messages(win.current_conv)
    assert [m.role for m in msgs] == ["user", "assistant"]
    want = whole_answer(server, "Name a fruit.", win.settings.max_new_tokens)
    assert msgs[1].content == want and want
    assert msgs[1].complete and msgs[1].meta["model_file"] == MODEL
    assert msgs[1].meta["generated_tokens"] == stats["generated_tokens"] >= 1
    assert win.chat_view.messages()[1].content == want
    # remembered: a new window lists it on the Models page and opens it from there
    win.close()
    win2 = make_window(qtbot, data_dir, restore_last=False)
    win2.show_models()
    (row,) = win2.models_view.endpoint_rows
    assert row.entry["url"] == server.url and row.entry["model"] == MODEL
    with qtbot.waitSignal(win2.model_loaded, timeout=LOAD_TIMEOUT_MS):
        row.open_button.click()
    assert win2.model_info["name"] == MODEL


def test_continue_is_not_offered_for_an_endpoint(qtbot, data_dir, server):
    """The chat API cannot extend a reply: no Continue button, the Chat menu's item is
    off, and asking anyway leaves the good reply as it was (no error blamed on the server)."""
    win = make_window(qtbot, data_dir, restore_last=False)
    with qtbot.waitSignal(win.model_loaded, timeout=LOAD_TIMEOUT_MS):
        win.add_endpoint(server.url, MODEL)
    type_and_send(qtbot, win, "Hi")
    reply = win.chat_view.messages()[-1]
    assert reply.role == "assistant"
    footer = reply.footer.text()
    assert footer and "error" not in footer
    assert reply.regenerate_button.isVisibleTo(win) and reply.regenerate_button.isEnabled()
    assert not reply.continue_button.isVisibleTo(win)
    chat_menu = next(a.menu() for a in win.menuBar().actions() if a.text() == "&Chat")
    (cont,) = [a for a in chat_menu.actions() if a.text() == "Continue reply"]
    assert not cont.isEnabled()
    stored = win.store.messages(win.current_conv)[1]
    cont.trigger()  # a disabled action does nothing; and the slot refuses by itself too
    win.continue_last()
    assert win.gen_job is None and not win.error_banner.isVisible()
    after = win.store.messages(win.current_conv)[1]
    assert (after.content, after.complete, after.meta) == (stored.content, True, stored.meta)
    assert win.chat_view.messages()[-1].footer.text() == footer


def test_a_wrong_address_says_why(qtbot, data_dir):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    win = make_window(qtbot, data_dir, restore_last=False)
    with qtbot.waitSignal(win.model_failed, timeout=LOAD_TIMEOUT_MS) as failed:
        win.add_endpoint(f"http://127.0.0.1:{port}")
    assert "The endpoint could not be used" in failed.args[0]
    assert "refused" in failed.args[0]
    assert win.model is None
    assert not win.add_endpoint("ftp://example")  # not an http(s) address: said at once
    assert "not an endpoint address" in win.error_banner.plain


def test_a_key_kept_in_the_keyring_opens_the_endpoint_after_a_relaunch(
        qtbot, data_dir, starter_model_path, memory_keyring):
    key = "sk-ui-remote-5c2e"
    locked = ServerProcess(starter_model_path, "--parallel", "1", "-c", "256",
                           env={"EMBER_API_KEY": key})
    try:
        win = make_window(qtbot, data_dir, restore_last=False)
        with qtbot.waitSignal(win.model_loaded, timeout=LOAD_TIMEOUT_MS):
            win.add_endpoint(locked.url, MODEL, key)
        win.close()
        assert memory_keyring.passwords == {("Ember endpoints", locked.url): key}
        assert key not in (data_dir / "settings.json").read_text()
        win2 = make_window(qtbot, data_dir, restore_last=False)
        win2.show_models()
        (row,) = win2.models_view.endpoint_rows
        with qtbot.waitSignal(win2.model_loaded, timeout=LOAD_TIMEOUT_MS):
            row.open_button.click()  # a 401 would be a failed load
        assert win2.model_info["name"] == MODEL
    finally:
        locked.stop()
