"""Fit the panels to the terminal: pick each panel's variant, collapsing in a fixed order.

Wide terminals (≥ :data:`WIDE_MIN_WIDTH` columns) get two stacks under the
header — hardware and training on the left, the diagnosis and the host on the
right; narrower ones get one stack. Every panel offers variants from richest
to most compact; while the frame is taller than the terminal, the next step of
:data:`COLLAPSE_ORDER` that touches the header or a tallest stack is applied,
so the first things to give are decoration and the host, and the last are the
signals — the reason the dashboard exists.
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.segment import Segment
from rich.table import Table

from .panels.base import Panel, Variants
from .panels.diagnosis import causes_panel, signals_panel
from .panels.gpus import gpus_panel
from .panels.header import header
from .panels.host import host_panel
from .panels.nodes import nodes_panel
from .panels.ranks import ranks_panel
from .panels.training import training_panel
from .view import View

PANELS: dict[str, Panel] = {
    "header": header,
    "nodes": nodes_panel,
    "gpus": gpus_panel,
    "training": training_panel,
    "ranks": ranks_panel,
    "signals": signals_panel,
    "causes": causes_panel,
    "host": host_panel,
}
NARROW: tuple[tuple[str, ...], ...] = (("nodes", "gpus", "training", "ranks", "signals", "causes", "host"),)
WIDE: tuple[tuple[str, ...], ...] = (("nodes", "gpus", "training", "ranks"), ("signals", "causes", "host"))
WIDE_MIN_WIDTH = 140
LEFT_SHARE = 0.56
GAP = 2

#: (panel, variant level) steps, applied in this order until the frame fits.
COLLAPSE_ORDER: tuple[tuple[str, int], ...] = (
    ("header", 1),  # the big score becomes a one-line badge
    ("host", 1),  # host: three lines → one
    ("training", 1),  # no context line or breakdown legend
    ("ranks", 1),  # one strip row, two callouts
    ("nodes", 1),  # a job's node strip: two rows, one named line, no legend
    ("causes", 1),  # only the top cause, with its remediation
    ("gpus", 1),  # no column headings
    ("host", 2),  # host hidden
    ("signals", 1),  # first three signals and a count
    ("training", 2),  # training: one line
    ("ranks", 2),  # ranks: one line
    ("nodes", 2),  # nodes: one line
    ("gpus", 2),  # two GPUs a line
    ("causes", 2),  # top cause: one line
    ("ranks", 3),  # ranks hidden
    ("gpus", 3),  # GPUs: one summary line
    ("signals", 2),  # signals: one line
)


def render_screen(view: View, console: Console, width: int, height: int | None) -> RenderableType:
    """The whole frame for a ``width`` × ``height`` terminal (``height=None``: no limit)."""
    fit = _Fit(view, console, width)
    if height is not None:
        fit.collapse(height)
    frame = fit.compose()
    if height is None:
        return frame
    return Lines(console.render_lines(frame, console.options.update(width=width, height=height)))


class _Fit:
    """The variants of every panel at its column width, and the level chosen for each."""

    def __init__(self, view: View, console: Console, width: int) -> None:
        self.console = console
        self.stacks = WIDE if width >= WIDE_MIN_WIDTH else NARROW
        self.widths = _column_widths(width, len(self.stacks))
        self.width_of = {name: self.widths[i] for i, stack in enumerate(self.stacks) for name in stack}
        self.width_of["header"] = width
        self.variants: dict[str, Variants] = {name: panel(view, self.width_of[name]) for name, panel in PANELS.items()}
        self.level = dict.fromkeys(PANELS, 0)
        self._heights: dict[tuple[str, int], int] = {}

    def chosen(self, name: str) -> RenderableType | None:
        variants = self.variants[name]
        return variants[min(self.level[name], len(variants) - 1)]

    def height(self, name: str) -> int:
        key = (name, self.level[name])
        if key not in self._heights:
            renderable = self.chosen(name)
            options = self.console.options.update(width=self.width_of[name], height=None)
            self._heights[key] = 0 if renderable is None else len(self.console.render_lines(renderable, options))
        return self._heights[key]

    def stack_heights(self) -> list[int]:
        return [sum(self.height(name) for name in stack) for stack in self.stacks]

    def total(self) -> int:
        return self.height("header") + max(self.stack_heights())

    def collapse(self, height: int) -> None:
        """Apply the first useful step of the collapse order until the frame fits, then undo what need not be.

        Steps are coarse (a panel can drop several lines at once), so after the
        frame fits, earlier steps are retried in reverse: a column heading comes
        back if the lines freed by a later step leave room for it.
        """
        applied: list[tuple[str, int]] = []
        while self.total() > height:
            step = self._next_step()
            if step is None:
                break
            name, level = step
            applied.append((name, self.level[name]))
            self.level[name] = level
        for name, previous in reversed(applied):
            now = self.level[name]
            self.level[name] = previous
            if self.total() > height:
                self.level[name] = now

    def _next_step(self) -> tuple[str, int] | None:
        """The first step that deepens a panel in the header or a tallest stack."""
        heights = self.stack_heights()
        crowded = {name for stack, h in zip(self.stacks, heights, strict=True) if h == max(heights) for name in stack}
        for name, level in COLLAPSE_ORDER:
            if (name == "header" or name in crowded) and self.level[name] < level:
                return name, level
        return None

    def compose(self) -> RenderableType:
        stacks = [Group(*_present(self.chosen(name) for name in stack)) for stack in self.stacks]
        body: RenderableType = stacks[0]
        if len(stacks) == 2:
            grid = Table.grid(padding=0)
            grid.add_column(width=self.widths[0])
            grid.add_column(width=GAP)
            grid.add_column(width=self.widths[1])
            grid.add_row(stacks[0], "", stacks[1])
            body = grid
        return Group(*_present([self.chosen("header"), body]))


def _column_widths(width: int, columns: int) -> list[int]:
    if columns == 1:
        return [width]
    left = int((width - GAP) * LEFT_SHARE)
    return [left, width - GAP - left]


def _present(renderables: Iterable[RenderableType | None]) -> list[RenderableType]:
    return [r for r in renderables if r is not None]


class Lines:
    """Pre-rendered lines, drawn as they are: the frame cropped to the terminal's height."""

    def __init__(self, lines: list[list[Segment]]) -> None:
        self.lines = lines

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for i, line in enumerate(self.lines):
            yield from line
            if i < len(self.lines) - 1:
                yield Segment.line()
