"""The diagnosis panels: active signals (severity, subject, age) with the nodes' risk, and the ranked root causes."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from ...diagnose.types import NodeRisk, RootCause, Signal
from .. import fmt
from ..view import View
from .base import DIM, Variants, one_line, severity_badge, subject_text, titled

NAME_W = 22
SUBJECT_W = 16
AGE_W = 6
SHORT_LIST = 3
TOP_CAUSES = 3
#: The node risks a signals panel names, riskiest first; from this risk on they are red (drain at the next checkpoint).
RISKS_SHOWN, HIGH_RISK = 4, 0.5


def signals_panel(view: View, width: int) -> Variants:
    """Every signal on a line · the first three and a count · one line."""
    signals = view.signals()
    if not signals:
        return [one_line("Signals", ("none active", "green"))]
    rows = [_signal_row(s, view.now, width) for s in signals]
    risk = _risk_row(view.diagnosis.node_risk)
    rows += [risk] if risk is not None else []
    note = _counts(signals)
    full = titled("Signals", *rows, note=note)
    short = full
    if len(rows) > SHORT_LIST:
        more = Text(f"  +{len(rows) - SHORT_LIST} more", style=DIM)
        short = titled("Signals", *rows[:SHORT_LIST], more, note=note)
    names = ", ".join(s.name for s in signals)
    return [full, short, one_line("Signals", (note, "bold"), names)]


def _signal_row(signal: Signal, now: float, width: int) -> Text:
    age = fmt.duration(now - signal.since)
    subject = subject_text(signal.subject)
    line = Text.assemble(
        severity_badge(signal.severity),
        " ",
        (f"{signal.name:<{NAME_W}}", "bold"),
        " ",
        (f"{age:>{AGE_W}}", DIM),
        " ",
        no_wrap=True,
        overflow="ellipsis",
    )
    if width >= 100:
        line.append(f"{subject[:SUBJECT_W]:<{SUBJECT_W}} ", style="cyan")
    line.append(signal.message or subject)
    return line


def _risk_row(risks: tuple[NodeRisk, ...]) -> Text | None:
    """``risk  node 0.68 · gpu3 0.68 · mlx5_0/1 0.35``: the riskiest components and nodes (hostname where another
    node's), the chance each interrupts the job; None while nothing shows any."""
    if not risks:
        return None
    shown = [f"{r.component}{'@' + r.hostname if r.hostname else ''} {r.risk:.2f}" for r in risks[:RISKS_SHOWN]]
    more = f" · +{len(risks) - RISKS_SHOWN}" if len(risks) > RISKS_SHOWN else ""
    worst = risks[0].risk
    style = "red" if worst >= HIGH_RISK else "yellow"
    return Text.assemble(("risk ", "bold"), (" · ".join(shown) + more, style), no_wrap=True, overflow="ellipsis")


def _counts(signals: list[Signal]) -> str:
    critical = sum(1 for s in signals if s.severity == "critical")
    words = [f"{critical} critical"] if critical else []
    if len(signals) - critical:
        words.append(f"{len(signals) - critical} warning")
    return ", ".join(words)


def causes_panel(view: View, width: int) -> Variants:
    """Top three with summary and remediation · the top one · one line · hidden when there are none."""
    causes = view.diagnosis.root_causes
    if not causes:
        return [None]
    blocks = [_cause_block(i + 1, c) for i, c in enumerate(causes[:TOP_CAUSES])]
    note = f"{len(causes)} ranked"
    top = causes[0]
    line = one_line("Cause", (f"{top.cause} {top.share()}", "bold"), top.summary)
    return [titled("Root causes", *blocks, note=note), titled("Root causes", blocks[0], note=note), line]


def _cause_block(place: int, cause: RootCause) -> Table:
    """``#1 cause 82%  subject  summary`` and ``→ remediation``, wrapped under their own column."""
    head = Text.assemble((cause.cause, "bold magenta"), f" {cause.share()}")
    subject = subject_text(cause.subject)
    if subject:
        head.append(f"  {subject}", style="cyan")
    head.append(f"  {cause.summary}")
    block = Table.grid(padding=(0, 1), expand=True)
    block.add_column(no_wrap=True, justify="right")
    block.add_column(ratio=1)
    block.add_row(Text(f"#{place}", style=DIM), head)
    if cause.remediation:
        block.add_row(Text("→", style="bold green"), Text(cause.remediation, style="green"))
    return block
