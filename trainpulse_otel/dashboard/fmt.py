"""Short, fixed-width renderings of numbers for a terminal: bytes, rates, durations.

Every function takes ``None`` (a field the snapshot left out) and answers
``"-"``, so panels never branch on missing data themselves.
"""

from __future__ import annotations

from typing import Any

DASH = "-"
_BINARY = ("B", "K", "M", "G", "T", "P")


def num(value: Any, digits: int = 3) -> str:
    """A number in about ``digits`` significant figures, SI-suffixed past 1000 (75234 → 75.2k)."""
    if value is None:
        return DASH
    v = float(value)
    for suffix, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(v) >= scale:
            return f"{_sig(v / scale, digits)}{suffix}"
    return _sig(v, digits)


def _sig(v: float, digits: int) -> str:
    if v == 0:
        return "0"
    if abs(v) >= 10 ** (digits - 1):
        return f"{v:.0f}"
    text = f"{v:.{digits}g}"
    return text if "e" not in text else f"{v:.1e}"


def size(n_bytes: Any) -> str:
    """Bytes in binary units, three significant figures: 65035829248 → ``60.6G``."""
    if n_bytes is None:
        return DASH
    v = float(n_bytes)
    unit = 0
    while abs(v) >= 1000 and unit < len(_BINARY) - 1:
        v /= 1024
        unit += 1
    return f"{_sig(v, 3)}{_BINARY[unit]}"


def rate(bytes_per_sec: Any) -> str:
    """A byte rate: ``67.1M/s``."""
    return DASH if bytes_per_sec is None else f"{size(bytes_per_sec)}/s"


def percent(fraction_or_percent: Any, is_fraction: bool = False) -> str:
    """``88%`` from 88 (or from 0.88 with ``is_fraction``)."""
    if fraction_or_percent is None:
        return DASH
    v = float(fraction_or_percent) * (100 if is_fraction else 1)
    return f"{v:.1f}%" if 0 < abs(v) < 10 else f"{v:.0f}%"


def millis(ms: Any) -> str:
    """A time given in milliseconds: ``850ms``, ``2.31s``."""
    if ms is None:
        return DASH
    v = float(ms)
    return f"{v:.0f}ms" if v < 1000 else f"{v / 1000:.3g}s"


def duration(seconds: Any) -> str:
    """An age or an uptime, two units at most: ``45s``, ``3m05s``, ``2h14m``, ``3d04h``."""
    if seconds is None:
        return DASH
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"
