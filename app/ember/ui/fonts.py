"""The emoji font, loaded at start as a fallback behind the interface font, so emoji in chat
text are drawn instead of empty boxes on systems that have no emoji font of their own."""
from __future__ import annotations

import logging

from PySide6.QtGui import QFont, QFontDatabase, QFontInfo
from PySide6.QtWidgets import QApplication

from .app import RESOURCES

log = logging.getLogger("ember.ui")

EMOJI_FAMILY = "Noto Color Emoji"
# ours (resources/fonts, bundled by packaging/ember.spec), then the system's own copy
EMOJI_FILES = (
    RESOURCES / "fonts" / "NotoColorEmoji.ttf",
    "/usr/share/fonts/truetype/noto/NotoColorEmoji.ttf",  # Debian: fonts-noto-color-emoji
)

_loaded: str | None = None


def load_emoji_font() -> str | None:
    """The emoji family's name once it is in Qt's font database (None: none found)."""
    global _loaded
    if _loaded is not None:
        return _loaded
    for path in EMOJI_FILES:
        try:
            font_id = QFontDatabase.addApplicationFont(str(path))
        except OSError:
            font_id = -1
        if font_id != -1:
            families = QFontDatabase.applicationFontFamilies(font_id)
            if families:
                _loaded = families[0]
                return _loaded
    if EMOJI_FAMILY in QFontDatabase.families():  # installed system-wide
        _loaded = EMOJI_FAMILY
        return _loaded
    log.info("no emoji font: emoji in chats are drawn as boxes")
    return None


def with_emoji_fallback(font: QFont, family: str) -> QFont:
    """font with family after its own families: its letters unchanged, emoji from family.
    The family the font resolves to goes first by its real name: a family list skips a name
    that is only an alias (Linux's default "Sans Serif"), which would leave the emoji font
    drawing the letters, its huge average width setting every width counted in characters."""
    families = list(font.families()) or [font.family()]
    if family in families:
        return font
    primary = QFontInfo(font).family()
    font = QFont(font)
    font.setFamilies([primary, *(f for f in families if f != primary), family])
    return font


def install_emoji_fallback(app: QApplication) -> str | None:
    """The emoji family behind the application's font, and behind every family Qt falls
    back to for symbols (a style sheet's or a code block's own font family keeps it too)."""
    family = load_emoji_font()
    if family is None:
        return None
    app.setFont(with_emoji_fallback(app.font(), family))
    add = getattr(QFontDatabase, "addApplicationFallbackFontFamily", None)  # Qt >= 6.8
    if add is not None:
        from PySide6.QtCore import QChar
        add(QChar.Script.Script_Common, family)
    return family
