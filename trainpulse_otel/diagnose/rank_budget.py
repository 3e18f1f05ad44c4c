"""Per-rank step budgets: which ranks the job loses its time to, and what each one's lateness is made of.

A synchronous step ends for every rank together, so each rank's time beyond the job's ideal step
(:mod:`.budget`) is the job's; what differs is its composition. What every rank pays alike (the
tokenizer's and the all-reduce's excess, the checkpoint, the bubble) stays the job's; the rest splits
per rank into ``data`` (its own loader wait beyond the job's usual one), ``sync`` (its wait for
*others*, beyond the collective's own time and the job's usual wait) and ``compute`` (the rest).
A rank's *own* loss is its ``compute`` + ``data``; the others' ``sync`` is the consequence. So one
rank with 35 % more compute has that excess as ``compute`` and every other rank has it as
``sync``; a barrier every rank pays alike leaves every rank's own loss at zero.

Recent: each rank's waits are summed over the reports sampled (at most every ``SAMPLE_S``) in the
last two ``BLOCK_S`` blocks, and the split is read from the sums, so noise does not add up to a
loss; a sampled report costs a few C-level passes over the ranks. Pure: reports in, losses out;
the clock is the reports'. The rules, their reasons and the cost: docs/signals.md ("Per-rank budgets").
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from operator import add, attrgetter

from ..samples import RankSample, TrainingSample
from .budget import StepBudget, tokenizer_in_loader
from .types import RankLoss

#: Reports are sampled at most this often (seconds of report time).
SAMPLE_S = 20.0
#: The sums are kept in blocks of this long; the current one and the one before are the recent budget.
BLOCK_S = 120.0
#: The most ranks the goodput block lists.
MAX_RANKS = 8
#: A rank is listed when its own loss is at least this share of the ideal step (the ranking's measurable loss).
MIN_OWN_SHARE = 0.02
#: The component a rank waits for others in.
WAITED = "sync"

_RANK = attrgetter("rank")
_DATA = attrgetter("data_wait_ms")
_SYNC = attrgetter("sync_wait_ms")
_ALL_REDUCE = attrgetter("all_reduce_wait_ms")


@dataclass(slots=True)
class _Block:
    """Sums over the reports sampled in one block of time: per rank, and the job's (ms)."""

    start: float
    data: list[float]  # per rank: its data waits
    wait: list[float]  # per rank: its sync waits + all-reduce times
    reports: int = 0
    excess: float = 0.0  # the job's excess the ranks split (its compute + data + sync)
    usual_data: float = 0.0  # what a rank's data wait is measured against
    usual_wait: float = 0.0  # what a rank's sync wait + all-reduce time is measured against


