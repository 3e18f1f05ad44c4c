"""The header: the health score (large, coloured by status), mode, model, job, uptime, link."""

from __future__ import annotations

import time

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from .. import fmt
from ..glyphs import big_number
from ..view import View
from .base import DIM, LABEL_STYLE, NO_TRAINING, STATUS_STYLE, Variants

KEYS_HINT = "q quit · p pause · r refresh"


def header(view: View, width: int) -> Variants:
    """Big: the score three rows tall beside three lines of context. Compact: one line."""
    score, status = _health(view)
    style = STATUS_STYLE.get(status, "bold")
    alarm = _disconnected_line(view)
    digits = big_number(score, style)
    info_w = max(10, width - digits[0].cell_len - 2)
    clock = time.strftime("%H:%M:%S", time.localtime(view.wall))
    info = [
        _spread(_title_line(view, status, style), "", info_w),
        _spread(_model_line(view), clock, info_w),
        _spread(_job_line(view), KEYS_HINT if view.interactive else "", info_w),
    ]
    big = Table.grid(padding=(0, 2))
    big.add_column(no_wrap=True)
    big.add_column(no_wrap=True, width=info_w)
    big.add_row(Group(*digits), Group(*info))
    compact = Text.assemble((f" {score} {status.upper()} ", f"{style} reverse"), " ", no_wrap=True, overflow="ellipsis")
    compact.append_text(_summary(view))
    return [_with(big, alarm), _with(compact, alarm)]


def _spread(left: Text, right: str, width: int) -> Text:
    """``left`` cut to fit, then ``right`` pushed to the far end — when there is room for it."""
    room = width - len(right) - 2 if right and left.cell_len + len(right) + 2 <= width else width
    line = left.copy()
    line.truncate(room, overflow="ellipsis")
    if room < width:
        line.append(" " * (width - line.cell_len - len(right)))
        line.append(right, style=DIM)
    return line


def _with(line: RenderableType, alarm: Text | None) -> RenderableType:
    return Group(line, alarm) if alarm is not None else line


def _health(view: View) -> tuple[str, str]:
    if view.snapshot is None:
        return "--", "waiting"
    health = view.diagnosis.health
    return f"{health.score:.0f}", health.status


def _title_line(view: View, status: str, style: str) -> Text:
    line = Text.assemble(("TrainPulse ", "bold"), (status.upper(), style), "  ")
    line.append_text(_link_text(view))
    if view.paused:
        line.append("  PAUSED", style="bold reverse")
    return line


def _link_text(view: View) -> Text:
    link = view.link
    ago = fmt.duration(view.wall - link.changed_at)
    if link.state == "local":
        return Text.assemble(("● ", "green"), link.source)
    if link.state == "connecting":
        return Text.assemble(("○ ", "yellow"), f"connecting to {link.source}")
    if link.state == "reconnected":
        return Text.assemble(("● ", "bold yellow"), (f"reconnected {ago} ago ", "bold yellow"), link.source)
    if link.state == "disconnected":
        return Text.assemble((" DISCONNECTED ", "bold white on red"), " ", link.source)
    return Text.assemble(("● ", "green"), link.source)


def _disconnected_line(view: View) -> Text | None:
    link = view.link
    if link.state != "disconnected":
        return None
    line = Text(
        f"! no answer from {link.source} for {fmt.duration(view.wall - link.changed_at)}",
        style="bold red",
        no_wrap=True,
        overflow="ellipsis",
    )
    if link.error:
        line.append(f" ({link.error})", style="red")
    stale = "" if link.last_ok is None else f"; showing data from {fmt.duration(view.wall - link.last_ok)} ago"
    line.append(f"{stale}; retrying", style="red")
    return line


def _model_line(view: View) -> Text:
    t = view.training or NO_TRAINING
    parts = (t.model_family, t.framework, t.precision, t.workload_kind)
    line = Text.assemble(("model ", LABEL_STYLE), (t.model_name or "—", "bold"))
    details = " · ".join(p for p in parts if p)
    if details:
        line.append(f"  {details}", style=DIM)
    return line


def _job_line(view: View) -> Text:
    t = view.training or NO_TRAINING
    line = Text.assemble(("job ", LABEL_STYLE))
    words = []
    if t.world_size:
        degrees = [
            f"{label} {size}"
            for label, size in (
                ("dp", t.data_parallel_size),
                ("tp", t.tensor_parallel_size),
                ("pp", t.pipeline_parallel_size),
            )
            if size
        ]
        words.append(f"world {t.world_size}" + (f" ({' · '.join(degrees)})" if degrees else ""))
    if t.global_step is not None:
        words.append(f"step {t.global_step:,}")
    if t.hostname:
        words.append(t.hostname)
    words.append(f"mode {view.mode or '—'}")
    words.append(f"up {fmt.duration(view.uptime_s)}")
    line.append(" · ".join(words))
    return line


def _summary(view: View) -> Text:
    t = view.training or NO_TRAINING
    words = [] if view.link.state == "local" else [view.mode or "—"]
    if t.model_name:
        words.append(t.model_name)
    if t.global_step is not None:
        words.append(f"step {t.global_step:,}")
    words.append(f"up {fmt.duration(view.uptime_s)}")
    line = Text(" · ".join(words) + "  ")
    line.append_text(_link_text(view))
    if view.paused:
        line.append("  PAUSED", style="bold reverse")
    return line
