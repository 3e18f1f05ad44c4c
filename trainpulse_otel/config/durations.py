"""Go-style durations (``500ms``, ``1s``, ``2m``, ``1h30m``): parsed into seconds and spelled back.

A leaf: it imports nothing else of the package, so settings can read it before any part exists.
"""

from __future__ import annotations

import re

_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


def parse_duration(text: str) -> float:
    """Parse a Go duration (``1h2m3.5s``, ``500ms``) into seconds.

    Like Go's ``time.ParseDuration``: a unit is required except for ``0``.
    """
    s = text.strip()
    sign = -1.0 if s.startswith("-") else 1.0
    s = s.lstrip("+-")
    if s == "0":
        return 0.0
    if not s:
        raise ValueError(f"invalid duration {text!r}")
    total, pos = 0.0, 0
    while pos < len(s):
        m = _DURATION_PART.match(s, pos)
        if m is None:
            hint = "missing unit" if re.fullmatch(r"[\d.]+", s[pos:]) else "invalid"
            raise ValueError(f"{hint} in duration {text!r} (use e.g. 500ms, 1s, 2m)")
        total += float(m.group(1)) * _DURATION_UNITS[m.group(2)]
        pos = m.end()
    return sign * total


def format_duration(seconds: float) -> str:
    """The shortest Go-style spelling of a duration in seconds (for help and docs)."""
    if seconds and seconds < 1:
        return f"{seconds * 1000:g}ms"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds / 60:g}m"
    return f"{seconds:g}s"
