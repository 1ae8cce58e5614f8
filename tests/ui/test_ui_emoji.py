"""Emoji in chat text (issue 45): the bundled Noto Color Emoji is behind the application's
font after start-up, the font a message is drawn in has U+1F600, and the message shows it
in colour rather than as a box."""
from __future__ import annotations

from PySide6.QtGui import QColor, QFont, QFontInfo, QFontMetrics
from PySide6.QtWidgets import QApplication

from tests.support.ui import data_dir, make_window  # noqa: F401
from tests.ui.test_ui_layout import settle

GRIN = 0x1F600


def coloured_pixels(widget) -> int:
    """Pixels of the emoji's yellow (no theme colour, text or accent, has that hue)."""
    img = widget.grab().toImage()
    n = 0
    for x in range(img.width()):
        for y in range(img.height()):
            c = QColor(img.pixel(x, y))
            n += c.hsvSaturation() > 120 and 35 <= c.hsvHue() <= 60
    return n


def test_a_message_with_emoji_is_drawn_with_the_emoji_font(qtbot, data_dir):
    from ember.storage.store import Store
    from ember.ui.fonts import EMOJI_FAMILY, EMOJI_FILES
    assert EMOJI_FILES[0].is_file()  # the copy the package bundles, not only the system's
    store = Store(data_dir / "history.sqlite3")
    cid = store.create_conversation(title="Smiles")
    store.add_message(cid, "user", "Good morning \U0001F600")
    store.add_message(cid, "assistant", "Good morning to you too \U0001F600\U0001F600")
    store.close()
    win = make_window(qtbot, data_dir, restore_last=False)
    win.select_conversation(cid)
    settle(qtbot)
    app_font = QApplication.instance().font()
    assert EMOJI_FAMILY in app_font.families()
    # letters keep the interface font (and its widths: the sidebar counts characters)
    assert QFontInfo(app_font).family() != EMOJI_FAMILY
    plain = QFont(app_font)
    plain.setFamilies([app_font.families()[0]])
    assert QFontMetrics(app_font).averageCharWidth() == QFontMetrics(plain).averageCharWidth()
    assert QFontMetrics(app_font).horizontalAdvance("Ember") == \
        QFontMetrics(plain).horizontalAdvance("Ember")
    assert win.sidebar.width() <= max(260, 30 * QFontMetrics(plain).averageCharWidth())
    messages = win.chat_view.messages()
    assert [m.role for m in messages] == ["user", "assistant"]
    for m in messages:
        assert QFontMetrics(m.body.font()).inFontUcs4(GRIN)
        assert QFontMetrics(m.body.document().defaultFont()).inFontUcs4(GRIN)
        assert coloured_pixels(m.body) >= 20, m.role
    # a message without emoji has none of that colour: the count is the emoji's
    assert coloured_pixels(messages[0].role_label) == 0
