"""The step's schedule: pipeline-parallel bubbles and blocking checkpoint saves."""

from __future__ import annotations

from collections import deque
from typing import Any

from ..spec import TRAINING, FactSpec, SignalSpec
from ..thresholds import CONVENTION, SECONDS, SHARE, TIMES, Knob, Thresholds
from ..tick import Tick
from ..types import Finding, Policy
from .base import BaseDetector, percent, threshold_of
from .level import LevelDetector

PIPELINE_BUBBLE = SignalSpec(
    "pipeline_bubble",
    "pipeline stages idle while the schedule fills and drains",
    TRAINING,
    0.06,
    "bubble",
    measured=True,
)
CHECKPOINT_STALL = SignalSpec(
    "checkpoint_stall",
    "training blocks while checkpoints are saved",
    TRAINING,
    0.08,
    "checkpoint",
    measured=True,
    policy=Policy(clear_after_s=60.0),
)

#: The share of recent time checkpoint saves blocked training, and the disk-write surge a save was inferred from.
CHECKPOINT_SHARE = FactSpec("checkpoint_share", SHARE, "the share of recent time checkpoint saves blocked training")
CHECKPOINT_WRITE_SURGE = FactSpec(
    "checkpoint_write_surge", TIMES, "disk writes over their normal rate when a save was inferred (None: none)"
)


class PipelineBubble(LevelDetector):
    """``pipeline_bubble``: pipeline stages idle while the schedule fills and drains.

    Statistic: median of the last 5 reported ``pipeline_bubble_ratio``; when a
    job does not report it but runs pipeline parallelism, the 1F1B theory
    ``(pp - 1) / (m + pp - 1)`` with ``m`` micro-batches per step
    (``gradient_accumulation_steps``). Warning at 20 %, critical at 35 %.
    """

    name = "bubble"
    signals = (PIPELINE_BUBBLE,)
    knobs = (
        Knob(
            "warning",
            0.20,
            SHARE,
            CONVENTION,
            "a fifth of the schedule idle: 1F1B with 4 stages and 12 micro-batches; more micro-batches or an "
            "interleaved schedule bring it down (Megatron-LM)",
            0,
            1,
        ),
        Knob("critical", 0.35, SHARE, CONVENTION, "a third of the schedule idle", 0, 1, at_least="warning"),
    )

    def measure(self, tick: Tick) -> float | None:
        report = tick.report
        if report is None:
            return None
        if report.pipeline_bubble_ratio is not None:
            return report.pipeline_bubble_ratio
        pp, m = report.pipeline_parallel_size, report.gradient_accumulation_steps
        if pp and pp > 1 and m:
            return (pp - 1) / (m + pp - 1)
        return None

    def describe(self, value: float, tick: Tick) -> tuple[str, dict[str, Any]]:
        report = tick.report or tick.training
        evidence: dict[str, Any] = {"bubble_ratio": round(value, 4)}
        if report is not None:
            evidence.update(
                pipeline_parallel_size=report.pipeline_parallel_size, micro_batches=report.gradient_accumulation_steps
            )
        return f"pipeline stages sit idle {percent(value)} of the schedule", evidence


