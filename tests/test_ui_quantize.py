"""The model card's "Save a quantized copy…": the size shown for each type is the size of
the file llama-quantize writes (tests/golden/quant_synth.json), the copy is written on a
background thread with progress and is llama-quantize's file, and Cancel leaves nothing."""
from __future__ import annotations

import hashlib
import json

import pytest
from ember.ui.models_view import ModelRow, read_card
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QPushButton

from tests.test_ui_support import LOAD_TIMEOUT_MS
from tools import make_quant_golden

pytestmark = pytest.mark.native


@pytest.fixture(scope="module")
def synth(golden_dir):
    return make_quant_golden.synth_path(), json.loads((golden_dir / "quant_synth.json").read_text())


@pytest.fixture
def dialog(qtbot, synth):
    row = ModelRow(read_card(synth[0]), loaded=False)
    qtbot.addWidget(row)
    button = row.findChild(QPushButton, "modelRowQuantize")
    assert button is not None and button.text() == "Save a quantized copy…"
    d = row.open_quantize_dialog()
    yield d
    if d.running():
        d.cancel_event.set()
        d.worker.join()


def test_sizes_shown_are_llama_quantizes_file_sizes(dialog, synth):
    runs = synth[1]["runs"]
    listed = [dialog.types.item(i).data(Qt.UserRole) for i in range(dialog.types.count())]
    assert "Q4_K_M" in listed and "Q8_0" in listed
    for name in listed:
        assert dialog.sizes[name] == runs[name]["size"], name


def test_copy_is_written_in_the_background_and_is_llama_quantizes(qtbot, dialog, synth, tmp_path):
    dst = tmp_path / "copy.Q4_K_M.gguf"
    seen = []
    dialog.relay.progress.connect(lambda done, total, name: seen.append(done))
    dialog.start(str(dst), "Q4_K_M", threads=2)
    assert dialog.running() and not dialog.save_button.isEnabled()
    qtbot.waitUntil(lambda: not dialog.running() and dialog.save_button.isEnabled(),
                    timeout=LOAD_TIMEOUT_MS)
    assert dialog.status.text().startswith("Saved"), dialog.status.text()
    assert seen and seen == sorted(seen) and dialog.progress.value() == 1000
    assert hashlib.sha256(dst.read_bytes()).hexdigest() == synth[1]["runs"]["Q4_K_M"]["sha256"]


def test_cancel_stops_and_leaves_no_file(qtbot, dialog, tmp_path):
    dst = tmp_path / "copy.gguf"
    dialog.relay.progress.connect(lambda *a: dialog.cancel_button.click() if dialog.running() else None)
    dialog.start(str(dst), "Q4_K_M", threads=2)
    assert dialog.cancel_button.text() == "Cancel"
    qtbot.waitUntil(lambda: not dialog.running() and dialog.save_button.isEnabled(),
                    timeout=LOAD_TIMEOUT_MS)
    assert "Cancelled" in dialog.status.text()
    assert not dst.exists() and not (tmp_path / "copy.gguf.part").exists()
