"""Starting the desktop app: `run_app(model_path_or_None) -> exit code`."""
from __future__ import annotations

import sys
from pathlib import Path

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QIcon, QLinearGradient, QPainter, QPainterPath, QPixmap
from PySide6.QtWidgets import QApplication

from ..storage import paths

# resources/ beside the repository's app/ folder, or inside a PyInstaller bundle
RESOURCES = Path(getattr(sys, "_MEIPASS", Path(__file__).resolve().parents[3])) / "resources"


def app_icon() -> QIcon:
    svg = RESOURCES / "icons" / "ember.svg"
    if svg.is_file():
        icon = QIcon(str(svg))
        if not icon.isNull():
            return icon
    return QIcon(_painted_icon(256))


def _painted_icon(size: int) -> QPixmap:
    """The ember flame, drawn (for installs without the resources folder)."""
    pm = QPixmap(size, size)
    pm.fill(Qt.transparent)
    p = QPainter(pm)
    p.setRenderHint(QPainter.Antialiasing)
    s = size / 256
    p.setPen(Qt.NoPen)
    p.setBrush(QColor("#1f1b18"))
    p.drawRoundedRect(QRectF(8 * s, 8 * s, 240 * s, 240 * s), 56 * s, 56 * s)
    flame = QPainterPath()
    flame.moveTo(128 * s, 40 * s)
    flame.cubicTo(150 * s, 84 * s, 196 * s, 110 * s, 192 * s, 156 * s)
    flame.cubicTo(188 * s, 196 * s, 160 * s, 220 * s, 128 * s, 220 * s)
    flame.cubicTo(96 * s, 220 * s, 66 * s, 196 * s, 66 * s, 158 * s)
    flame.cubicTo(66 * s, 124 * s, 92 * s, 110 * s, 100 * s, 82 * s)
    flame.cubicTo(112 * s, 98 * s, 114 * s, 112 * s, 112 * s, 126 * s)
    flame.cubicTo(124 * s, 104 * s, 132 * s, 76 * s, 128 * s, 40 * s)
    g = QLinearGradient(QPointF(128 * s, 40 * s), QPointF(128 * s, 220 * s))
    g.setColorAt(0, QColor("#ffb347"))
    g.setColorAt(1, QColor("#e8590c"))
    p.setBrush(g)
    p.drawPath(flame)
    p.end()
    return pm


def create_application(argv: list[str] | None = None) -> QApplication:
    app = QApplication.instance()
    if app is None:
        app = QApplication(argv if argv is not None else sys.argv[:1])
    app.setApplicationName("Ember")
    app.setApplicationDisplayName("Ember")
    app.setOrganizationName("Ember")
    app.setDesktopFileName("ember")
    app.setWindowIcon(app_icon())
    from .fonts import install_emoji_fallback  # here: fonts.py reads RESOURCES from this file
    install_emoji_fallback(app)
    return app


def run_app(model: str | None = None) -> int:
    from . import crash
    from .main_window import MainWindow
    app = create_application()
    data = paths.data_dir()
    crash.setup_logging(data)
    win = MainWindow(data, open_model=model)
    crash.install(on_error=win.show_crash)
    win.show()
    return int(app.exec())


def main() -> int:
    return run_app(sys.argv[1] if len(sys.argv) > 1 else None)


if __name__ == "__main__":
    sys.exit(main())
