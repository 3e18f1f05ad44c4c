"""The step-time budget: where one step's wall time went, against the job's ideal step.

Each training report's step is decomposed against the job's own healthy pace:

- ``checkpoint`` — the save the report carries, all of it lost (a healthy step saves nothing);
- ``bubble`` — the pipeline schedule's idle share of the step;
- ``data``, ``tokenizer``, ``all_reduce``, ``sync`` — each wait's excess over its own baseline
  (a wait every rank pays equally is baseline, not loss; the tokenizer's inside the loader's is nested);
- ``compute`` — the rest of the step's excess over the ideal step: slower kernels, clocks, padding;
- ``stall`` — all the excess of a step that sat out a raised ``training_stalled``.

The *ideal step* (:class:`Pace`) is the job's best sustained pace, the lowest median of
``PACE_STEPS`` consecutive steps over the last ``PACE_SPAN_S``; each wait's baseline is learned
the same way. Pure: reports in, budgets out; the clock is the tick's. The rules and their
reasons: docs/goodput.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from operator import attrgetter

from ..samples import TrainingSample
from .stats import RecentMedian, WindowMin

#: Reports before the ideal step and the wait baselines are trusted.
WARMUP_REPORTS = 10
#: Steps in the median a pace is read from, and how long its lowest value is remembered.
PACE_STEPS = 31
PACE_SPAN_S = 1800.0
#: Budget components, in the order they are shown.
COMPONENTS = ("compute", "data", "tokenizer", "sync", "all_reduce", "checkpoint", "bubble", "stall")
WAITS = ("data", "tokenizer", "sync", "all_reduce")


class Pace:
    """The lowest median of ``PACE_STEPS`` consecutive values within the last ``PACE_SPAN_S``: a median enters the
    lowest once it rests on ``WARMUP_REPORTS`` values (the median of the first few is no pace: a first report
    whose step was mostly a save would otherwise stand as the job's pace for the whole span)."""

    __slots__ = ("_lowest", "_median", "count", "value")

    def __init__(self) -> None:
        self._median = RecentMedian(PACE_STEPS)
        self._lowest = WindowMin(PACE_SPAN_S)
        self.count = 0
        self.value: float | None = None

    @property
    def ready(self) -> bool:
        return self.count >= WARMUP_REPORTS

    def add(self, ts: float, x: float) -> None:
        self.count += 1
        median = self._median.add(x)
        self.value = self._lowest.add(ts, median) if self.ready else median

    def seed(self, ts: float, x: float) -> None:
        """Start from a pace known before (a restored state's): ready at once, at ``x``, until new values move it."""
        for _ in range(PACE_STEPS):
            self._median.add(x)
        self.value = self._lowest.add(ts, x)
        self.count = max(self.count, WARMUP_REPORTS)


@dataclass(frozen=True)
class StepBudget:
    """One report's step against the ideal step, in milliseconds.

    ``lost_ms`` holds each component's loss (missing components are 0); their
    sum is the step's time beyond the ideal. ``steps`` is how many steps the
    report's save was spread over (at least one, so a save on a report whose
    ``global_step`` did not advance — a sampler re-sending the latest step —
    is still counted whole). ``all_reduce_ms`` is the collective's own time
    that step (:func:`all_reduce_ms`; None when not measured, or the step sat
    out a stall), which a rank's all-reduce timer beyond it spent waiting;
    ``usual_ms`` each wait's baseline the step was measured against (those
    learned so far) — what a rank's own waits are measured against too.
    """

    step_ms: float
    ideal_ms: float
    lost_ms: dict[str, float] = field(default_factory=dict)
    steps: int = 1
    all_reduce_ms: float | None = None
    usual_ms: dict[str, float] = field(default_factory=dict)


class StepCounter:
    """How many steps each report stands for: the advance of ``global_step`` (one a report without it that times a
    step, none one that times no step — a log's line saying only how long a save took —, one a report whose step
    went back: a job resumed from a checkpoint counts its steps again from there)."""

    __slots__ = ("_last",)

    def __init__(self) -> None:
        self._last: int | None = None

    @property
    def last(self) -> int | None:
        """The latest ``global_step`` counted."""
        return self._last

    def resume(self, step: int | None) -> None:
        """Count on from ``step`` (a restored state's): the next report stands for the steps since."""
        self._last = step

    def advance(self, report: TrainingSample) -> int:
        step, last = report.global_step, self._last
        if step is None:
            return 0 if report.step_time_ms is None and report.checkpoint_ms else 1
        self._last = step
        return 1 if last is None or step < last else step - last


def saved_ms(report: TrainingSample, steps: int = 1) -> float:
    """The time the report's save took (its ``checkpoint_ms``), at most the ``steps`` steps' own time; all of it
    when the report times no step (a log's line that says only how long a save took)."""
    step = report.step_time_ms
    saved = report.checkpoint_ms or 0.0
    if step is None:
        return saved
    return min(max(1, steps) * step, saved) if step > 0 else 0.0


class BudgetBuilder:
    """Learns the ideal step and each wait's baseline from reports; decomposes each new report."""

    def __init__(self) -> None:
        self.ideal = Pace()
        self.waits = {name: Pace() for name in WAITS}

    @property
    def ideal_ms(self) -> float | None:
        """The job's ideal step time (None until it is known)."""
        return self.ideal.value if self.ideal.ready else None

    def add(
        self,
        ts: float,
        report: TrainingSample,
        steps: int = 1,
        stalled: bool = False,
        all_reduce: float | None = None,
        known_wait: float = 0.0,
    ) -> StepBudget | None:
        """The budget of one of the ``steps`` steps ``report`` stands for, at ``ts`` (None without a step time,
        or before the ideal is known).

        ``stalled``: the report ends a stall; its excess over the ideal step is all ``stall``. ``all_reduce``:
        the report's all-reduce time where the caller has worked it out (:func:`all_reduce_ms`; the tick has).
        ``known_wait``: how long the ranks wait each step for a straggler the diagnosis has raised (ms). That much
        of the report's sync wait is a loss whatever the baselines learned: neither the sync baseline nor the
        ideal step learns from it, so a fault there from the first step is not taken for the job's pace.
        """
        step = report.step_time_ms
        if step is None or step <= 0:
            return None
        if stalled:
            ideal = self.ideal_ms
            if ideal is None:
                return None
            return StepBudget(step, ideal, dict.fromkeys(COMPONENTS, 0.0) | {"stall": max(0.0, step - ideal)})
        steps = max(1, steps)
        checkpoint = saved_ms(report, steps) / steps
        bubble = (step - checkpoint) * (report.pipeline_bubble_ratio or 0.0)
        clean = step - checkpoint - bubble
        waits = _waits(report, all_reduce)
        known = min(known_wait, waits.get("sync", 0.0))
        usual = {name: self.waits[name].value or 0.0 for name in waits if self.waits[name].ready}
        for name, value in waits.items():
            self.waits[name].add(ts, value - known if name == "sync" else value)
        excess = {name: max(0.0, value - usual[name]) if name in usual else 0.0 for name, value in waits.items()}
        ideal = self.ideal_ms
        if clean > known:  # a step that was all save (the save longer than the steps it is spread over): no pace
            self.ideal.add(ts, clean - known)
        if ideal is None:
            return None
        lost = _nest_tokenizer(excess, report)
        over = max(0.0, clean - ideal)
        waited = sum(lost.values())
        if waited > over:  # the waits overlap (or are noisy): they explain the excess, and no more
            lost = {name: ms * over / waited for name, ms in lost.items()}
            waited = over
        lost.update(compute=over - waited, checkpoint=checkpoint, bubble=bubble)
        lost_ms = {name: lost.get(name, 0.0) for name in COMPONENTS}
        return StepBudget(step, ideal, lost_ms, steps, waits.get("all_reduce"), usual)


def _waits(report: TrainingSample, all_reduce: float | None = None) -> dict[str, float]:
    """The report's waits that it measured (ms). The all-reduce is the fastest ranks' time where ranks
    report it: a framework timer that also counts the wait for a straggler would count that twice."""
    waits = {
        "data": report.data_wait_ms,
        "tokenizer": report.tokenizer_wait_ms,
        "sync": report.sync_wait_ms,
        "all_reduce": all_reduce if all_reduce is not None else all_reduce_ms(report),
    }
    return {name: value for name, value in waits.items() if value is not None}


def all_reduce_ms(report: TrainingSample) -> float | None:
    """The all-reduce's own time (ms): the 10th percentile over the ranks that report it, else the job's.

    A sort over every rank: the tick works it out once for a new report (:attr:`~.tick.Tick.all_reduce_ms`)
    for the budget and ``allreduce_wait`` alike.
    """
    per_rank = list(map(_ALL_REDUCE_WAIT, report.ranks))
    if None in per_rank:  # filtered only when some rank does not report it: a pass saved at 4,096 ranks
        per_rank = [w for w in per_rank if w is not None]
    if per_rank:
        per_rank.sort()
        return per_rank[len(per_rank) // 10]
    return report.all_reduce_wait_ms


#: Reads a rank's all-reduce time in one C call (this runs over every rank of every report).
_ALL_REDUCE_WAIT = attrgetter("all_reduce_wait_ms")


def tokenizer_in_loader(report: TrainingSample) -> bool:
    """Whether the report's tokenization happens inside its loader's wait (it fits in it)."""
    tokenizer, data = report.tokenizer_wait_ms, report.data_wait_ms
    return tokenizer is not None and data is not None and tokenizer <= data


def _nest_tokenizer(excess: dict[str, float], report: TrainingSample) -> dict[str, float]:
    """Tokenization that happens inside the loader's wait explains that part of it."""
    lost = dict(excess)
    if tokenizer_in_loader(report):
        lost["data"] = max(0.0, lost.get("data", 0.0) - lost.get("tokenizer", 0.0))
    return lost
