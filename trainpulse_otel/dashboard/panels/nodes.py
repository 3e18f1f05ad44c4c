"""The node strip: one cell per node of a job, coloured by its state, so 64 or 512 nodes read at a glance.

A job daemon's snapshot has ``nodes``; each becomes a cell judged by :mod:`..job` — the worst of its GPUs
(the GPU table's red and yellow lines) and of the signals naming it. The cell's glyph says the same without
colour: ``■`` fine, ``▲`` warning, ``✖`` critical, ``?`` stale (silent for three of its intervals: its last
state is shown), ``◆`` the node the top root cause names. A few nodes get a labelled cell each; many get one
character each, in groups of eight, wrapped over several rows (binned, worst first, past that), with the
first node's number at the left of each row. Below: a legend and the nodes worth naming. A one-node
snapshot has no strip.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import groupby

from rich.text import Text

from .. import fmt
from ..grades import CRITICAL, OK, WARNING
from ..job import JobView, NodeState
from ..view import View
from .base import DIM, Variants, one_line, titled

#: Each state's glyph and style, readable without colour.
GLYPHS: dict[int, tuple[str, str]] = {OK: ("■", "green4"), WARNING: ("▲", "yellow3"), CRITICAL: ("✖", "red3")}
STALE = ("?", "bold magenta")
CAUSE = ("◆", "bold white on red")
GROUP = 8  # cells between two spaces
ROW_LABEL_W = 6
MAX_ROWS = 8
MAX_NAMED = 6


def glyph(node: NodeState) -> tuple[str, str]:
    """A node's cell: the top cause's mark, else stale, else its state."""
    return CAUSE if node.cause else STALE if node.stale else GLYPHS[node.level]


def nodes_panel(view: View, width: int) -> Variants:
    """Strip, legend and named nodes · a two-row strip and the first named line · one line · (one node: none)."""
    job = view.job
    if job is None:
        return [None]
    nodes = job.nodes
    stale = sum(n.stale for n in nodes)
    note = f"{len(nodes)} nodes · {sum(n.gpus for n in nodes)} GPUs" + (f" · {stale} stale" if stale else "")
    named = _named(job, view)
    return [
        titled("Nodes", *strip(nodes, width, MAX_ROWS), _legend(), *named, note=note),
        titled("Nodes", *strip(nodes, width, 2), *named[:1], note=note),
        one_line("Nodes", note, *named[:1]),
    ]


def strip(nodes: Sequence[NodeState], width: int, max_rows: int) -> list[Text]:
    """Labelled cells when every hostname fits in ``max_rows`` rows, else one character a node."""
    name_w = max(len(n.hostname) for n in nodes) + 2
    if len(nodes) * (name_w + 1) <= width * min(2, max_rows):
        return _labelled(nodes, width, name_w)
    cols = max(GROUP, width - ROW_LABEL_W)
    per_row = cols // (GROUP + 1) * GROUP or cols
    per_cell = max(1, math.ceil(len(nodes) / (per_row * max_rows)))
    cells = [max(nodes[i : i + per_cell], key=_worst_first) for i in range(0, len(nodes), per_cell)]
    lines = []
    for start in range(0, len(cells), per_row):
        line = Text(f"n{start * per_cell:<{ROW_LABEL_W - 1}}", style=DIM, no_wrap=True)
        row = cells[start : start + per_row]
        for g in range(0, len(row), GROUP):
            if g:
                line.append(" ")
            for (char, style), run in groupby(glyph(n) for n in row[g : g + GROUP]):  # one span per run
                line.append(char * len(list(run)), style=style)
        lines.append(line)
    if per_cell > 1:
        lines.append(Text(f"{'':<{ROW_LABEL_W}}one cell = {per_cell} nodes, shown by the worst", style=DIM))
    return lines


def _labelled(nodes: Sequence[NodeState], width: int, name_w: int) -> list[Text]:
    """A cell a node: its glyph and hostname, wrapped at ``width``."""
    lines, line = [], Text(no_wrap=True)
    for node in nodes:
        if line.plain and len(line) + name_w + 1 > width:
            lines.append(line)
            line = Text(no_wrap=True)
        char, style = glyph(node)
        line.append(char, style=style)
        line.append(f" {node.hostname}".ljust(name_w - 1), style=style if node.cause else DIM if node.stale else "")
        line.append(" ")
    return [*lines, line]


def _worst_first(node: NodeState) -> tuple[bool, bool, int]:
    """Which node of a binned cell shows: the top cause's, then a stale one, then the worst state."""
    return node.cause, node.stale, node.level


def _legend() -> Text:
    legend = Text(no_wrap=True, overflow="ellipsis")
    for (char, style), label in (
        (GLYPHS[OK], "ok"),
        (GLYPHS[WARNING], "warning"),
        (GLYPHS[CRITICAL], "critical"),
        (STALE, "stale"),
        (CAUSE, "root cause"),
    ):
        legend.append(char, style=style)
        legend.append(f" {label}  ", style=DIM)
    return legend


def _named(job: JobView, view: View) -> list[Text]:
    """The nodes worth naming: the top cause's, the stale ones, then critical and warning ones."""
    nodes = job.nodes
    causes = view.diagnosis.root_causes
    cause = causes[0].cause if causes else ""
    lines = [
        _line(CAUSE, f"{n.hostname}: {cause} (the top root cause)" + _silent(n, "; stale, "), "bold red")
        for n in nodes
        if n.cause
    ]
    stale = [n for n in nodes if n.stale and not n.cause]
    if stale:
        names = ", ".join(n.hostname + _silent(n, " (") + ")" for n in stale[:MAX_NAMED])
        lines.append(_line(STALE, f"stale: {names}" + _more(stale), "magenta"))
    for level, word in ((CRITICAL, "critical"), (WARNING, "warning")):
        hit = [n for n in nodes if n.level == level and not n.cause and not n.stale]
        if hit:
            names = ", ".join(n.hostname for n in hit[:MAX_NAMED]) + _more(hit)
            lines.append(_line(GLYPHS[level], f"{word}: {names}", GLYPHS[level][1]))
    return lines or [_line(GLYPHS[OK], f"all {len(nodes)} nodes ok", "")]


def _line(mark: tuple[str, str], text: str, style: str) -> Text:
    return Text.assemble(mark, " ", (text, style), no_wrap=True, overflow="ellipsis")


def _silent(node: NodeState, lead: str) -> str:
    """``lead`` + ``silent 20s`` for a stale node (nothing for a live one)."""
    return f"{lead}silent {fmt.duration(node.silent_s)}" if node.stale else ""


def _more(nodes: Sequence[NodeState]) -> str:
    return f" +{len(nodes) - MAX_NAMED} more" if len(nodes) > MAX_NAMED else ""
