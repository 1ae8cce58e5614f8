"""The endpoints on the Models page: Remove asks first, then forgets the endpoint and deletes
its key from the keyring; the Add dialog says where the key will be kept."""
from __future__ import annotations

from PySide6.QtWidgets import QMessageBox

from ember.storage import keystore
from ember.storage.settings import Settings
from ember.ui.endpoint_dialog import KEY_IN_FILE, KEY_IN_KEYRING, EndpointDialog
from tests.support.keyring_backends import memory_keyring, no_keyring  # noqa: F401
from tests.support.ui import data_dir, make_window  # noqa: F401

A, B = "http://10.0.0.5:8080", "http://10.0.0.6:8080"


def window_with_two_endpoints(qtbot, data_dir):
    s = Settings.load(data_dir / "settings.json")
    s.remember_endpoint(A, "qwen", "sk-a")
    s.remember_endpoint(B, "llama", "sk-b")
    s.save(data_dir / "settings.json")
    win = make_window(qtbot, data_dir, restore_last=False)
    win.show_models()
    return win


def row_for(win, url):
    (row,) = [r for r in win.models_view.endpoint_rows if r.entry["url"] == url]
    return row


def test_remove_asks_then_forgets_the_endpoint_and_its_key(qtbot, data_dir, memory_keyring,
                                                             monkeypatch):
    win = window_with_two_endpoints(qtbot, data_dir)
    assert set(memory_keyring.passwords) == {(keystore.SERVICE, A), (keystore.SERVICE, B)}
    asked = []

    def answer(reply):
        def question(parent, title, text, *a):
            asked.append(text)
            return reply
        monkeypatch.setattr(QMessageBox, "question", question)

    answer(QMessageBox.No)
    row_for(win, A).remove_button.click()
    assert asked and "qwen" in asked[0] and A in asked[0]
    assert len(win.models_view.endpoint_rows) == 2  # "No" keeps it
    assert (keystore.SERVICE, A) in memory_keyring.passwords

    answer(QMessageBox.Yes)
    row_for(win, A).remove_button.click()
    assert [r.entry["url"] for r in win.models_view.endpoint_rows] == [B]
    assert memory_keyring.passwords == {(keystore.SERVICE, B): "sk-b"}
    on_disk = Settings.load(data_dir / "settings.json").endpoints
    assert on_disk == [{"url": B, "model": "llama", "api_key": "sk-b"}]
    assert "sk-" not in (data_dir / "settings.json").read_text()


def test_the_dialog_says_where_the_key_goes(qtbot, memory_keyring):
    dlg = EndpointDialog()
    qtbot.addWidget(dlg)
    assert dlg.key_note.text() == KEY_IN_KEYRING


def test_the_dialog_says_when_there_is_no_keyring(qtbot, no_keyring):
    dlg = EndpointDialog()
    qtbot.addWidget(dlg)
    assert dlg.key_note.text() == KEY_IN_FILE
    assert "stored in Ember's settings file: this system has no keyring" in KEY_IN_FILE
