"""The ranks view: a heat strip of every rank's step time against the median, and the stragglers.

Per-rank ``step_time_ms`` is the rank's own busy time (waits for peers are in
``sync_wait_ms``), so a slow rank shows as long here and the others show the
wait it causes. Thousands of ranks fit by binning neighbours into one cell,
coloured by the slowest of them, so a single straggler is never averaged away.
Stragglers are called out by name from the diagnosis' ``rank_straggler``
signals, not guessed here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import groupby
from statistics import median
from typing import Any

from rich.text import Text

from ...diagnose import RANK_STRAGGLER
from ...samples import RankSample
from .. import fmt
from ..view import View
from .base import DIM, LABEL_STYLE, Variants, one_line, severity_badge, titled

#: Step time over the median rank's → colour, slowest band first.
HEAT: tuple[tuple[float, str], ...] = (
    (1.25, "red3"),
    (1.10, "dark_orange"),
    (1.05, "yellow3"),
    (1.02, "chartreuse3"),
)
COOL = "green4"
FLAGGED = "▼"
ROW_LABEL_W = 7
MAX_STRIP_ROWS = 4
MAX_CALLOUTS = 3


def heat_style(ratio: float | None) -> str:
    """The strip colour of a step-time ratio (None: the rank sent no step time)."""
    if ratio is None:
        return "grey30"
    return next((style for at_least, style in HEAT if ratio >= at_least), COOL)


@dataclass(frozen=True)
class RankStats:
    """The ranks of one report against their median busy time."""

    ranks: tuple[RankSample, ...]
    median_ms: float | None
    ratios: dict[int, float]

    @classmethod
    def of(cls, ranks: Sequence[RankSample]) -> RankStats:
        timed = [(r.rank, r.step_time_ms) for r in ranks if r.step_time_ms is not None]
        mid = median(ms for _, ms in timed) if timed else None
        ratios = {rank: ms / mid for rank, ms in timed} if mid else {}
        return cls(tuple(sorted(ranks, key=lambda r: r.rank)), mid, ratios)

    def slowest(self, k: int) -> list[tuple[int, float]]:
        return sorted(self.ratios.items(), key=lambda kv: kv[1], reverse=True)[:k]

    def by_rank(self, rank: int) -> RankSample | None:
        return next((r for r in self.ranks if r.rank == rank), None)

    def median_sync_wait(self) -> float | None:
        """How long the median rank waits for its peers: what a straggler costs the others."""
        values = [r.sync_wait_ms for r in self.ranks if r.sync_wait_ms is not None]
        return median(values) if values else None


def ranks_panel(view: View, width: int) -> Variants:
    """Strip (up to four rows) with legend, stats and callouts · one-row strip and callouts · one line · hidden."""
    ranks = view.training.ranks if view.training else ()
    if not ranks:
        return [one_line("Ranks", "no per-rank data in the training reports"), None] if view.training else [None]
    stats = RankStats.of(ranks)
    flagged = _flagged(view)
    note = f"{len(ranks)} ranks"
    callouts = _callouts(view, stats)
    full = titled(
        "Ranks", *strip(stats, flagged, width, MAX_STRIP_ROWS), _stats_line(stats), *callouts[:MAX_CALLOUTS], note=note
    )
    short = titled("Ranks", *strip(stats, flagged, width, 1), *callouts[:2], note=note)
    return [full, short, one_line("Ranks", note, f"median {fmt.millis(stats.median_ms)}", _headline(view, stats)), None]


def strip(stats: RankStats, flagged: set[int], width: int, max_rows: int) -> list[Text]:
    """The heat strip: labelled cells for a few ranks, binned cells for many."""
    cols = max(4, width - ROW_LABEL_W)
    n = len(stats.ranks)
    if cols // n >= 3:
        return [_labelled_cells(stats, flagged, min(6, cols // n))]
    per_cell = max(1, math.ceil(n / (cols * max_rows)))
    bins = [stats.ranks[i : i + per_cell] for i in range(0, n, per_cell)]
    lines = []
    for row_start in range(0, len(bins), cols):
        row = bins[row_start : row_start + cols]
        line = Text(f"r{row[0][0].rank:<{ROW_LABEL_W - 1}}", style=DIM, no_wrap=True)
        cells = [_bin_cell(cell, stats, flagged) for cell in row]
        for (char, style), run in groupby(cells):  # one span per run of equal cells, not one per cell
            line.append(char * len(list(run)), style=style)
        lines.append(line)
    if per_cell > 1:
        lines.append(Text(f"{'':<{ROW_LABEL_W}}one cell = {per_cell} ranks, coloured by the slowest", style=DIM))
    return lines


def _bin_cell(cell: Sequence[RankSample], stats: RankStats, flagged: set[int]) -> tuple[str, str]:
    """A binned cell: ``▼`` if it holds a flagged straggler, else a block coloured by its slowest rank."""
    members = [r.rank for r in cell]
    if any(m in flagged for m in members):
        return FLAGGED, "bold red"
    return "█", heat_style(max((stats.ratios[m] for m in members if m in stats.ratios), default=None))


def _labelled_cells(stats: RankStats, flagged: set[int], cell_w: int) -> Text:
    line = Text(f"{'rank':<{ROW_LABEL_W}}", style=DIM, no_wrap=True)
    for r in stats.ranks:
        rank = r.rank
        label = f"{FLAGGED}{rank}" if rank in flagged else str(rank)
        style = "bold white on red" if rank in flagged else f"black on {heat_style(stats.ratios.get(rank))}"
        line.append(f"{label:^{cell_w - 1}}", style=style)
        line.append(" ")
    return line


def _stats_line(stats: RankStats) -> Text:
    slow = ", ".join(f"r{rank} {ratio:.2f}×" for rank, ratio in stats.slowest(3))
    line = Text.assemble(
        ("median busy ", LABEL_STYLE),
        fmt.millis(stats.median_ms),
        (" · slowest ", DIM),
        slow,
        no_wrap=True,
        overflow="ellipsis",
    )
    legend = Text("   ")
    for at_least, style in reversed(HEAT):
        legend.append("■", style=style)
        legend.append(f"≥{at_least:.2f}× ", style=DIM)
    return line.append_text(legend)


def _flagged(view: View) -> set[int]:
    return {rank for signal in view.signals(RANK_STRAGGLER.name) for rank in _subject_ranks(signal.subject)}


def _lateness(evidence: Mapping[str, Any], stats: RankStats, rank: int) -> tuple[float | None, float | None]:
    """How much slower a flagged rank is than the median rank, and how long the others wait for it (ms): the
    signal's own figures — the panel states what the signal and its cause state — else this report's."""
    slower, peers = evidence.get("slower_than_median"), evidence.get("peers_wait_ms")
    if slower is None and rank in stats.ratios:
        slower = stats.ratios[rank] - 1.0
    if peers is None and (r := stats.by_rank(rank)) is not None and r.sync_wait_ms is not None:
        peers = stats.median_sync_wait()
    return (None if slower is None else float(slower)), (None if peers is None else float(peers))


def _flagged_lateness(view: View, stats: RankStats) -> dict[int, float | None]:
    """Each flagged straggler and how much slower than the median rank its signal says it is."""
    return {
        rank: _lateness(signal.evidence, stats, rank)[0]
        for signal in view.signals(RANK_STRAGGLER.name)
        for rank in _subject_ranks(signal.subject)
    }


def _callouts(view: View, stats: RankStats) -> list[Text]:
    """One line per flagged straggler: who, where, how much slower, what it costs the others."""
    lines = []
    for signal in view.signals(RANK_STRAGGLER.name):
        subject = signal.subject
        for rank in _subject_ranks(subject):
            r = stats.by_rank(rank) or RankSample(rank=rank)
            host = subject.get("hostname", r.hostname) if view.job is not None else None
            where = [f"rank {rank} @ {host}" if host else f"rank {rank}"]
            gpu = subject.get("gpu_index", r.gpu_index)
            if gpu is not None:
                where.append(f"GPU {gpu}")
            if r.hostname and host is None:
                where.append(r.hostname)
            line = Text.assemble(
                severity_badge(signal.severity), " ", (" · ".join(where), "bold red"), no_wrap=True, overflow="ellipsis"
            )
            slower, peers = _lateness(signal.evidence, stats, rank)
            if slower is not None:
                line.append(f"  {slower:.0%} slower than the median rank")
            if peers is not None:
                line.append(f"; others wait {fmt.millis(peers)} for it", style=DIM)
            lines.append(line)
    return lines


def _at_host(view: View, stats: RankStats, rank: int) -> str:
    """``21 @ node-002`` on a job across nodes (``21`` on one node): where a straggler runs."""
    r = stats.by_rank(rank)
    return f"{rank} @ {r.hostname}" if view.job is not None and r is not None and r.hostname else str(rank)


def _subject_ranks(subject: Mapping[str, Any]) -> list[int]:
    if subject.get("rank") is not None:
        return [int(subject["rank"])]
    return [int(r) for r in subject.get("ranks") or []]


def _headline(view: View, stats: RankStats) -> str | tuple[str, str]:
    flagged = _flagged_lateness(view, stats)
    if flagged:
        named = ", ".join(
            _at_host(view, stats, rank) + (f" ({slower:.0%} slower)" if slower is not None else "")
            for rank, slower in sorted(flagged.items())[:4]
        )
        return f"stragglers: rank {named}", "bold red"
    rank, ratio = stats.slowest(1)[0] if stats.ratios else (None, None)
    return f"slowest r{rank} {ratio:.2f}×" if rank is not None else "no step times"
