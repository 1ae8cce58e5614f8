#!/usr/bin/env python3
"""Renders Ember's icon (resources/icons/ember.svg, else the flame ember.ui.app paints)
into the files the packagers want: ember.png (512 px, Linux), ember.ico (16-256 px,
Windows) and ember.icns (16-1024 px, macOS). Needs only PySide6 (Qt renders, and the ICO
and ICNS containers are written here with PNG payloads), so it runs on every build host.

    python packaging/make_icons.py OUT_DIR
"""
from __future__ import annotations

import os
import struct
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SVG = REPO / "resources" / "icons" / "ember.svg"


def _render(size: int) -> bytes:
    from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QRectF, Qt
    from PySide6.QtGui import QImage, QPainter
    img = QImage(size, size, QImage.Format_ARGB32)
    img.fill(Qt.transparent)
    p = QPainter(img)
    p.setRenderHint(QPainter.Antialiasing)
    p.setRenderHint(QPainter.SmoothPixmapTransform)
    drawn = False
    if SVG.is_file():
        try:
            from PySide6.QtSvg import QSvgRenderer
            r = QSvgRenderer(str(SVG))
            if r.isValid():
                r.render(p, QRectF(0, 0, size, size))
                drawn = True
        except ImportError:
            pass
    if not drawn:
        sys.path.insert(0, str(REPO / "app"))
        from ember.ui.app import _painted_icon
        p.drawPixmap(0, 0, _painted_icon(size))
    p.end()
    data = QByteArray()
    buf = QBuffer(data)
    buf.open(QIODevice.WriteOnly)
    img.save(buf, "PNG")
    buf.close()
    return bytes(data.data())


def write_ico(path: Path, pngs: dict[int, bytes]) -> None:
    sizes = sorted(pngs)
    out = struct.pack("<HHH", 0, 1, len(sizes))
    offset = 6 + 16 * len(sizes)
    for s in sizes:
        d = pngs[s]
        out += struct.pack("<BBBBHHII", s % 256, s % 256, 0, 0, 1, 32, len(d), offset)
        offset += len(d)
    path.write_bytes(out + b"".join(pngs[s] for s in sizes))


ICNS_TYPES = [(b"icp4", 16), (b"icp5", 32), (b"icp6", 64), (b"ic07", 128), (b"ic08", 256),
              (b"ic09", 512), (b"ic10", 1024), (b"ic11", 32), (b"ic12", 64), (b"ic13", 512),
              (b"ic14", 1024)]


def write_icns(path: Path, pngs: dict[int, bytes]) -> None:
    body = b"".join(t + struct.pack(">I", 8 + len(pngs[s])) + pngs[s] for t, s in ICNS_TYPES)
    path.write_bytes(b"icns" + struct.pack(">I", 8 + len(body)) + body)


def main(out: str) -> int:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtGui import QGuiApplication
    app = QGuiApplication.instance() or QGuiApplication([sys.argv[0]])  # noqa: F841
    d = Path(out)
    d.mkdir(parents=True, exist_ok=True)
    pngs = {s: _render(s) for s in (16, 24, 32, 48, 64, 128, 256, 512, 1024)}
    (d / "ember.png").write_bytes(pngs[512])
    write_ico(d / "ember.ico", {s: pngs[s] for s in (16, 24, 32, 48, 64, 128, 256)})
    write_icns(d / "ember.icns", pngs)
    print(f"icons in {d} (from {'the SVG' if SVG.is_file() else 'the painted flame'})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "build/icons"))
