"""Asks for an OpenAI-compatible endpoint: its address, an API key if it wants one, and
which of its models (blank: the first it lists). Says where the key will be kept."""
from __future__ import annotations

from PySide6.QtWidgets import QDialog, QDialogButtonBox, QFormLayout, QLabel, QLineEdit

from ..storage import keystore

KEY_IN_KEYRING = "The key is kept in this system's keyring."
KEY_IN_FILE = ("The key is stored in Ember's settings file: this system has no keyring. "
               "Only your user account can read that file.")


class EndpointDialog(QDialog):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.setWindowTitle("Add an OpenAI-compatible endpoint")
        form = QFormLayout(self)
        self.url = QLineEdit()
        self.url.setObjectName("endpointUrl")
        self.url.setPlaceholderText("http://127.0.0.1:8080")
        form.addRow("Address", self.url)
        self.api_key = QLineEdit()
        self.api_key.setObjectName("endpointApiKey")
        self.api_key.setEchoMode(QLineEdit.Password)
        self.api_key.setPlaceholderText("only if the server asks for one")
        form.addRow("API key", self.api_key)
        self.key_note = QLabel(KEY_IN_KEYRING if keystore.available() else KEY_IN_FILE)
        self.key_note.setObjectName("endpointKeyNote")
        self.key_note.setWordWrap(True)
        self.key_note.setProperty("field", True)
        form.addRow(self.key_note)
        self.model = QLineEdit()
        self.model.setObjectName("endpointModel")
        self.model.setPlaceholderText("blank: the first model it serves")
        form.addRow("Model", self.model)
        note = QLabel("Replies come from that server: what you type is sent to it.")
        note.setWordWrap(True)
        note.setProperty("field", True)
        form.addRow(note)
        buttons = QDialogButtonBox(QDialogButtonBox.Ok | QDialogButtonBox.Cancel)
        buttons.button(QDialogButtonBox.Ok).setText("Add")
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        form.addRow(buttons)

    def values(self) -> tuple[str, str, str | None]:
        return self.url.text().strip(), self.model.text().strip(), \
            self.api_key.text().strip() or None
