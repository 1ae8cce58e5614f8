"""The model card's "Save a quantized copy…": the size shown for each type is the size of
the file llama-quantize writes (tests/golden/quant_synth.json), the copy is written on a
background thread with progress and is llama-quantize's file, and Cancel leaves nothing."""
from __future__ import annotations

import hashlib
import json

import pytest
from ember.ui.models_view import ModelRow, read_card
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QPushButton

from tests.support.ui import LOAD_TIMEOUT_MS
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


# ---- the starter (Q4_1): a file that is already quantized ----------------------------------

@pytest.fixture
def starter_dialog(qtbot, starter_model_path, monkeypatch, tmp_path):
    from ember.ui.quantize_dialog import QuantizeDialog
    from PySide6.QtWidgets import QFileDialog
    row = ModelRow(read_card(starter_model_path), loaded=False)
    qtbot.addWidget(row)
    qtbot.mouseClick(row.findChild(QPushButton, "modelRowQuantize"), Qt.LeftButton)
    d = row.findChild(QuantizeDialog, "quantizeDialog")
    assert d is not None
    qtbot.waitExposed(d)
    d.saved_to = tmp_path / "starter.copy.gguf"
    monkeypatch.setattr(QFileDialog, "getSaveFileName",
                        lambda *a, **k: (str(d.saved_to), "GGUF models (*.gguf)"))
    yield d
    if d.running():
        d.cancel_event.set()
        d.worker.join()


def choose(qtbot, dialog, type_name: str) -> None:
    """Clicks the row of type_name in the dialog's list."""
    view = dialog.types
    rows = [view.item(i) for i in range(view.count())]
    item = next(i for i in rows if i.data(Qt.UserRole) == type_name)
    view.scrollToItem(item)
    qtbot.mouseClick(view.viewport(), Qt.LeftButton, pos=view.visualItemRect(item).center())
    assert dialog.chosen_type() == type_name


def test_requantizing_the_starter_when_allowed_writes_a_loadable_model(qtbot, starter_dialog):
    from ember.engine import Model, SamplingParams
    from PySide6.QtWidgets import QCheckBox, QStyle, QStyleOptionButton
    d = starter_dialog
    box = d.findChild(QCheckBox, "quantizeAllowRequantize")
    assert box.isVisible() and not box.isChecked()  # off unless the user asks
    assert "already quantized (Q4_1, Q8_0)" in d.findChild(QLabel, "quantizeRequantizeNote").text()
    choose(qtbot, d, "Q4_0")
    opt = QStyleOptionButton()
    box.initStyleOption(opt)
    indicator = box.style().subElementRect(QStyle.SE_CheckBoxIndicator, opt, box)
    qtbot.mouseClick(box, Qt.LeftButton, pos=indicator.center())
    assert box.isChecked()
    qtbot.mouseClick(d.save_button, Qt.LeftButton)
    qtbot.waitUntil(lambda: not d.running() and d.save_button.isEnabled(),
                    timeout=LOAD_TIMEOUT_MS)
    assert d.status.text().startswith("Saved"), d.status.text()
    assert d.saved_to.stat().st_size == d.sizes["Q4_0"]
    m = Model(str(d.saved_to), n_ctx=128, n_threads=2)
    try:
        assert m.ftype == "Q4_0" and m.arch == "llama"
        text = "".join(m.generate("The capital of France is", 6, SamplingParams(temperature=0)))
        assert text.strip()
    finally:
        m.close()


def test_requantizing_unticked_says_why_in_plain_words(qtbot, starter_dialog):
    d = starter_dialog
    choose(qtbot, d, "Q4_0")
    qtbot.mouseClick(d.save_button, Qt.LeftButton)
    assert not d.running()
    assert d.status.text() == (
        "Nothing was written: this file is already Q4_1, so a Q4_0 copy would quantize its "
        "weights a second time and lose quality. Tick \u201cAllow requantizing\u201d to make "
        "it anyway.")
    assert not d.saved_to.exists() and not d.saved_to.with_name(d.saved_to.name + ".part").exists()


def test_copies_larger_than_the_starter_are_marked_and_say_why(qtbot, starter_dialog):
    d = starter_dialog
    rows = {d.types.item(i).data(Qt.UserRole): d.types.item(i).text()
            for i in range(d.types.count())}
    assert rows["Q8_0"].endswith("(larger than this file)")
    assert rows["Q4_K_M"].endswith("(larger than this file)")  # 100.6 MiB against 93.8
    assert not rows["Q4_0"].endswith(")") and not rows["Q3_K_M"].endswith(")")
    assert rows["Q4_1"].endswith("(this file's own type)")
    assert d.sizes[d.chosen_type()] < d.src_size  # the preselected type is a smaller copy
    choose(qtbot, d, "Q8_0")
    assert "Larger than this file (93.8 MB) and no more precise: its weights are already " \
        "Q4_1" in d.findChild(QLabel, "quantizeDescription").text()


def test_the_dialog_shows_its_rows_and_words_without_a_horizontal_scrollbar(qtbot,
                                                                           starter_dialog):
    d = starter_dialog
    view = d.types
    assert not view.horizontalScrollBar().isVisible()
    fm = view.fontMetrics()
    for i in range(view.count()):
        text = view.item(i).text()
        assert fm.horizontalAdvance(text) <= view.viewport().width(), text
        assert fm.elidedText(text, Qt.ElideRight, view.viewport().width()) == text
    for name in ("quantizeDescription", "quantizeRequantizeNote"):
        label = d.findChild(QLabel, name)
        assert label.wordWrap() and label.geometry().right() <= d.width(), name
