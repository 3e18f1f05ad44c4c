"""When each rank reaches the collective (its *lateness*), for ``rank_straggler``, a column at a time.

A report can carry 4,096 ranks and the detector reads it on every report, so
the per-rank fields are read as columns (one ``map`` over the ranks each) and
combined a column at a time (:mod:`.columns`), not rank by rank through
attribute lookups.
"""

from __future__ import annotations

from operator import add, attrgetter

from ...samples import RankSample
from ..stats import sorted_median
from . import columns
from .columns import Column

#: A rank's fields, each read over all ranks in one C call.
STEP_TIME = attrgetter("step_time_ms")
RANK_NUMBER = attrgetter("rank")
_DATA_WAIT = attrgetter("data_wait_ms")
_SYNC_WAIT = attrgetter("sync_wait_ms")
_ALL_REDUCE_WAIT = attrgetter("all_reduce_wait_ms")
_TOKENS = attrgetter("tokens_per_sec")


def _pstdev(values: list[float]) -> float:
    n = len(values)
    mean = sum(values) / n
    return (sum([(v - mean) ** 2 for v in values]) / n) ** 0.5


def reference(present: Column) -> float:
    """The rank others are compared with, from sorted known values: the median, or the faster of two."""
    return float(sorted_median(present) if len(present) >= 3 else present[0])


def own_busy_vote(ranks: tuple[RankSample, ...], steps: list[float] | None) -> bool | None:
    """Does this report look like the own-busy convention? (None: it cannot tell.) ``steps``: every rank's
    step time (None: not every rank has one).

    Own busy time: everyone leaves the collective together, so data wait + step
    + sync wait is about equal across ranks. Wall time: the step itself is.
    """
    if steps is None:
        return None
    syncs = columns.waits(list(map(_SYNC_WAIT, ranks)))
    if not any(syncs):
        return None
    leave = list(map(add, map(add, columns.waits(list(map(_DATA_WAIT, ranks))), steps), syncs))
    return _pstdev(leave) < _pstdev(steps)


def lateness(ranks: tuple[RankSample, ...], own_busy: bool, steps: list[float] | None) -> Column:
    """Each rank's arrival at the collective (ms; relative units when only tokens/s are known), as a column;
    ``steps``: every rank's step time (None: not every rank has one). Only the tokens-per-second timing leaves a
    rank out (unknown)."""
    if steps is None:
        return columns.inverse(list(map(_TOKENS, ranks)), 1000.0)
    step, all_reduce = columns.of(steps), columns.waits(list(map(_ALL_REDUCE_WAIT, ranks)))
    if own_busy:  # data wait + max(0, step - all-reduce)
        return columns.busy_lateness(step, columns.waits(list(map(_DATA_WAIT, ranks))), all_reduce)
    return columns.wall_lateness(
        step, columns.waits(list(map(_SYNC_WAIT, ranks))), all_reduce
    )  # max(0, step - sync - AR)
