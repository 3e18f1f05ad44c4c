"""Collectives: waiting for slower peers, and time in the gradient all-reduce."""

from __future__ import annotations

import math
from operator import attrgetter
from typing import Any

from ...samples import TrainingSample
from ..budget import PACE_STEPS, Pace
from ..spec import RANKS, TRAINING, SignalSpec
from ..stats import RecentMedian, RecentSpread, sorted_median
from ..thresholds import CONVENTION, COUNT, MEASURED, PHYSICS, SHARE, SIGMAS, TIMES, Knob, Thresholds
from ..tick import Tick
from .base import JobWarmup, percent
from .level import WINDOW, StepShareDetector

SYNC_IMBALANCE = SignalSpec(
    "sync_imbalance", "ranks wait for slower peers at the collective", RANKS, 0.08, "sync", measured=True
)
ALLREDUCE_WAIT = SignalSpec(
    "allreduce_wait",
    "the gradient all-reduce itself is slow, on every rank",
    TRAINING,
    0.08,
    "all_reduce",
    measured=True,
)


def sync_waits(report: TrainingSample) -> list[float]:
    """The per-rank sync waits the report carries, sorted (ms)."""
    return sorted([w for w in map(_SYNC_WAIT, report.ranks) if w is not None])


#: Reads a rank's sync wait in one C call (this runs over every rank of every report).
_SYNC_WAIT = attrgetter("sync_wait_ms")


class SyncImbalance(StepShareDetector):
    """``sync_imbalance``: ranks wait for slower peers at the collective.

    Statistic: median of the last 5 reports of the *spread* of the sync wait
    across ranks over the step's wall time: the median rank's wait beyond the
    least-waiting rank's. Every rank pays the collective's own cost (a
    barrier's latency, ~8.5 ms a step on a CPU gloo job): the least-waiting
    rank — the last to arrive — pays only that, so what the median rank waits
    beyond it is the wait for slower peers. A wait every rank pays equally is
    not imbalance. Reports without per-rank waits are judged on the job's
    mean wait (nothing else to go by). A fresh job's warm-up (its first 50
    steps and 10 s, :class:`~.base.JobWarmup`) is not judged. Warning at 10 %, critical at 25 %.
    Whether one rank is to blame is ``rank_straggler``'s question.
    """

    name = "sync"
    signals = (SYNC_IMBALANCE,)
    knobs = (
        Knob(
            "warning",
            0.10,
            SHARE,
            CONVENTION,
            "a tenth of the step waiting for slower peers; across 8 ranks whose work scatters 10 % the last one "
            "arrives ~14 % of a step after the median",
            0,
            1,
        ),
        Knob(
            "critical",
            0.25,
            SHARE,
            CONVENTION,
            "a quarter of every step waiting for slower peers",
            0,
            1,
            at_least="warning",
        ),
    )
    field = "sync_wait_ms"
    waits_for = "slower peers at the collective"

    def __init__(self, thresholds: Thresholds | None = None) -> None:
        super().__init__(thresholds)
        self._warmup = JobWarmup()
        #: The last report measured and its sorted per-rank waits: a finding's message words the same ones.
        self._waits: tuple[TrainingSample | None, list[float]] = (None, [])

    def measure(self, tick: Tick) -> float | None:
        report = tick.report
        if report is not None and not self._warmup.over(tick.ts, report.global_step):
            return None  # warm-up: no evidence either way
        return super().measure(tick)

    def wait_ms(self, report: TrainingSample) -> float | None:
        waits = self._sync_waits(report)
        if len(waits) >= 2:
            return sorted_median(waits) - waits[0]
        return report.sync_wait_ms

    def describe(self, value: float, tick: Tick) -> tuple[str, dict[str, Any]]:
        message, evidence = super().describe(value, tick)
        report = tick.report or tick.training
        waits = self._sync_waits(report) if report else []
        if len(waits) >= 2:
            median, least = sorted_median(waits), waits[0]
            message = (
                f"ranks wait for slower peers at the collective: the median rank {median - least:.0f} ms "
                f"({percent(value)} of the step) more than the least-waiting rank ({median:.0f} vs {least:.0f} ms)"
            )
            evidence.update(median_sync_wait_ms=round(median, 1), least_sync_wait_ms=round(least, 1))
        return message, evidence

    def _sync_waits(self, report: TrainingSample) -> list[float]:
        """:func:`sync_waits` of ``report``, sorted once per report (a sort over every rank)."""
        measured, waits = self._waits
        if measured is not report:
            waits = sync_waits(report)
            self._waits = (report, waits)
        return waits


