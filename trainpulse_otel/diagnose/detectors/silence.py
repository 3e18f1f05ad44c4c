"""A stall the job's own stamped output shows: the gaps of :mod:`trainpulse_otel.logs.progress`, judged.

A log replayed after the fact has no heartbeat and no GPU to say the job was expected to run, and its ticks come
only where its lines do: a hang shows as one stamped line long after the last step (a save, a health poll, the
user's ^C). Such a gap is a fact, not a live observation, so :class:`Silences` judges each gap event against the
stall's own thresholds — max(``min_stall_s``, ``step_multiple`` × the interval between the job's progress lines),
and at least max(``save_or_eval_min_s``, ``save_or_eval_multiple`` × that interval) when the lines since said the
job was saving or evaluating, or the time is a progress bar's own since it began; a trainer's own hang detector
that says no time met its own — and keeps the longest gap of the silence until a step completes again.
:class:`~.stall.TrainingStalled` reports it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ...samples import PROGRESS_GAP, LogEvent
from ..thresholds import CONVENTION, SECONDS, TIMES, Knob, Thresholds

#: The knobs of a silence during a save or an evaluation (the stall detector declares them beside its own).
SILENCE_KNOBS = (
    Knob(
        "save_or_eval_multiple",
        30.0,
        TIMES,
        CONVENTION,
        "from a log, a silence its lines say is a save or an evaluation is a stall from this many intervals "
        "between the job's progress lines: such pauses take a bounded share of a job's time",
        1,
    ),
    Knob(
        "save_or_eval_min_s",
        300.0,
        SECONDS,
        CONVENTION,
        "and at least this long: a checkpoint of a model of tens of billions of parameters to a network file "
        "system takes minutes",
        1,
    ),
)


#: The phases a silence may be a pause of: a save, an evaluation, the job's end (``exit``: it took this long), a
#: progress bar's own clock since it began (``start``: data-loader workers, a compile).
PAUSES = ("checkpoint", "eval", "exit", "start")


class Silences:
    """The gaps the job's output told, and the longest one of the current silence."""

    def __init__(self, thresholds: Thresholds) -> None:
        self.thresholds = thresholds
        self.worst: dict[str, Any] | None = None  # the current silence's longest gap, judged

    def observe(self, events: Iterable[LogEvent]) -> None:
        for event in events:
            if event.kind == PROGRESS_GAP:
                self._judge(event)

    def progressed(self, step: int | None) -> None:
        """A step past the silence's last one completed (or a report without steps came): the silence is over."""
        worst = self.worst
        if worst is not None and (
            step is None or worst["last_global_step"] is None or step > worst["last_global_step"]
        ):
            self.worst = None

    def threshold_s(self, details: dict[str, Any]) -> float:
        t = self.thresholds
        interval = details.get("interval_s")
        threshold = (
            max(t.min_stall_s, t.step_multiple * interval) if isinstance(interval, (int, float)) else t.min_stall_s
        )
        if details.get("phase") in PAUSES:
            pause = t.save_or_eval_multiple * interval if isinstance(interval, (int, float)) else 0.0
            threshold = max(threshold, t.save_or_eval_min_s, pause)
        return threshold

    def _judge(self, event: LogEvent) -> None:
        details = dict(event.details)
        gap, threshold = details.get("gap_s"), self.threshold_s(details)
        if not isinstance(gap, (int, float)):  # a trainer's own hang detector that says no time: its threshold was met
            if not details.get("detector"):
                return
            gap = threshold
        if gap < threshold or (self.worst is not None and gap <= self.worst["stalled_s"]):
            return
        self.worst = {
            "stalled_s": round(gap, 1),
            "threshold_s": round(threshold, 1),
            "last_global_step": details.get("last_step"),
            "since": details.get("since"),
            "progress_interval_s": details.get("interval_s"),
            "phase": details.get("phase"),
            "inferred_from": "log_stamps",
            "line": event.message,
            "lines": [event.where()] if event.where() else [],
            "lagging": [],
            "lagging_count": 0,
        }
        if event.rank is not None:
            self.worst["rank"] = event.rank


DOING = {
    "checkpoint": " while saving",
    "eval": " while evaluating",
    "start": " since its progress bar began",
    "exit": " after its lines said the run was over (the process did not exit)",
}


def told_message(told: dict[str, Any]) -> str:
    """The message of a stall the job's stamped lines showed."""
    doing = DOING.get(told.get("phase") or "", "")
    step = f" after step {told['last_global_step']}" if told.get("last_global_step") is not None else ""
    return (
        f"no training step for {told['stalled_s']:.0f} s{step}{doing} (threshold {told['threshold_s']:.0f} s): "
        "the job's own stamped lines show the time passing; which rank is stuck is unknown"
    )
