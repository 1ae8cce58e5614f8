"""Fitting a chat into the context window (drop oldest turns, or stop), raw completion
for models without a chat template, and the model card's numbers."""
from __future__ import annotations

import pytest

from tests.support.ui import data_dir, find, make_window, write_settings  # noqa: F401

pytestmark = pytest.mark.native


@pytest.fixture(scope="module")
def small_model(starter_model_path):
    from ember.chat import ChatTemplate
    from ember.engine import Model
    m = Model(starter_model_path, n_ctx=160)
    yield m, ChatTemplate.from_metadata(m.metadata, token_text=m.token_text)
    m.close()


def chat(n_turns):
    msgs = [{"role": "system", "content": "You are terse."}]
    for i in range(n_turns):
        msgs.append({"role": "user", "content": f"Question number {i}: what is {i} plus {i}?"})
        msgs.append({"role": "assistant", "content": f"It is {2 * i}. " * 3})
    msgs.append({"role": "user", "content": "And the last one?"})
    return msgs


def test_drop_oldest_keeps_the_system_prompt_and_latest_turn(small_model):
    from ember.chat import GenRequest, build_prompt
    m, t = small_model
    req = GenRequest(1, 1, chat(8), max_new_tokens=32, policy="drop_oldest")
    b = build_prompt(m, m.n_ctx, t, req)
    assert b.dropped > 0 and b.dropped % 2 == 0  # whole turns
    assert b.n_tokens + 32 <= m.n_ctx and "did not fit" in b.notice
    assert "You are terse." in b.text and "And the last one?" in b.text
    assert "Question number 0" not in b.text and "Question number 7" in b.text


def test_stop_policy_refuses_with_an_explanation(small_model):
    from ember.chat import ContextFull, GenRequest, build_prompt
    m, t = small_model
    with pytest.raises(ContextFull, match="fills the context window"):
        build_prompt(m, m.n_ctx, t, GenRequest(1, 1, chat(8), max_new_tokens=32, policy="stop"))
    b = build_prompt(m, m.n_ctx, t, GenRequest(1, 1, chat(0), max_new_tokens=32, policy="stop"))
    assert b.dropped == 0 and b.notice is None


def test_a_single_message_too_long_is_refused(small_model):
    from ember.chat import ContextFull, GenRequest, build_prompt
    m, t = small_model
    msgs = [{"role": "user", "content": "word " * 400}]
    with pytest.raises(ContextFull, match="too long"):
        build_prompt(m, m.n_ctx, t, GenRequest(1, 1, msgs, max_new_tokens=16))


def test_raw_completion_sends_the_text_as_is(small_model):
    from ember.chat import GenRequest, build_prompt
    m, t = small_model
    msgs = [{"role": "user", "content": "Once upon a time"},
            {"role": "assistant", "content": " there was"}, {"role": "user", "content": " a"}]
    b = build_prompt(m, m.n_ctx, t, GenRequest(1, 1, msgs, raw=True, max_new_tokens=8))
    assert b.text == "Once upon a time there was a"
    assert "<|im_end|>" in b.stop_strings


def test_continue_appends_to_the_reply(small_model):
    from ember.chat import GenRequest, build_prompt
    m, t = small_model
    msgs = [{"role": "user", "content": "Hi"}]
    b = build_prompt(m, m.n_ctx, t, GenRequest(1, 1, msgs, prefix="Hello! How", max_new_tokens=8))
    assert b.text.endswith("<|im_start|>assistant\nHello! How")


def test_context_full_in_the_app_is_explained(qtbot, data_dir, starter_model_path):
    write_settings(data_dir, n_ctx=160, context_policy="stop", max_new_tokens=32)
    win = make_window(qtbot, data_dir)
    with qtbot.waitSignal(win.model_loaded, timeout=120_000):
        win.open_model_path(str(starter_model_path))
    with qtbot.waitSignal(win.generation_finished, timeout=60_000) as blocker:
        win.send("word " * 200)
    assert blocker.args[0]["stop_reason"] == "context_full"
    from PySide6.QtWidgets import QLabel
    assert "context" in find(win, QLabel, "errorText").text().lower()
    # the user's message is kept, no empty reply is left behind
    assert [m.role for m in win.store.messages(win.current_conv)] == ["user"]


def test_ram_estimate_grows_with_the_context(starter_model_path):
    from ember.engine import Model
    from ember.model_card import describe_model, estimate_ram
    m = Model(starter_model_path, metadata_only=True)
    info = describe_model(m, starter_model_path)
    kv_per_token = 2 * 30 * 64 * 3 * 2  # K and V, 30 layers, 3 KV heads of 64, F16
    assert info["head_dim"] == 64 and info["n_head_kv"] == 3 and info["n_layer"] == 30
    small, big = estimate_ram(info, 512), estimate_ram(info, 8192)
    assert small > info["file_size"]
    # only the KV cache grows with the context (the engine keeps no n_ctx scores buffer)
    assert big - small == kv_per_token * (8192 - 512)


def test_system_prompt_typed_in_the_first_chat_after_launch_is_used(
        qtbot, data_dir, starter_model_path, monkeypatch):
    """`ember MODEL.gguf` on a fresh data folder: no chat exists until the first Send, and
    the system prompt typed before it belongs to that chat."""
    from ember.ui import engine_thread
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QPlainTextEdit, QPushButton, QToolButton
    real_build_prompt = engine_thread.build_prompt
    prompts = []  # the text the engine thread gives the model

    def recording_build_prompt(*args, **kwargs):
        built = real_build_prompt(*args, **kwargs)
        prompts.append(built.text)
        return built

    monkeypatch.setattr(engine_thread, "build_prompt", recording_build_prompt)
    win = make_window(qtbot, data_dir, open_model=str(starter_model_path))
    qtbot.waitUntil(lambda: win.model is not None, timeout=120_000)
    assert win.current_conv is None and win.stack.currentWidget() is win.chat_page

    qtbot.mouseClick(find(win, QToolButton, "systemPromptButton"), Qt.LeftButton)
    system = find(win, QPlainTextEdit, "systemPromptEdit")
    assert system.isVisible()
    pirate = "You are a pirate. Answer like one."
    qtbot.keyClicks(system, pirate)
    qtbot.keyClicks(win.composer.input, "Where is the treasure?")
    with qtbot.waitSignal(win.generation_finished, timeout=180_000):
        qtbot.mouseClick(find(win, QPushButton, "sendButton"), Qt.LeftButton)
    conv = win.store.conversation(win.current_conv)
    assert conv.system_prompt == pirate
    assert system.toPlainText() == pirate and system.isVisible()
    assert len(prompts) == 1
    assert pirate in prompts[0] and prompts[0].index(pirate) < prompts[0].index("treasure")
