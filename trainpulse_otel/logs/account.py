"""What a read of logs amounts to, in words: which lines became what, and what could not be judged from them.

:func:`account` turns a reader's :class:`~.stats.ReadStats` into a :class:`LogAccount`: the lines read as
iteration reports (by the parser that read them), as failure lines (by kind), and not understood; how the
reports' times were known; whether the log looks wrapped by a terminal; and notes on each judgement the lines
gave too little for, with what would let it be made. ``replay`` prints it, the report shows it, ``eval -logs``
keeps it. Pure: counts in, sentences out; the knob values it quotes are handed in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..samples import PROGRESS_GAP
from .stats import ReadStats

#: How each failure event kind reads in a sentence.
KIND_WORDS = {
    "watchdog_timeout": "collective timeout",
    "transport_error": "transport error",
    "cuda_oom": "out-of-memory",
    "process_failed": "crash",
    "driver_xid": "XID",
    "gpu_fault": "GPU fault",
    "progress_gap": "silence (time passing, no step)",
}
#: How a report's time was known, in words.
TIMED_WORDS = {"stamp": "their time stamps", "step_time": "the step times they print", "line_order": "line order"}


@dataclass(frozen=True)
class LogAccount:
    """The account of one read (see the module docstring); ``notes`` are whole sentences."""

    lines: int
    reports: int
    events: int
    unknown: int
    parsers: Mapping[str, int] = field(default_factory=dict)
    kinds: Mapping[str, int] = field(default_factory=dict)
    timed_by: Mapping[str, int] = field(default_factory=dict)
    joined: int = 0
    notes: tuple[str, ...] = ()

    def summary(self) -> str:
        """One sentence: the lines and what they became."""
        read = ", ".join(f"{n} by {name}" for name, n in sorted(self.parsers.items(), key=lambda x: -x[1]))
        kinds = ", ".join(f"{n} {KIND_WORDS.get(kind, kind)}" for kind, n in sorted(self.kinds.items()))
        return (
            f"{self.lines} line(s): {self.reports} iteration report(s)"
            + (f" ({read})" if read else "")
            + f", {self.events} failure line(s)"
            + (f" ({kinds})" if kinds else "")
            + f", {self.unknown} not understood"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "lines": self.lines,
            "reports": self.reports,
            "events": self.events,
            "not_understood": self.unknown,
            "parsers": dict(self.parsers),
            "events_by_kind": dict(self.kinds),
            "timed_by": dict(self.timed_by),
            "joined": self.joined,
            "notes": list(self.notes),
        }


def account(stats: ReadStats, knobs: Mapping[str, float]) -> LogAccount:
    """The account of what ``stats`` counted; ``knobs``: the detectors' knob values by ``SIGNAL.KNOB`` (the
    amounts the notes quote)."""
    return LogAccount(
        stats.lines,
        stats.reports,
        stats.events,
        stats.unknown,
        dict(stats.parsers),
        dict(stats.kinds),
        dict(stats.timed_by),
        stats.joined,
        tuple(_notes(stats, knobs)),
    )


def _notes(s: ReadStats, knobs: Mapping[str, float]) -> list[str]:
    notes: list[str] = []
    if s.reports == 0 and s.kinds.get(PROGRESS_GAP):
        notes.append(
            "No line read as a training iteration: loss and throughput had nothing to judge; the silence was told by "
            "the log's own clock (a progress bar's elapsed time, a hang detector's words)."
        )
    elif s.reports == 0:
        notes.append(
            "No line read as a training iteration: the numeric signals (loss, throughput, stalls) had nothing to "
            "judge; a line that carries a step and a loss (any format) would be read."
        )
    else:
        notes.extend(_time_notes(s))
        notes.extend(_loss_notes(s, knobs))
        if not s.step_times and not s.throughput:
            notes.append(
                "No step time or throughput in the iteration lines: throughput_collapse and the step-time "
                "signals were not judged."
            )
        if len(s.ranks) < 2:
            notes.append(
                "One rank's lines: stragglers and sync waits need each rank's own lines (a [rankN]: prefix, or a "
                "file per rank)."
            )
    if s.joined:
        notes.append(
            f"{s.joined} line(s) a terminal had wrapped were read with the line before them; a log saved from the "
            "job's own output (not copied from a terminal) has whole lines."
        )
    notes.append(
        "No GPU or host readings in a log: thermal, memory, power and utilisation signals were not judged, and MFU "
        "printed by the job is at most a warning (its peak and FLOP count are the job's own)."
    )
    return notes


def _time_notes(s: ReadStats) -> list[str]:
    if s.timed_by.get("stamp"):
        return []
    how = " and ".join(TIMED_WORDS[k] for k in ("step_time", "line_order") if s.timed_by.get(k))
    if s.kinds.get(PROGRESS_GAP):
        return [f"The lines carry no time stamps: time is taken from {how}; a silence was seen by the log's own clock."]
    return [
        (
            f"The lines carry no time stamps: time is taken from {how}, and a stall (time passing with no step) "
            "cannot be seen; stamped lines (the job's logging with asctime, a collector's stamps) would show it."
        )
    ]


def _loss_notes(s: ReadStats, knobs: Mapping[str, float]) -> list[str]:
    short = int(knobs.get("loss_spike.short_history", 4))
    full = int(knobs.get("loss_spike.min_history", 32))
    if s.losses == 0 and not s.nonfinite:
        return ["No loss in the iteration lines: loss_spike and nonfinite_loss had nothing to judge."]
    if s.losses < short:
        return [
            (
                f"{s.losses} finite loss(es) read: loss_spike needs {short} before it judges a spike; more "
                "iteration lines before the fault would let it."
            )
        ]
    if s.losses < full:
        return [
            (
                f"{s.losses} finite losses read: a spike is judged against doubling the median (the spread needs "
                f"{full} losses)."
            )
        ]
    return []
