"""The first-run page and the Models page at large fonts in a small window: nothing
squeezed (each label and button at least as tall as it asks), the window not forced wider
than 900 px, the Open button on screen."""
from __future__ import annotations

import pytest
from PySide6.QtWidgets import QLabel, QPushButton

from tests.ui.test_ui_layout import inside, settle
from tests.support.ui import data_dir, find, make_window, write_settings  # noqa: F401

pytestmark = pytest.mark.native


def unsqueezed(w) -> bool:
    need = w.heightForWidth(w.width()) if w.hasHeightForWidth() else w.minimumSizeHint().height()
    return w.height() >= need


@pytest.mark.parametrize("font_size", [10, 13, 16])
def test_first_run_page_scrolls_instead_of_squeezing(qtbot, data_dir, font_size):
    write_settings(data_dir, font_size=font_size)
    win = make_window(qtbot, data_dir, restore_last=False)
    win.resize(900, 600)
    settle(qtbot)
    assert win.width() == 900 and win.height() == 600
    panel = win.welcome.starter_panel
    button = find(panel, QPushButton, "starterDownloadButton")
    text = find(panel, QLabel, "starterHint")
    assert button.isVisibleTo(win) and unsqueezed(text)
    assert button.height() >= button.sizeHint().height()
    assert unsqueezed(find(win.welcome, QLabel, "dropHint"))


@pytest.mark.parametrize("font_size", [10, 16])
def test_models_page_fits_a_small_window(qtbot, data_dir, starter_model_path, font_size):
    write_settings(data_dir, font_size=font_size)
    (data_dir / "models").mkdir()
    (data_dir / "models" / "a-model-with-a-rather-long-file-name.Q4_1.gguf").symlink_to(
        starter_model_path)
    win = make_window(qtbot, data_dir, restore_last=False)
    win.resize(900, 600)
    win.show_models()
    settle(qtbot)
    assert win.width() == 900  # no label forced the window wider
    (row,) = win.models_view.rows
    assert inside(row.open_button, win)
    assert all(unsqueezed(lbl) for lbl in row.findChildren(QLabel))
    assert not win.card.isVisible()  # each model has its card here
