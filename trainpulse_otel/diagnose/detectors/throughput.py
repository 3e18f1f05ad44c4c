"""Throughput against the job's own baseline, and how busy the GPUs are."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ...samples import GpuSample, TrainingSample
from ..spec import GPU, TRAINING, FactSpec, SignalSpec
from ..stats import RecentMedian, RobustBaseline, median
from ..thresholds import CONVENTION, COUNT, MEASURED, PERCENT, SHARE, SIGMAS, Knob, Thresholds
from ..tick import Tick
from ..types import Finding
from .base import BaseDetector, JobWarmup, percent, threshold_of
from .level import MIN_VALUES, WINDOW, LevelDetector

THROUGHPUT_COLLAPSE = SignalSpec(
    "throughput_collapse", "the job runs much slower than its own baseline", TRAINING, 0.15, "compute", measured=True
)
GPU_UNDERUTILIZATION = SignalSpec(
    "gpu_underutilization",
    "the job's GPUs spend much of the time without a kernel running",
    GPU,
    0.10,
    "compute",
    measured=True,
)
#: The throughput baseline: a robust EWMA of this weight that adopts improvements.
#: How far the job's pace fell below its own baseline (shared with the rules that weigh a slowdown).
THROUGHPUT_DROP = FactSpec(
    "throughput_drop", SHARE, "the relative drop of recent tokens/s or steps/s below the job's own baseline"
)
BASELINE_ALPHA = 0.02


class _Rate:
    """One throughput series: a short median and a baseline that learns only normal values."""

    __slots__ = ("baseline", "recent")

    def __init__(self, reports: int, band: float) -> None:
        self.recent = RecentMedian(WINDOW)
        self.baseline = RobustBaseline(alpha=BASELINE_ALPHA, warmup=reports, band=band, adopt=+1)

    def add(self, x: float) -> float | None:
        """Take a value; return the relative drop of the recent median below the baseline."""
        now = self.recent.add(x)
        base = self.baseline
        drop = 1.0 - now / base.loc if base.ready and base.loc > 0 and len(self.recent) >= MIN_VALUES else None
        base.update(x)
        return drop


class ThroughputCollapse(BaseDetector):
    """``throughput_collapse``: the job runs much slower than it did.

    Statistic: the drop of the median of the last 5 reports below the job's
    own baseline (median of the first 20 reports, then a robust EWMA that
    ignores values outside 4 sigmas and adopts improvements). Measured on
    tokens/s and on steps/s (1000 / ``step_time_ms``) and the smaller drop
    counts: a real slowdown moves both, while shorter documents (tokens) or a
    batch-size ramp (steps) move only one. Warning at a 30 % drop, critical at
    50 %. Steps that include a checkpoint save are left to
    ``checkpoint_stall``. Needs its 20-report baseline first, learned after a
    fresh job's warm-up (its first 50 steps and 10 s, :class:`~.base.JobWarmup`):
    a real job's first steps run at no pace of its own — allocation, the first
    collectives, lazy initialisation — and a baseline of its first 20 reports
    (5 s at four reports a second) set a pace the job then "collapsed" from.
    """

    name = "throughput"
    signals = (THROUGHPUT_COLLAPSE,)
    provides = (THROUGHPUT_DROP,)
    knobs = (
        Knob("warning", 0.30, SHARE, CONVENTION, "a drop below the job's own pace no noise or data mix explains", 0, 1),
        Knob("critical", 0.50, SHARE, CONVENTION, "half the job's throughput gone", 0, 1, at_least="warning"),
        Knob(
            "baseline_reports",
            20,
            COUNT,
            MEASURED,
            "reports that seed the baseline (~20-40 s): a real job's first 20 reports at 4 a second set a pace it "
            "then 'collapsed' from, hence also the warm-up",
            3,
        ),
        Knob("baseline_band", 4.0, SIGMAS, CONVENTION, "values beyond this many sigmas do not teach the baseline", 1),
    )

    def __init__(self, thresholds: Thresholds | None = None) -> None:
        super().__init__(thresholds)
        t = self.thresholds
        self.threshold = threshold_of(t)
        self._tokens = _Rate(t.baseline_reports, t.baseline_band)
        self._steps = _Rate(t.baseline_reports, t.baseline_band)
        self._warmup = JobWarmup()
        self.drop: float | None = None

    def update(self, tick: Tick) -> list[Finding] | None:
        report = tick.report
        if report is None or report.checkpoint_ms or not self._warmup.over(tick.ts, report.global_step):
            return None
        drops = [d for d in self._drops(report) if d is not None]
        if not drops:
            return None
        self.drop = drop = min(drops)
        score, severity = self.threshold.judge(max(0.0, drop))
        if score < self.report_floor:
            return []
        return [Finding("throughput_collapse", score, severity, self._message(drop), {}, self._evidence(drop))]

    def _drops(self, report: TrainingSample) -> tuple[float | None, float | None]:
        tokens = self._tokens.add(report.tokens_per_sec) if report.tokens_per_sec else None
        steps = self._steps.add(1000.0 / report.step_time_ms) if report.step_time_ms else None
        return tokens, steps

    def _message(self, drop: float) -> str:
        tokens = self._tokens
        if tokens.baseline.ready and tokens.recent.value is not None:
            return (
                f"throughput fell {percent(drop)} below this job's baseline "
                f"({tokens.recent.value:,.0f} vs {tokens.baseline.loc:,.0f} tokens/s)"
            )
        return f"throughput fell {percent(drop)} below this job's baseline"

    def _evidence(self, drop: float) -> dict[str, Any]:
        evidence: dict[str, Any] = {"drop": round(drop, 4)}
        for label, rate in (("tokens_per_sec", self._tokens), ("steps_per_sec", self._steps)):
            if rate.baseline.ready and rate.recent.value is not None:
                evidence[label] = round(rate.recent.value, 3)
                evidence[f"baseline_{label}"] = round(rate.baseline.loc, 3)
        return evidence

    def facts(self) -> dict[str, Any]:
        return {} if self.drop is None else {THROUGHPUT_DROP.name: self.drop}


class GpuUnderutilization(LevelDetector):
    """``gpu_underutilization``: the job's GPUs spend much of the time without a kernel running.

    Statistic: median over GPUs of NVML utilisation, median of the last 5
    ticks. Warning below 80 %, critical below 50 %, clears above 85 %
    (hysteresis) after 20 s. Ticks on which every GPU is idle (a checkpoint
    save, an evaluation, a dead job) are not judged: training is not running
    then, which is ``checkpoint_stall``'s business, not this signal's.
    """

    name = "utilization"
    signals = (GPU_UNDERUTILIZATION,)
    knobs = (
        Knob(
            "warning",
            80.0,
            PERCENT,
            CONVENTION,
            "a training step keeps its GPUs busy most of the time",
            0,
            100,
            at_least="critical",
        ),
        Knob("critical", 50.0, PERCENT, CONVENTION, "half the GPU time without a kernel", 0, 100),
        Knob(
            "clear_above",
            85.0,
            PERCENT,
            CONVENTION,
            "hysteresis: an active signal clears above this",
            1,
            100,
            at_least="warning",
        ),
    )
    higher_is_worse = False

    def __init__(self, thresholds: Thresholds | None = None) -> None:
        super().__init__(thresholds)
        self.policy = replace(self.policy, hold=self.thresholds.warning / self.thresholds.clear_above)

    def measure(self, tick: Tick) -> float | None:
        if tick.paused:
            return None
        utils = [g.utilization_percent for g in tick.gpus if g.utilization_percent is not None]
        return median(utils) if utils else None

    def describe(self, value: float, tick: Tick) -> tuple[str, dict[str, Any]]:
        utils = {_gpu_name(g): g.utilization_percent for g in tick.gpus if g.utilization_percent is not None}
        evidence: dict[str, Any] = {"median_utilization_percent": round(value, 1), "utilization_percent": utils}
        if tick.node.host.cpu is not None:
            evidence["host_cpu_percent"] = round(tick.node.host.cpu, 1)
        return f"GPUs run kernels only {value:.0f}% of the time (median of {len(utils)} GPUs)", evidence


def _gpu_name(g: GpuSample) -> int | str:
    """A GPU's key in the evidence: its index, or ``hostname/index`` for another node's GPU."""
    return g.index if g.node is None else f"{g.node}/{g.index}"
