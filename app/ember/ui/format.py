"""Numbers as the app shows them: counts ("134.5M") and sizes ("93.8 MB")."""
from __future__ import annotations


def human_count(n: float) -> str:
    for unit in ("", "K", "M", "B", "T"):
        if abs(n) < 1000:
            return f"{n:.0f}" if not unit else f"{n:.1f}".rstrip("0").rstrip(".") + unit
        n /= 1000
    return f"{n:.1f}P"


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1024 or unit == "TB":
            return f"{n:.0f} {unit}" if unit in ("B", "KB") else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TB"
