"""The Settings switch that serves the loaded model (the app's own Model, a new context on
its weights): another window adds it as an OpenAI-compatible endpoint and chats through it
(the reply is the engine's own), a replaced model is served anew, the switch turned off
stops it, and a port in use is said in words."""
from __future__ import annotations

import copy
import socket

import pytest

from ember.remote import RemoteEndpoint, RemoteError
from tests.ui.test_ui_chat import greedy_reply
from tests.support.ui import (  # noqa: F401
    LOAD_TIMEOUT_MS,
    data_dir,
    make_window,
    type_and_send,
    write_settings,
)

pytestmark = pytest.mark.native


def test_serve_the_loaded_model_and_chat_through_it(qtbot, data_dir, tmp_path,
                                                    starter_model_path):
    write_settings(data_dir, serve=True, serve_port=0)  # 0: a free port (8080 in use)
    host = make_window(qtbot, data_dir, restore_last=False)
    with qtbot.waitSignal(host.serving_started, timeout=LOAD_TIMEOUT_MS) as serving:
        host.open_model_path(str(starter_model_path))
    url = serving.args[0]
    assert url.startswith("http://127.0.0.1:")
    assert host.status_serve.text() == f"serving {url}"

    client_dir = tmp_path / "client"
    client_dir.mkdir()
    write_settings(client_dir)
    client = make_window(qtbot, client_dir, restore_last=False)
    with qtbot.waitSignal(client.model_loaded, timeout=LOAD_TIMEOUT_MS):
        assert client.add_endpoint(url)
    assert client.model_info["name"] == "SmolLM2-135M-Instruct.Q4_1"
    type_and_send(qtbot, client, "What is the capital of France?")
    reply = client.store.messages(client.current_conv)[1]
    want = greedy_reply(starter_model_path, "What is the capital of France?",
                        client.settings.max_new_tokens)
    assert reply.content == want and want

    # the server borrows the app's model: replaced, the old one is let go before it closes
    # and the new one is served (port 0: the system picks again)
    with qtbot.waitSignal(host.serving_started, timeout=LOAD_TIMEOUT_MS) as again:
        host.open_model_path(str(starter_model_path))
    url = again.args[0]
    assert RemoteEndpoint(url, timeout=30).models() == ["SmolLM2-135M-Instruct.Q4_1"]
    stream = RemoteEndpoint(url, timeout=60).chat(
        "SmolLM2-135M-Instruct.Q4_1",
        [{"role": "user", "content": "What is the capital of France?"}],
        max_tokens=client.settings.max_new_tokens, temperature=0)
    assert "".join(stream) == want
    assert type_and_send(qtbot, host, "Hi")["generated_tokens"] >= 1  # the app still chats

    off = copy.deepcopy(host.settings)
    off.serve = False
    host.apply_settings(off)
    assert not host.local_server.running and not host.status_serve.isVisible()
    with pytest.raises(RemoteError) as e:
        RemoteEndpoint(url, timeout=10).models()
    assert e.value.kind == "refused"


def test_a_port_in_use_is_said_in_words(qtbot, data_dir, starter_model_path):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    try:
        port = taken.getsockname()[1]
        write_settings(data_dir, serve=True, serve_port=port)
        win = make_window(qtbot, data_dir, restore_last=False)
        with qtbot.waitSignal(win.serving_failed, timeout=LOAD_TIMEOUT_MS) as failed:
            win.open_model_path(str(starter_model_path))
        assert f"could not listen on 127.0.0.1:{port}" in failed.args[0]
        assert "The model is not being served" in win.error_banner.plain
        assert win.model is not None  # the chat itself is unaffected
    finally:
        taken.close()
