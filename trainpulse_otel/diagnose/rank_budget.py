"""Per-rank step budgets: which ranks the job loses its time to, and what each one's lateness is made of.

A synchronous step ends for every rank together, so each rank's time beyond the job's ideal step
(:mod:`.budget`) is the job's; what differs from rank to rank is what it is made of. Of the job's step
excess, what every rank pays alike — the tokenizer's and the all-reduce's excess, the checkpoint, the
bubble — stays the job's; the rest (the job budget's ``compute`` + ``data`` + ``sync``) splits, per rank,
with the job budget's nesting rules, into:

- ``data`` — the rank's own data-loader wait beyond the usual wait (the ranks' mean wait, learned as the
  job's waits are: its lowest sustained median, :class:`~.budget.Pace`), less the job's tokenizer excess
  where tokenization happens inside the loader's wait;
- ``sync`` — time the rank waited for *others*: its sync wait plus its all-reduce time beyond the
  collective's own (the fastest ranks' all-reduce, :func:`~.budget.all_reduce_ms`: a timer that counts
  the wait for a straggler counts this), beyond the usual such wait (learned the same way). A wait every
  rank pays equally — the barrier's own cost — is in that usual wait: baseline, not loss;
- ``compute`` — the rest: the rank's own work beyond its part of the ideal step.

The two waits are scaled down to the excess when they add up to more (they overlap, or are noisy), as in
the job budget. A rank's *own* loss is its ``compute`` + ``data``: it reaches the collective that much
late, and the others' ``sync`` is the consequence. So a rank with 35 % more compute has that excess as
``compute`` and the others have it as ``sync``; a rank with a slow loader of its own has it as ``data``;
a collective that costs every rank the same leaves every rank's own loss at zero.

Recent, not per report: each rank's waits are leaky sums with the ranking's ~2-minute memory, and the
split is read from the sums (means first, then the clamps, so noise does not add up to a loss). A report
costs a few C-level passes over the ranks — ``attrgetter`` and ``operator`` maps into plain float lists,
no per-rank object — and above ``FOLD_RANKS`` ranks only one report in every ⌈ranks / ``FOLD_RANKS``⌉ is
folded in: a sample that does not depend on what the reports hold, so the means are unbiased and a report
costs on average about what ``FOLD_RANKS`` ranks' would. Reports without a budget (before the ideal step
is known) only teach the usual waits; the one that ends a stall is left out (its waits are the stall's).
Pure: reports in, losses out; the clock is the reports'.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from itertools import repeat
from operator import add, attrgetter, mul

from ..samples import RankSample, TrainingSample
from .budget import Pace, StepBudget, all_reduce_ms, tokenizer_in_loader
from .goodput import RECENT_TAU_S
from .stats import decay
from .types import RankLoss

#: Above this many ranks, one report in every ⌈ranks / FOLD_RANKS⌉ is folded in.
FOLD_RANKS = 512
#: The most ranks the goodput block lists.
MAX_RANKS = 8
#: A rank is listed when its own loss is at least this share of the ideal step (the ranking's measurable loss).
MIN_OWN_SHARE = 0.02
#: How often (seconds of report time) the list of the worst ranks is worked out again.
REFRESH_S = 5.0
#: A rank's own components, and the one it waits for others in.
OWN = ("compute", "data")
WAITED = "sync"

_RANK = attrgetter("rank")
_DATA = attrgetter("data_wait_ms")
_SYNC = attrgetter("sync_wait_ms")
_ALL_REDUCE = attrgetter("all_reduce_wait_ms")


class RankBudgets:
    """Each rank's recent step budget against the job's ideal step, folded report by report."""

    def __init__(self, tau_s: float = RECENT_TAU_S) -> None:
        self.tau_s = tau_s
        self._usual_data = Pace()
        self._usual_wait = Pace()
        self._reports = 0
        self._ids: tuple[int, ...] = ()
        self._ranks: tuple[RankSample, ...] = ()
        self._data: list[float] = []  # per rank: leaky sum of its data wait (ms)
        self._wait: list[float] = []  # per rank: leaky sum of its sync wait + all-reduce time (ms)
        self._weight = 0.0  # leaky count of the reports folded in
        self._excess = 0.0  # leaky sum of the job's excess the ranks split (compute + data + sync, ms)
        self._usual_data_sum = 0.0  # leaky sum of what a rank's data wait is measured against
        self._usual_wait_sum = 0.0  # leaky sum of what a rank's sync + all-reduce is measured against
        self._ideal_ms = 0.0
        self._ts: float | None = None
        self._worst: tuple[RankLoss, ...] = ()
        self._worst_ts = float("-inf")

    def add(self, ts: float, report: TrainingSample, budget: StepBudget | None, stalled: bool = False) -> None:
        """Fold the report's ranks in at ``ts`` (``budget``: the job's budget of that report)."""
        ranks = report.ranks
        n = len(ranks)
        if n < 2:
            return
        self._reports += 1
        if self._reports % -(-n // FOLD_RANKS):
            return  # not one of the sampled reports
        collective = all_reduce_ms(report) or 0.0
        data = _values(_DATA, ranks)
        wait = list(map(add, _values(_SYNC, ranks), _values(_ALL_REDUCE, ranks)))
        usual_data = self._usual_data.value if self._usual_data.ready else None
        usual_wait = self._usual_wait.value if self._usual_wait.ready else None
        self._usual_data.add(ts, sum(data) / n)
        self._usual_wait.add(ts, sum(wait) / n - collective)
        if budget is None or stalled or usual_data is None or usual_wait is None:
            return
        ids = tuple(map(_RANK, ranks))
        if ids != self._ids:  # another set of ranks: start their sums afresh
            self._ids, self._data, self._wait, self._ts = ids, [0.0] * n, [0.0] * n, None
            self._weight = self._excess = self._usual_data_sum = self._usual_wait_sum = 0.0
            self._worst, self._worst_ts = (), float("-inf")
        keep = 1.0 if self._ts is None else decay(ts - self._ts, self.tau_s)
        self._ts, self._ranks, self._ideal_ms = ts, ranks, budget.ideal_ms
        self._data = list(map(add, map(mul, self._data, repeat(keep)), data))
        self._wait = list(map(add, map(mul, self._wait, repeat(keep)), wait))
        lost = budget.lost_ms
        nested = lost.get("tokenizer", 0.0) if tokenizer_in_loader(report) else 0.0
        self._weight = self._weight * keep + 1.0
        self._excess = self._excess * keep + lost.get("compute", 0.0) + lost.get("data", 0.0) + lost.get(WAITED, 0.0)
        self._usual_data_sum = self._usual_data_sum * keep + usual_data + nested
        self._usual_wait_sum = self._usual_wait_sum * keep + usual_wait + collective

    def of(self, rank: int) -> dict[str, float] | None:
        """Rank ``rank``'s recent budget, ms per step: ``compute``, ``data``, ``sync`` (None when not known)."""
        try:
            i = self._ids.index(rank)
        except ValueError:
            return None
        compute, data, sync = self._split(self._data[i], self._wait[i])
        return {"compute": compute, "data": data, WAITED: sync}

    def worst(self, ts: float) -> tuple[RankLoss, ...]:
        """The ranks whose own loss is the largest (at least ``MIN_OWN_SHARE`` of the ideal step), worst first."""
        if ts - self._worst_ts < REFRESH_S or not self._weight:
            return self._worst
        self._worst_ts = ts
        floor = MIN_OWN_SHARE * self._ideal_ms
        if self._excess / self._weight < floor:  # no rank's own loss can exceed the job's: a cheap "none"
            self._worst = ()
            return ()
        split = self._split
        own = [sum(split(d, w)[:2]) for d, w in zip(self._data, self._wait, strict=True)]
        top = heapq.nlargest(MAX_RANKS, (i for i, ms in enumerate(own) if ms >= floor), key=own.__getitem__)
        self._worst = tuple(self._loss(i) for i in top)
        return self._worst

    def _loss(self, i: int) -> RankLoss:
        compute, data, sync = self._split(self._data[i], self._wait[i])
        r = self._ranks[i]
        return RankLoss(r.rank, compute + data, {"compute": compute, "data": data}, sync, r.hostname, r.gpu_index)

    def _split(self, data_sum: float, wait_sum: float) -> tuple[float, float, float]:
        """(compute, data, sync) per step of a rank with these sums: its waits beyond the usual ones, scaled
        down to the job's excess when they add up to more, and the rest of that excess its compute."""
        inv = 1.0 / self._weight
        excess = max(0.0, self._excess * inv)
        data = max(0.0, (data_sum - self._usual_data_sum) * inv)
        sync = max(0.0, (wait_sum - self._usual_wait_sum) * inv)
        waited = data + sync
        if waited > excess:
            scale = excess / waited
            data, sync = data * scale, sync * scale
        return max(0.0, excess - data - sync), data, sync


def _values(read: Callable[[RankSample], float | None], ranks: tuple[RankSample, ...]) -> list[float]:
    """Each rank's value of one wait (ms), 0 where a rank does not report it."""
    values = list(map(read, ranks))
    return [v or 0.0 for v in values] if None in values else values