class CheckpointStall(BaseDetector):
    """``checkpoint_stall``: training blocks while checkpoints are saved.

    Statistic: the share of the last 2 minutes (``span_s``) spent blocked in
    saves — the blocked seconds in that window over its length, so a job
    blocked 39 % of the time reads 39 % (a leaky integral read 15 % there and
    took 39 s to see it); a job watched for less than the span is judged over
    the time it was watched, at least ``min_span_s`` (one save in a young job's
    first seconds is not most of its time). A save counts while it
    runs — every GPU idle, no step finishing and the disk writing at least 3x
    its normal rate — and, for producers that only report it, through the
    ``checkpoint_ms`` of the step that ended it (time already counted is not
    counted twice). Warning at 10 % (12 s of blocking within ~2 min: a routine
    few-second save never reaches it), critical at 25 %.
    """

    name = "checkpoint"
    signals = (CHECKPOINT_STALL,)
    provides = (CHECKPOINT_SHARE, CHECKPOINT_WRITE_SURGE)
    knobs = (
        Knob(
            "warning",
            0.10,
            SHARE,
            CONVENTION,
            "12 s blocked within ~2 min: a routine few-second save never reaches it",
            0,
            1,
        ),
        Knob(
            "critical",
            0.25,
            SHARE,
            CONVENTION,
            "a quarter of the job's time spent blocked in saves",
            0,
            1,
            at_least="warning",
        ),
        Knob(
            "span_s",
            120.0,
            SECONDS,
            CONVENTION,
            "the recent time the blocked share is taken over",
            1,
            at_least="min_span_s",
        ),
        Knob(
            "min_span_s",
            60.0,
            SECONDS,
            CONVENTION,
            "a young job is judged over at least this long: one save in its first seconds is not most of its time",
            1,
        ),
        Knob(
            "write_surge",
            3.0,
            TIMES,
            CONVENTION,
            "disk writes at this many times their normal rate, every GPU idle and no step: a save under way",
            1,
        ),
    )

    def __init__(self, thresholds: Thresholds | None = None) -> None:
        super().__init__(thresholds)
        t = self.thresholds
        self.threshold = threshold_of(t)
        self.span_s, self.min_span_s, self.surge = t.span_s, t.min_span_s, t.write_surge
        self.share = 0.0
        self._blocked: deque[tuple[float, float]] = deque()  # (ts, seconds blocked) within the last span_s
        self._blocked_s = 0.0
        self._counted_s = 0.0  # inferred save time since the last report
        self._ongoing_s = 0.0
        self._last_save_s = 0.0
        self._write_surge: float | None = None
        self._first_ts: float | None = None

    def update(self, tick: Tick) -> list[Finding] | None:
        if self._saving(tick):
            self._block(tick.ts, tick.dt)
            self._counted_s += tick.dt
            self._ongoing_s += tick.dt
            self._write_surge = tick.node.host.write_surge()
        elif self._ongoing_s:
            self._last_save_s, self._ongoing_s = self._ongoing_s, 0.0
        report = tick.report
        if report is not None:
            reported_s = (report.checkpoint_ms or 0.0) / 1000.0
            if reported_s:
                self._block(tick.ts, max(0.0, reported_s - self._counted_s))
                self._last_save_s = max(reported_s, self._counted_s)
            self._counted_s = 0.0
        self.share = self._window_share(tick.ts)
        score, severity = self.threshold.judge(self.share)
        if score < self.report_floor:
            return []
        return [Finding("checkpoint_stall", score, severity, self._message(), {}, self._evidence())]

    def _block(self, ts: float, seconds: float) -> None:
        if seconds > 0:
            self._blocked.append((ts, seconds))
            self._blocked_s += seconds

    def _window_share(self, ts: float) -> float:
        """Blocked seconds in the last ``span_s`` over that span, or over the time watched when that is shorter
        (a save reported at its end counts then)."""
        if self._first_ts is None:
            self._first_ts = ts
        blocked = self._blocked
        while blocked and blocked[0][0] <= ts - self.span_s:
            self._blocked_s -= blocked.popleft()[1]
        watched = max(self.min_span_s, min(self.span_s, ts - self._first_ts))
        return min(1.0, max(0.0, self._blocked_s) / watched)

    def _saving(self, tick: Tick) -> bool:
        if not tick.paused or tick.report is not None:
            return False
        surge = tick.node.host.write_surge()
        return surge is None or surge >= self.surge

    def _message(self) -> str:
        if self._ongoing_s:
            return (
                f"training blocked {self._ongoing_s:.0f} s so far on a checkpoint save "
                f"({percent(self.share)} of recent time)"
            )
        return (
            f"checkpoint saves blocked training {percent(self.share)} of recent time "
            f"(last save {self._last_save_s:.0f} s)"
        )

    def _evidence(self) -> dict[str, Any]:
        evidence: dict[str, Any] = {
            "blocked_share": round(self.share, 4),
            "last_save_s": round(self._last_save_s, 1),
            "saving_now_s": round(self._ongoing_s, 1),
        }
        if self._write_surge is not None:
            evidence["disk_write_vs_normal"] = round(self._write_surge, 1)
        return evidence

    def facts(self) -> dict[str, Any]:
        return {CHECKPOINT_SHARE.name: self.share, CHECKPOINT_WRITE_SURGE.name: self._write_surge}
