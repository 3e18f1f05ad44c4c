"""Collectives: waiting for slower peers, and time in the gradient all-reduce."""

from __future__ import annotations

from ...samples import TrainingSample
from .base import Threshold
from .level import StepShareDetector


class SyncImbalance(StepShareDetector):
    """``sync_imbalance``: ranks wait for slower peers at the collective.

    Statistic: median of the last 5 reports of the mean per-rank
    ``sync_wait_ms`` over the step's wall time. Warning at 10 %, critical at
    25 %. Whether one rank is to blame is ``rank_straggler``'s question.
    """

    name = "sync"
    signal = "sync_imbalance"
    field = "sync_wait_ms"
    waits_for = "slower peers at the collective"
    threshold = Threshold(warning=0.10, critical=0.25)


class AllreduceWait(StepShareDetector):
    """``allreduce_wait``: the gradient all-reduce itself is slow, on every rank.

    Statistic: median of the last 5 reports of the all-reduce time over the
    step's wall time. The all-reduce time is the 10th percentile over ranks
    when ranks report it: where a framework's all-reduce timer also counts the
    wait for a straggler, the fastest ranks' time is the communication alone.
    Warning at 15 %, critical at 30 %; from 8 % when that is 1.5x the job's
    baseline and 6 sigmas above it.
    """

    name = "allreduce"
    signal = "allreduce_wait"
    field = "all_reduce_wait_ms"
    waits_for = "the gradient all-reduce"
    threshold = Threshold(warning=0.15, critical=0.30, early=0.08, early_ratio=1.5)
    min_scale = 0.003

    def wait_ms(self, report: TrainingSample) -> float | None:
        waits = sorted(w for w in (r.all_reduce_wait_ms for r in report.ranks) if w is not None)
        if waits:
            return waits[len(waits) // 10]
        return report.all_reduce_wait_ms
