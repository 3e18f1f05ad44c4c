"""The dashboard's small drawings: bars, sparklines, a stacked bar, big digits.

Each returns a :class:`rich.text.Text` of an exact cell width, so panels can
budget columns precisely and the layout never wraps by surprise.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from rich.text import Text

EIGHTHS = " ▏▎▍▌▋▊▉█"
SPARKS = "▁▂▃▄▅▆▇█"
EMPTY_STYLE = "grey30"

#: Three-row block digits for the big health score.
BIG_DIGITS: dict[str, tuple[str, str, str]] = {
    "0": ("█▀█", "█ █", "▀▀▀"),
    "1": ("▀█ ", " █ ", "▀▀▀"),
    "2": ("▀▀█", "█▀▀", "▀▀▀"),
    "3": ("▀▀█", " ▀█", "▀▀▀"),
    "4": ("█ █", "▀▀█", "  ▀"),
    "5": ("█▀▀", "▀▀█", "▀▀▀"),
    "6": ("█▀▀", "█▀█", "▀▀▀"),
    "7": ("▀▀█", "  █", "  ▀"),
    "8": ("█▀█", "█▀█", "▀▀▀"),
    "9": ("█▀█", "▀▀█", "▀▀▀"),
    "-": ("   ", "▀▀▀", "   "),
    "?": ("▀▀█", " █▀", " ▀ "),
}


def bar(fraction: float | None, width: int, style: str) -> Text:
    """A horizontal bar ``width`` cells wide, filled to ``fraction`` (0-1) in eighths."""
    width = max(0, width)
    if fraction is None or width == 0:
        return Text("·" * width, style=EMPTY_STYLE)
    eighths = round(min(1.0, max(0.0, fraction)) * width * 8)
    full, part = divmod(eighths, 8)
    filled = "█" * full + (EIGHTHS[part] if part else "")
    return Text.assemble((filled, style), ("░" * (width - len(filled)), EMPTY_STYLE))


def sparkline(values: Sequence[float | None], width: int, style: str, min_span: float = 0.5) -> Text:
    """The last ``width`` values as block heights.

    The scale runs from the window's minimum to its maximum, but always spans
    at least ``min_span`` of the maximum, so 2 % of noise stays a ripple and a
    40 % collapse is a cliff. Missing values (no training report that tick)
    show as gaps: a stall is a hole, not interpolated away.
    """
    recent = list(values)[-width:] if width > 0 else []
    known = [v for v in recent if v is not None and math.isfinite(v)]
    if not known:
        return Text(" " * max(0, width))
    hi = max(known)
    lo = min(min(known), hi - abs(hi) * min_span)
    span = hi - lo
    chars = []
    for v in recent:
        if v is None or not math.isfinite(v):
            chars.append(" ")
        elif span <= 0:
            chars.append(SPARKS[len(SPARKS) // 2])
        else:
            chars.append(SPARKS[min(len(SPARKS) - 1, int((v - lo) / span * len(SPARKS)))])
    return Text(" " * (width - len(recent)) + "".join(chars), style=style)


def stacked_bar(parts: Sequence[tuple[float, str]], width: int) -> Text:
    """One bar split into ``(value, style)`` parts by largest remainder, exactly ``width`` wide."""
    total = sum(max(0.0, v) for v, _ in parts)
    if total <= 0 or width <= 0:
        return Text("·" * max(0, width), style=EMPTY_STYLE)
    exact = [max(0.0, v) / total * width for v, _ in parts]
    cells = [int(x) for x in exact]
    by_remainder = sorted(range(len(parts)), key=lambda i: exact[i] - cells[i], reverse=True)
    for i in by_remainder[: width - sum(cells)]:
        cells[i] += 1
    return Text.assemble(*(("█" * n, style) for n, (_, style) in zip(cells, parts, strict=True) if n))


def big_number(text: str, style: str) -> list[Text]:
    """``text`` (digits) drawn three rows tall, one :class:`Text` per row."""
    glyphs = [BIG_DIGITS.get(ch, BIG_DIGITS["?"]) for ch in text]
    return [Text(" ".join(g[row] for g in glyphs), style=style) for row in range(3)]
