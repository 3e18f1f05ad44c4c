"""A value per tick or per training report, median-filtered, judged by a :class:`~.base.Threshold`.

Most job-level signals are one number — a share of the step spent waiting, a
padding ratio, MFU, GPU utilisation — so they share this detector and differ
only in how they measure and describe. The median of the last five values
means one GC pause or one slow shard never counts; the optional baseline
catches a ramp while it is still small.
"""

from __future__ import annotations

from typing import Any, ClassVar

from ...samples import TrainingSample
from ..spec import FactSpec
from ..stats import RecentMedian, RobustBaseline
from ..thresholds import Thresholds
from ..tick import Tick
from ..types import Finding
from .base import BaseDetector, percent, threshold_of
from .stall_bounds import MIN_STALL_S, STALL_SIGNAL

#: Values needed before the median is trusted (a fault from the first sample is seen on the third).
MIN_VALUES = 3
#: Values in the median: one GC pause or one slow shard never counts.
WINDOW = 5
#: The early floor's baseline (a robust EWMA): its weight and the values that seed it.
BASELINE_ALPHA = 0.05
BASELINE_WARMUP = 10


class LevelDetector(BaseDetector):
    """Judges ``measure(tick)`` against the ``warning``/``critical`` knobs (and ``early``, with a baseline whose
    sigma is at least the ``min_sigma`` knob); subclasses say what and how to say it."""

    higher_is_worse: ClassVar[bool] = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A level detector provides its value as a fact named after its signal, in its warning knob's unit."""
        super().__init_subclass__(**kwargs)
        if cls.signals and "provides" not in cls.__dict__:
            cls.provides = (level_fact(cls),)

    def __init__(self, thresholds: Thresholds | None = None) -> None:
        super().__init__(thresholds)
        t = self.thresholds
        self.signal = self.signals[0].name
        self.threshold = threshold_of(t, self.higher_is_worse)
        self._recent = RecentMedian(WINDOW)
        self._baseline = (
            RobustBaseline(alpha=BASELINE_ALPHA, warmup=BASELINE_WARMUP, min_scale=t.min_sigma)
            if self.threshold.early is not None
            else None
        )
        self.value: float | None = None

    def measure(self, tick: Tick) -> float | None:
        """This tick's value, or None when the tick brings none."""
        raise NotImplementedError

    def describe(self, value: float, tick: Tick) -> tuple[str, dict[str, Any]]:
        """The message and evidence for a finding at ``value``."""
        raise NotImplementedError

    def departure(self) -> float:
        """A score from the detector's own evidence beside the threshold on ``value`` (none by default)."""
        return 0.0

    def update(self, tick: Tick) -> list[Finding] | None:
        x = self.measure(tick)
        if x is None:
            return None
        value = self._recent.add(x)
        baseline = self._baseline
        if len(self._recent) < MIN_VALUES:
            if baseline is not None:
                baseline.update(x)
            return None
        score, severity = self.threshold.judge(value, baseline)
        score = max(score, self.departure())
        if baseline is not None:
            baseline.update(x)
        self.value = value
        if score < self.report_floor:
            return []
        message, evidence = self.describe(value, tick)
        if baseline is not None and baseline.ready:
            evidence["baseline"] = round(baseline.loc, 4)
        return [Finding(self.signal, score, severity, message, {}, evidence)]

    def facts(self) -> dict[str, Any]:
        return {} if self.value is None else {self.signal: self.value}


class StepShareDetector(LevelDetector):
    """A wait as a share of the step's wall time, from new training reports (not a stall's wait).

    A wait as long as the shortest stall (``training_stalled.min_stall_s``, read) and longer than the step it is
    set against is a stall the step sat out (a hung rank's peers waited that long once), or a rank's value held
    from the gather that covered it: no evidence of a slow wait."""

    reads = ((STALL_SIGNAL, MIN_STALL_S),)

    #: The job-level field holding the wait (ms); per-rank means are used when it is missing.
    field: ClassVar[str] = ""
    #: What the wait is, for messages ("the data loader").
    waits_for: ClassVar[str] = ""

    def wait_ms(self, report: TrainingSample) -> float | None:
        """The step's wait in ms: the job field, else the mean over ranks that report it."""
        value = getattr(report, self.field)
        if value is not None:
            return value
        waits = [w for w in (getattr(r, self.field, None) for r in report.ranks) if w is not None]
        return sum(waits) / len(waits) if waits else None

    def measure(self, tick: Tick) -> float | None:
        report = tick.report
        if report is None or not report.step_time_ms:
            return None
        wait = self.wait_ms(report)
        if wait is None or (wait >= self.thresholds.min_stall_s * 1000.0 and wait > report.step_time_ms):
            return None
        return min(1.0, wait / report.step_time_ms)

    def describe(self, value: float, tick: Tick) -> tuple[str, dict[str, Any]]:
        report = tick.report or tick.training
        step = report.step_time_ms if report else None
        message = f"each step waits {percent(value)} of its time for {self.waits_for}"
        if step:
            message += f" ({value * step:.0f} of {step:.0f} ms)"
        return message, {f"{self.field[:-3]}_share": round(value, 4), "step_time_ms": step}


def level_fact(detector: type[LevelDetector]) -> FactSpec:
    """The fact a level detector provides: its latest median-filtered value, named after its signal."""
    unit = next((knob.unit for knob in detector.knobs if knob.name == "warning"), "")
    signal = detector.signals[0].name
    return FactSpec(signal, unit, f"the latest value {signal} is judged on (median of the last {WINDOW})")