#: Reports before the all-reduce's usual time is trusted: two full medians, past a fresh job's first collectives
#: (connection set-up, the monitor's own start on rank 0 scatter them).
USUAL_AFTER = 2 * PACE_STEPS


class AllreduceWait(StepShareDetector):
    """``allreduce_wait``: the gradient all-reduce itself is slow, on every rank.

    Statistic: median of the last 5 reports of the all-reduce time over the
    step's wall time. The all-reduce time is the 10th percentile over ranks
    when ranks report it: where a framework's all-reduce timer also counts the
    wait for a straggler, the fastest ranks' time is the communication alone.
    Warning at 15 %, critical at 30 %; from 8 % when that is 1.5x the job's
    baseline and 6 sigmas above it. A fresh job's warm-up (its first 50 steps
    and 10 s, :class:`~.base.JobWarmup`) is neither judged nor learnt from: its
    first collectives pay connection set-up and the other ranks' start.

    And against its own past, so another fault cannot hide it: a share of the
    step shrinks when something else makes the step longer (a power cap, low
    MFU, longer pipeline stages), though the interconnect is as degraded. So
    the all-reduce is also judged in milliseconds, against its own usual time
    — the job's lowest sustained median (:class:`~..budget.Pace`) — and its
    excess against the job's usual step: ``slowdown`` times its usual time or
    more, costing at least ``min_excess_share`` (2 %) of the usual step and
    standing ``min_excess_sigmas`` (6) of its own healthy sigmas above its
    healthy level, is a warning. The spread is what tells a degraded
    interconnect from a noisy one: a real healthy CPU gloo job's all-reduce
    jumps between 0.45 and 5 ms from step to step, so its recent median wanders
    to 3x its usual 1.2 ms (3.4 % of its step, ~2 sigmas) with nothing wrong,
    where NCCL's is steady within a few percent.
    """

    name = "allreduce"
    signals = (ALLREDUCE_WAIT,)
    knobs = (
        Knob(
            "warning",
            0.15,
            SHARE,
            CONVENTION,
            "the all-reduce not overlapped with compute costs a sixth of the step",
            0,
            1,
            at_least="early",
        ),
        Knob("critical", 0.30, SHARE, CONVENTION, "a third of every step in the all-reduce", 0, 1, at_least="warning"),
        Knob(
            "early",
            0.08,
            SHARE,
            CONVENTION,
            "a smaller share counts when it is also early_ratio times the job's baseline and early_z sigmas above it",
            0,
            1,
        ),
        Knob("early_ratio", 1.5, TIMES, CONVENTION, "how far above its baseline an early share must be", 1),
        Knob("early_z", 6.0, SIGMAS, CONVENTION, "how many baseline sigmas above it an early share must be", 0),
        Knob("min_sigma", 0.003, SHARE, PHYSICS, "the baseline's smallest sigma: reported times are rounded"),
        Knob("slowdown", 3.0, TIMES, CONVENTION, "times its own usual time the all-reduce must take, in ms", 1),
        Knob(
            "min_excess_share",
            0.02,
            SHARE,
            CONVENTION,
            "the least its excess must cost of the usual step to be worth acting on (as a rank's own loss must to "
            "be listed in goodput.ranks)",
            0,
            1,
        ),
        Knob(
            "min_excess_sigmas",
            6.0,
            SIGMAS,
            MEASURED,
            "how far above its healthy level, in its own healthy sigmas: a real healthy CPU gloo job's all-reduce "
            "jumps 0.45-5 ms step to step, its median wandering to 3x its usual 1.2 ms (~2 sigmas)",
            0,
        ),
        Knob(
            "spread_after",
            10,
            COUNT,
            CONVENTION,
            "healthy values the spread needs before the excess is judged against it (every healthy report, noisy "
            "ones too: they are the noise)",
            2,
        ),
    )
    field = "all_reduce_wait_ms"
    waits_for = "the gradient all-reduce"

    def __init__(self, thresholds: Thresholds | None = None) -> None:
        super().__init__(thresholds)
        t = self.thresholds
        self.slowdown_times, self.min_excess_share = t.slowdown, t.min_excess_share
        self.min_excess_sigmas, self.spread_after = t.min_excess_sigmas, t.spread_after
        self._usual_ms, self._usual_step_ms = Pace(), Pace()
        self._recent_ms = RecentMedian(WINDOW)
        self._spread_ms = RecentSpread(2 * PACE_STEPS)
        self._warmup = JobWarmup()

    def measure(self, tick: Tick) -> float | None:
        report = tick.report
        if report is None or not report.step_time_ms:
            return None
        if not self._warmup.over(tick.ts, report.global_step):
            return None  # warm-up: no evidence either way, and no baseline to learn
        wait = tick.all_reduce_ms
        if wait is None:
            return None
        if not report.checkpoint_ms:  # a save's step is no measure of the usual step
            recent = self._recent_ms.add(wait)
            self._usual_ms.add(tick.ts, wait)
            self._usual_step_ms.add(tick.ts, report.step_time_ms)
            sigmas = self._sigmas_above(recent)
            if sigmas is None or sigmas < self.min_excess_sigmas:
                self._spread_ms.add(wait)
        return min(1.0, wait / report.step_time_ms)

    def slowdown(self) -> tuple[float, float] | None:
        """``(times its usual time, excess over the usual step)`` of the recent all-reduce, once both are known."""
        usual, step, recent = self._usual_ms, self._usual_step_ms, self._recent_ms.value
        if usual.count < USUAL_AFTER or recent is None or not usual.value or not step.value:
            return None
        return recent / usual.value, (recent - usual.value) / step.value

    def excess_sigmas(self) -> float | None:
        """How many of its healthy sigmas the recent all-reduce stands above its healthy level (None: not known).

        The level is the healthy values' median, not the usual (lowest sustained) time: a noisy series' lowest
        median sits below its typical one, and its recent median wanders above that typical one by its noise."""
        recent = self._recent_ms.value
        return None if recent is None else self._sigmas_above(recent)

    def _sigmas_above(self, ms: float) -> float | None:
        if len(self._spread_ms) < self.spread_after:
            return None
        level, sigma = self._spread_ms.read()
        return (ms - level) / sigma if sigma > 0 else (math.inf if ms > level else 0.0)

    def departure(self) -> float:
        slow = self.slowdown()
        if slow is None or slow[1] < self.min_excess_share:
            return 0.0
        sigmas = self.excess_sigmas()
        if sigmas is None or sigmas < self.min_excess_sigmas:
            return 0.0
        return slow[0] / self.slowdown_times

    def describe(self, value: float, tick: Tick) -> tuple[str, dict[str, Any]]:
        message, evidence = super().describe(value, tick)
        slow = self.slowdown()
        if slow is not None:
            times, excess = slow
            sigmas = self.excess_sigmas()
            message += f"; {times:.1f}x its usual {self._usual_ms.value:.0f} ms"
            evidence.update(
                slowdown=round(times, 2),
                usual_all_reduce_ms=round(self._usual_ms.value or 0.0, 1),
                excess_share_of_usual_step=round(excess, 4),
            )
            if sigmas is not None and math.isfinite(sigmas):
                evidence["excess_sigmas"] = round(sigmas, 1)
        return message, evidence
