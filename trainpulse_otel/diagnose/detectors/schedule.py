"""The step's schedule: pipeline-parallel bubbles and blocking checkpoint saves."""

from __future__ import annotations

from collections import deque
from typing import Any

from ..tick import Tick
from ..types import Finding, Policy
from .base import BaseDetector, Threshold, percent
from .level import LevelDetector


class PipelineBubble(LevelDetector):
    """``pipeline_bubble``: pipeline stages idle while the schedule fills and drains.

    Statistic: median of the last 5 reported ``pipeline_bubble_ratio``; when a
    job does not report it but runs pipeline parallelism, the 1F1B theory
    ``(pp - 1) / (m + pp - 1)`` with ``m`` micro-batches per step
    (``gradient_accumulation_steps``). Warning at 20 %, critical at 35 %.
    """

    name = "bubble"
    signal = "pipeline_bubble"
    threshold = Threshold(warning=0.20, critical=0.35)

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
    signals = ("checkpoint_stall",)
    policy = Policy(clear_after_s=60.0)
    threshold = Threshold(warning=0.10, critical=0.25)
    span_s = 120.0
    min_span_s = 60.0
    surge = 3.0

    def __init__(self) -> None:
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
        return {"checkpoint_share": self.share, "checkpoint_write_surge": self._write_surge}
