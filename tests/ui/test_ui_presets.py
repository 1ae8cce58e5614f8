"""Presets: made in Chat > Presets…, chosen per chat from the header's Preset button; a
chat's replies are written with its preset's settings and system prompt."""
from __future__ import annotations

import pytest
from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QApplication

from tests.support.ui import data_dir, load_by_drop, make_window, type_and_send  # noqa: F401

pytestmark = pytest.mark.native


def _menu_action(win, name: str):
    win.preset_menu.aboutToShow.emit()
    hits = [a for a in win.preset_menu.actions() if a.text() == name]
    assert hits, f"no {name!r} in {[a.text() for a in win.preset_menu.actions()]}"
    return hits[0]


def _make_preset_in_the_editor(qtbot, win, name, prompt, max_tokens):
    done = []

    def handle():
        dlg = QApplication.activeModalWidget()
        assert dlg is not None and dlg.objectName() == "presetDialog"
        qtbot.mouseClick(dlg.new_button, Qt.LeftButton)
        qtbot.keyClicks(dlg.name, name)
        qtbot.keyClicks(dlg.system_prompt, prompt)
        spin = dlg.spins["max_new_tokens"]
        spin.lineEdit().selectAll()
        qtbot.keyClicks(spin.lineEdit(), str(max_tokens))
        qtbot.mouseClick(dlg.save_button, Qt.LeftButton)
        done.append([dlg.list.item(i).text() for i in range(dlg.list.count())])
        dlg.reject()

    QTimer.singleShot(100, handle)
    win.findChild(type(win.menuBar().actions()[0]), "actionPresets").trigger()
    return done


def test_a_chat_writes_its_replies_with_its_preset(qtbot, data_dir, starter_model_path):
    win = make_window(qtbot, data_dir, restore_last=False)
    load_by_drop(qtbot, win, starter_model_path)
    assert _make_preset_in_the_editor(qtbot, win, "Terse", "Answer in two words.", 2) == \
        [["Terse"]]
    (p,) = win.store.presets()
    assert (p.name, p.system_prompt, p.params["max_new_tokens"]) == \
        ("Terse", "Answer in two words.", 2)
    assert p.params["temperature"] == win.settings.temperature  # the rest from Settings

    conv = win.new_chat()
    _menu_action(win, "Terse").trigger()
    assert win.preset_button.text() == "Preset: Terse"
    assert win.system_edit.toPlainText() == "Answer in two words."
    assert win.store.conversation(conv).preset_id == p.id
    assert win.store.conversation(conv).system_prompt == "Answer in two words."

    type_and_send(qtbot, win, "Tell me about the sea")
    reply = win.store.messages(conv)[-1]
    assert reply.role == "assistant" and reply.meta["preset"] == "Terse"
    assert reply.meta["generated_tokens"] <= 2 and reply.meta["stop_reason"] == "length"

    # another chat without the preset keeps Settings' reply length (6 in these tests)
    other = win.new_chat()
    assert other != conv and win.preset_button.text() == "Preset"
    type_and_send(qtbot, win, "Tell me about the sea")
    plain = win.store.messages(other)[-1]
    assert "preset" not in plain.meta and plain.meta["generated_tokens"] > 2

    # back in the first chat, its preset is ticked; No preset takes it off
    win.select_conversation(conv)
    assert _menu_action(win, "Terse").isChecked()
    _menu_action(win, "No preset").trigger()
    assert win.store.conversation(conv).preset_id is None
    assert win.preset_button.text() == "Preset"


def test_the_editor_refuses_a_second_preset_of_the_same_name(qtbot, data_dir):
    win = make_window(qtbot, data_dir, restore_last=False)
    win.chat.save_preset("Coder", "", {})
    errors = []

    def handle():
        dlg = QApplication.activeModalWidget()
        qtbot.mouseClick(dlg.new_button, Qt.LeftButton)
        qtbot.keyClicks(dlg.name, "coder")
        qtbot.mouseClick(dlg.save_button, Qt.LeftButton)
        errors.append(dlg.error.text() if dlg.error.isVisible() else "")
        dlg.list.setCurrentRow(0)
        qtbot.mouseClick(dlg.delete_button, Qt.LeftButton)
        dlg.reject()

    QTimer.singleShot(100, handle)
    win.findChild(type(win.menuBar().actions()[0]), "actionPresets").trigger()
    assert errors == ["There is already a preset named 'coder'."]
    assert win.store.presets() == []