class RankBudgets:
    """Each rank's recent step budget against the job's ideal step, from reports sampled every ``SAMPLE_S``."""

    def __init__(self) -> None:
        self._ids: tuple[int, ...] = ()
        self._ranks: tuple[RankSample, ...] = ()
        self._blocks: deque[_Block] = deque(maxlen=2)  # the one before, and the current one
        self._ideal_ms = 0.0
        self._ts = float("-inf")  # the last report sampled
        self._worst: tuple[RankLoss, ...] = ()
        self._sampled = False  # a report was sampled since the worst ranks were worked out
        #: How many reports were sampled so far: what reads the budgets knows when they moved.
        self.samples = 0

    def add(self, ts: float, report: TrainingSample, budget: StepBudget | None, stalled: bool = False) -> None:
        """Sample the report's ranks at ``ts`` if one is due (``budget``: the job's budget of that report). A report
        that ends a stall or carries a save is not sampled: the time the job spent in either is the job's, never a
        rank's own loss (the ranks waiting for the saving or stuck rank would read as late)."""
        ranks = report.ranks
        if len(ranks) < 2 or budget is None or stalled or report.checkpoint_ms or ts - self._ts < SAMPLE_S:
            return
        self._ts, self._ranks, self._ideal_ms, self._sampled = ts, ranks, budget.ideal_ms, True
        self.samples += 1
        data = _values(_DATA, ranks)
        wait = list(map(add, _values(_SYNC, ranks), _values(_ALL_REDUCE, ranks)))
        ids = tuple(map(_RANK, ranks))
        blocks = self._blocks
        if ids != self._ids or (blocks and ts - blocks[-1].start >= 2 * BLOCK_S):
            self._ids = ids  # another set of ranks, or a job back from a pause: the sums start afresh
            blocks.clear()
        if not blocks or ts - blocks[-1].start >= BLOCK_S:
            block = _Block(ts, data, wait)  # the older block drops out
            blocks.append(block)
        else:
            block = blocks[-1]
            block.data = list(map(add, block.data, data))
            block.wait = list(map(add, block.wait, wait))
        lost, usual = budget.lost_ms, budget.usual_ms
        block.reports += 1
        block.excess += lost["compute"] + lost["data"] + lost[WAITED]
        block.usual_data += usual.get("data", 0.0) + (lost["tokenizer"] if tokenizer_in_loader(report) else 0.0)
        block.usual_wait += usual.get(WAITED, 0.0) + (budget.all_reduce_ms or 0.0)

    def of(self, rank: int) -> dict[str, float] | None:
        """Rank ``rank``'s recent budget, ms per step: ``compute``, ``data``, ``sync`` (None when not known)."""
        try:
            i = self._ids.index(rank)
        except ValueError:
            return None
        compute, data, sync = self._split(sum(b.data[i] for b in self._blocks), sum(b.wait[i] for b in self._blocks))
        return {"compute": compute, "data": data, WAITED: sync}

    def worst(self) -> tuple[RankLoss, ...]:
        """The ranks whose own loss is the largest (at least ``MIN_OWN_SHARE`` of the ideal step), worst first
        (worked out again only once a new report was sampled)."""
        if not self._sampled:
            return self._worst
        self._sampled = False
        reports, excess, usual_data, usual_wait = self._totals()
        floor = MIN_OWN_SHARE * self._ideal_ms
        if excess < floor:
            self._worst = ()  # no rank's own loss exceeds the job's excess: none, at no cost
            return ()
        data, wait = self._blocks[0].data, self._blocks[0].wait
        if len(self._blocks) == 2:
            data, wait = list(map(add, data, self._blocks[1].data)), list(map(add, wait, self._blocks[1].wait))
        # each rank's own loss, compute + data as _split has them, in three passes: its waits beyond the usual,
        # then the excess less its (scaled) wait for others
        inv = 1.0 / reports
        data = [(d - usual_data) * inv if d > usual_data else 0.0 for d in data]
        sync = [(w - usual_wait) * inv if w > usual_wait else 0.0 for w in wait]
        own = [excess * d / (d + w) if d + w > excess else excess - w for d, w in zip(data, sync, strict=True)]
        top = heapq.nlargest(MAX_RANKS, (i for i, ms in enumerate(own) if ms >= floor), key=own.__getitem__)
        self._worst = tuple(self._loss(i) for i in top)
        return self._worst

    def _loss(self, i: int) -> RankLoss:
        """The ``i``-th rank's entry of the goodput block."""
        compute, data, sync = self._split(sum(b.data[i] for b in self._blocks), sum(b.wait[i] for b in self._blocks))
        r = self._ranks[i]
        return RankLoss(r.rank, compute + data, {"compute": compute, "data": data}, sync, r.hostname, r.gpu_index)

    def _totals(self) -> tuple[int, float, float, float]:
        """The job's side over the recent blocks: reports sampled, and per report the excess the ranks split and
        what a rank's data wait and its sync wait + all-reduce are measured against (sums, ms)."""
        blocks = self._blocks
        reports = sum(b.reports for b in blocks)
        return (
            reports,
            max(0.0, sum(b.excess for b in blocks) / reports),
            sum(b.usual_data for b in blocks),
            sum(b.usual_wait for b in blocks),
        )

    def _split(self, data_sum: float, wait_sum: float) -> tuple[float, float, float]:
        """(compute, data, sync) per step of a rank with these sums: its waits beyond the usual ones, scaled down
        to the job's excess when they add up to more, and the rest of that excess its compute."""
        reports, excess, usual_data, usual_wait = self._totals()
        data = max(0.0, (data_sum - usual_data) / reports)
        sync = max(0.0, (wait_sum - usual_wait) / reports)
        if data + sync > excess:
            scale = excess / (data + sync)
            data, sync = data * scale, sync * scale
        return max(0.0, excess - data - sync), data, sync


def _values(read: Callable[[RankSample], float | None], ranks: tuple[RankSample, ...]) -> list[float]:
    """Each rank's value of one wait (ms), 0 where a rank does not report it."""
    values = list(map(read, ranks))
    return [v or 0.0 for v in values] if None in values else values
