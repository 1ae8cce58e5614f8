"""The chat controller on its own, without a window: it loads the model on the engine
thread, stores the user's message and the streamed reply, and queues a second chat."""
from __future__ import annotations

import pytest

from tests.support.ui import GEN_TIMEOUT_MS, LOAD_TIMEOUT_MS, write_settings

pytestmark = pytest.mark.native


@pytest.fixture
def controller(qtbot, tmp_path, starter_model_path):
    from ember.storage.store import Store
    from ember.ui.app import create_application
    from ember.ui.chat_controller import ChatController
    create_application()
    settings = write_settings(tmp_path)
    store = Store(tmp_path / "history.sqlite3")
    c = ChatController(store, settings, tmp_path / "settings.json")
    with qtbot.waitSignal(c.model_ready, timeout=LOAD_TIMEOUT_MS) as ready:
        c.open_model(str(starter_model_path))
    assert ready.args[0]["file_name"] == starter_model_path.name
    yield c
    c.shutdown(lambda: None)
    store.close()


def test_controller_stores_the_message_and_the_reply(qtbot, controller):
    store = controller.store
    conv = store.create_conversation("New chat")
    texts = []
    controller.reply_text.connect(lambda r: texts.append(r.text))
    with qtbot.waitSignal(controller.reply_finished, timeout=GEN_TIMEOUT_MS) as done:
        controller.send(conv, "Hello", title="Hello")
    reply, meta, stats = done.args
    msgs = store.messages(conv)
    assert [(m.role, m.content) for m in msgs] == [("user", "Hello"), ("assistant", reply.text)]
    assert msgs[1].complete and msgs[1].meta == meta
    assert meta["generated_tokens"] == stats["generated_tokens"] >= 1
    assert meta["model_file"] == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert texts and texts[-1] == reply.text  # every flush was a store write, then a signal
    assert store.conversation(conv).title == "Hello"
    assert controller.reply is None and not controller.generating


def test_controller_queues_a_second_chat(qtbot, controller):
    store = controller.store
    a = store.create_conversation("a")
    b = store.create_conversation("b")
    finished = []
    controller.reply_finished.connect(lambda r, m, s: finished.append(r.conv_id))
    controller.send(a, "Hello")
    controller.send(b, "Hi")
    assert controller.queue == [b]
    qtbot.waitUntil(lambda: finished == [a, b] and not controller.generating,
                    timeout=GEN_TIMEOUT_MS)
    assert [m.role for m in store.messages(b)] == ["user", "assistant"]
