"""What every panel shares: the title rule, the palette, thresholds to colours.

A panel is a function ``(view, width) -> [variant, …]``: renderings from the
richest to the most compact, ``None`` meaning "hidden". The layout picks one
variant per panel so the whole frame fits the terminal.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rich.console import Group, RenderableType
from rich.rule import Rule
from rich.text import Text

from ...samples import TrainingSample
from ..view import View

Variants = list[RenderableType | None]
Panel = Callable[[View, int], Variants]

STATUS_STYLE = {"healthy": "bold green", "degraded": "bold yellow", "critical": "bold red"}
SEVERITY_BADGE = {"critical": ("CRIT", "bold white on red"), "warning": ("WARN", "bold black on yellow")}
TITLE_STYLE = "bold cyan"
LABEL_STYLE = "bold"
DIM = "grey50"
#: What a panel reads when there is no training report: every field unknown.
NO_TRAINING = TrainingSample()


def titled(title: str, *body: RenderableType, note: str | Text = "") -> RenderableType:
    """A panel: a one-line rule carrying the title (and a note), then the body."""
    heading = Text.assemble((f" {title} ", TITLE_STYLE))
    if note:
        heading.append_text(note if isinstance(note, Text) else Text(f"{note} ", style=DIM))
    return Group(Rule(heading, align="left", style="grey35"), *body)


def one_line(label: str, *parts: str | tuple[str, str] | Text) -> Text:
    """A collapsed panel: a bold label then ``·``-separated parts, cut with an ellipsis."""
    line = Text.assemble((label, TITLE_STYLE), " ", no_wrap=True, overflow="ellipsis")
    for i, part in enumerate(parts):
        if i:
            line.append(" · ", style=DIM)
        line.append_text(part if isinstance(part, Text) else Text.assemble(part))
    return line


def graded(value: float | None, thresholds: Sequence[tuple[float, str]], default: str = "green") -> str:
    """The style of the first ``(at_least, style)`` threshold ``value`` reaches, else ``default``."""
    if value is None:
        return DIM
    for at_least, style in thresholds:
        if value >= at_least:
            return style
    return default


def severity_badge(severity: str | None) -> Text:
    """``CRIT`` on red or ``WARN`` on yellow: readable without colour too."""
    label, style = SEVERITY_BADGE.get(severity or "", ("INFO", "bold"))
    return Text(label, style=style)


def subject_text(subject: Mapping[str, Any]) -> str:
    """``rank 5 · gpu 5`` from a signal's or cause's subject (lists allowed)."""
    if not subject:
        return ""
    words = []
    for key, label in (
        ("rank", "rank"),
        ("ranks", "ranks"),
        ("gpu_index", "gpu"),
        ("gpu_indices", "gpus"),
        ("hostname", "host"),
    ):
        value = subject.get(key)
        if value is None:
            continue
        shown = (
            ",".join(str(v) for v in value[:6]) + ("…" if len(value) > 6 else "")
            if isinstance(value, (list, tuple))
            else str(value)
        )
        words.append(f"{label} {shown}")
    return " · ".join(words)
