"""Reading GGUF metadata values for display, whatever their shape.

Hyperparameters are usually one number, but newer files store some per layer, as an
array with one value per block (gemma4's ``attention.head_count_kv``, or the
``feed_forward_length`` of models whose layers differ).  Anything that shows metadata
goes through these helpers, so an array (or a string, or junk) never raises.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

__all__ = ["count_text", "describe_value", "is_per_layer", "meta_int", "meta_ints", "per_layer_summary"]


def _number(v: Any) -> int | float | None:
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, (int, float)):
        return v
    if isinstance(v, str):  # llama.cpp hands some values over as text
        try:
            return int(v)
        except ValueError:
            try:
                return float(v)
            except ValueError:
                return None
    return None


def meta_ints(value: Any) -> list[int]:
    """Every integer in a scalar or per-layer value ([] when there is none)."""
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        items = list(value)
    else:
        items = [value]
    out = []
    for item in items:
        n = _number(item)
        if n is not None and n == n and abs(n) != float("inf"):  # not NaN or infinite
            out.append(int(n))
    return out


def meta_int(value: Any, default: int = 0, *, reduce: str = "max") -> int:
    """One integer for a metadata value: the value itself, or for a per-layer array
    its largest (``reduce="max"``, what sizes a buffer), smallest (``"min"``),
    most common (``"mode"``) or total (``"sum"``) entry; ``default`` if it has none."""
    values = meta_ints(value)
    if not values:
        return default
    if reduce == "max":
        return max(values)
    if reduce == "min":
        return min(values)
    if reduce == "sum":
        return sum(values)
    if reduce == "mode":
        return _mode(values)
    raise ValueError(f"unknown reduce {reduce!r}")


def _mode(values: list) -> Any:
    counts = Counter(values)
    best = max(counts.values())
    return next(v for v in values if counts[v] == best)  # the first of the most common


def _fmt(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def per_layer_summary(values: Sequence[Any]) -> str:
    """A per-layer array in a few characters: ``8`` when every layer has the same
    value, ``8 (per layer: 2-8)`` (most common value, then the range) for numbers,
    ``true (per layer: 25 true, 5 false)`` for a few distinct other values."""
    items = list(values)
    if not items:
        return "none"
    distinct = list(dict.fromkeys(items))
    mode = _mode(items)
    if len(distinct) == 1:
        return _fmt(mode)
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in items)
    if numeric:
        return f"{_fmt(mode)} (per layer: {_fmt(min(items))}-{_fmt(max(items))})"
    counts = Counter(items)
    shown = ", ".join(f"{counts[v]} {_fmt(v)}" for v in distinct[:4])
    more = ", ..." if len(distinct) > 4 else ""
    return f"{_fmt(mode)} (per layer: {shown}{more})"


def is_per_layer(value: Any, n_layer: int | None = None) -> bool:
    """A non-empty array of numbers (or booleans), as long as the model has layers
    when ``n_layer`` is given."""
    if not isinstance(value, Sequence) or isinstance(value, (str, bytes)) or not value:
        return False
    if not all(isinstance(v, (int, float, bool)) for v in value):
        return False
    return n_layer is None or len(value) == n_layer


def describe_value(value: Any, n_layer: int | None = None) -> str:
    """A metadata value as text for people: per-layer arrays (as long as the model
    has blocks, when ``n_layer`` is given) summarised, other values as they are."""
    if is_per_layer(value, n_layer):
        return per_layer_summary(value)
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        head = ", ".join(_fmt(v) for v in list(value)[:4])
        return f"[{head}{', ...' if len(value) > 4 else ''}] ({len(value)} items)"
    return _fmt(value)


def count_text(n: float) -> str:
    """A parameter count for people: "30.5B", "134.5M" (as `ember info` and llama-bench)."""
    for unit in ("", "K", "M", "B", "T"):
        if abs(n) < 1000:
            return f"{n:.1f}{unit}" if unit else f"{int(n)}"
        n /= 1000
    return f"{n:.1f}P"
