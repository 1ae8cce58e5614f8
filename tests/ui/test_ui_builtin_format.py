"""A model file without a chat template but with Gemma's turn tokens (the real
gemma-3-270m file is one) chats in Gemma's format in the app, not raw completion,
with the system prompt in the first user turn, and its replies end at <end_of_turn>."""
from __future__ import annotations

import pytest
from PySide6.QtWidgets import QLabel

from tests.support.chain_models import gemma_turns_model
from tests.support.ui import GEN_TIMEOUT_MS, data_dir, find, make_window  # noqa: F401

pytestmark = pytest.mark.native


def test_gemma3_file_is_not_raw_completion(qtbot, data_dir, gemma_model_path):
    win = make_window(qtbot, data_dir)
    with qtbot.waitSignal(win.model_loaded, timeout=120_000):
        win.open_model_path(str(gemma_model_path))
    assert find(win, QLabel, "modelArch").text() == "gemma3"
    assert find(win, QLabel, "modelTemplate").text() == "Gemma (built-in)"
    assert not win._raw_mode()
    assert find(win, QLabel, "modelNotice").text() == (
        "The model has no chat template (tokenizer.chat_template is missing); "
        "using the built-in Gemma format instead.")
    assert find(win, QLabel, "modelHeads").text() == "4, KV 1"
    # the prompt the app builds for a chat with a system prompt
    from ember.chat import GenRequest, build_prompt
    msgs = [{"role": "system", "content": "Answer in one word."},
            {"role": "user", "content": "Capital of France?"}]
    built = build_prompt(win.model, win.model.n_ctx,
                         win.template, GenRequest(1, 1, msgs, max_new_tokens=8))
    assert built.text == ("<bos><start_of_turn>user\nAnswer in one word.\n\nCapital of France?"
                          "<end_of_turn>\n<start_of_turn>model\n")
    assert "<end_of_turn>" in built.stop_strings
    # raw mode chosen in Settings still wins
    win.settings.prompt_mode = "raw"
    assert win._raw_mode() and win._prompt_format(win.model_info) == "raw completion"
    win.close()


def test_reply_ends_at_end_of_turn_in_the_app(qtbot, data_dir, tmp_path):
    cm = gemma_turns_model()
    path = cm.write(tmp_path / "gemma-turns.gguf")
    win = make_window(qtbot, data_dir)
    win.settings.max_new_tokens = 20
    with qtbot.waitSignal(win.model_loaded, timeout=120_000):
        win.open_model_path(path)
    assert find(win, QLabel, "modelTemplate").text() == "Gemma (built-in)"
    conv = win.new_chat()
    win.store.update_conversation(conv, system_prompt="Be cheerful.")
    with qtbot.waitSignal(win.generation_finished, timeout=GEN_TIMEOUT_MS) as blocker:
        win.send("Hi")
    stats = blocker.args[0]
    # "Hello!" and then <end_of_turn>: an end of generation, not the 20-token limit
    assert stats["stop_reason"] == "eog" and stats["generated_tokens"] == 2
    msgs = win.store.messages(conv)
    assert [(m.role, m.content) for m in msgs] == [("user", "Hi"), ("assistant", "Hello!")]
    assert msgs[1].meta["stop_reason"] == "eog"
    footer = win.chat_view.messages()[-1].footer.text()
    assert footer == f"2 tokens · {msgs[1].meta['gen_tps']:.1f} t/s"  # "finished": no reason
    win.close()
