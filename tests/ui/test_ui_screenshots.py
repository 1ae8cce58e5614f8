"""scripts/screenshots.py --matrix (issue 45): the example chat rendered at fonts 10, 13 and
16, 900x600 and 1440x900, light and dark, each render checked as the layout tests check a
window: no label cut off or shortened where it has room, no two widgets of a layout over
each other, the status bar, chat column and header as test_ui_responsive wants them."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QLabel, QLayout, QWidget

from tests.support.ui import data_dir  # noqa: F401
from tests.ui.test_ui_responsive import check_chat_column, check_labels, check_status_bar

pytestmark = pytest.mark.native

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "screenshots.py"


def load_script():
    spec = importlib.util.spec_from_file_location("ember_screenshots", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def laid_out(layout: QLayout) -> list[QWidget]:
    """The visible widgets a layout places, through its nested layouts."""
    out = []
    for i in range(layout.count()):
        item = layout.itemAt(i)
        if item.widget() is not None:
            if item.widget().isVisible():
                out.append(item.widget())
        elif item.layout() is not None:
            out += laid_out(item.layout())
    return out


def check_no_overlap(win) -> None:
    for parent in [win, *win.findChildren(QWidget)]:
        if not parent.isVisible() or parent.layout() is None:
            continue
        kids = [k for k in laid_out(parent.layout()) if k.width() > 0 and k.height() > 0]
        for i, a in enumerate(kids):
            for b in kids[i + 1:]:
                assert not a.geometry().intersects(b.geometry()), \
                    (parent.objectName(), a.objectName() or type(a).__name__, a.geometry(),
                     b.objectName() or type(b).__name__, b.geometry())


def check_no_label_cut(win) -> None:
    for label in win.findChildren(QLabel):
        if not label.isVisible() or not label.text() or label.wordWrap() \
                or label.textFormat() == label.textFormat().RichText or "<" in label.text():
            continue
        fm = label.fontMetrics()
        room = label.contentsRect().width()
        whole = getattr(label, "full_text", label.text)()
        if whole != label.text():  # shortened with "…": only where the whole does not fit
            assert fm.horizontalAdvance(whole) > room, (label.objectName(), whole, room)
        assert fm.horizontalAdvance(label.text()) <= room, \
            (label.objectName(), label.text(), room)


def test_the_matrix_renders_every_size_font_and_theme_without_cut_or_overlap(
        qtbot, data_dir, tmp_path, starter_model_path):
    from ember.ui.app import create_application
    shots = load_script()
    create_application()
    cid = shots.write_example(data_dir, str(starter_model_path))
    checked = []

    def check(win, name):
        # render_matrix closes and deletes each window itself (qtbot closing it again at
        # teardown would touch a deleted C++ object while a Python reference lives on)
        assert (win.width(), win.height()) in shots.MATRIX_SIZES, name
        assert win.colors["name"] in name and f"-{win.font().pointSize()}pt-" in name
        check_no_label_cut(win)
        check_no_overlap(win)
        check_status_bar(win)
        check_chat_column(win)
        check_labels(win)
        checked.append(name)

    saved = shots.render_matrix(data_dir, str(starter_model_path), cid, tmp_path / "m",
                                check=check)
    assert len(saved) == len(checked) == 3 * 2 * 2
    assert sorted(p.name for p in saved) == sorted(
        f"chat-{t}-{f}pt-{w}x{h}.png" for t in ("light", "dark") for f in (10, 13, 16)
        for w, h in ((900, 600), (1440, 900)))
    for p in saved:
        img = QImage(str(p))
        assert (img.width(), img.height()) in shots.MATRIX_SIZES, p.name
