"""When each rank reaches the collective (its *lateness*), for ``rank_straggler``, a column at a time.

A report can carry 4,096 ranks and the detector reads it on every report, so
the per-rank fields are read as columns (one ``map`` over the ranks each) and
combined with ``map`` and comprehensions over plain lists of floats, not rank
by rank through attribute lookups. The arithmetic is the same expression per
rank, in the same order, so the values are the same to the last bit.
"""

from __future__ import annotations

from operator import add, attrgetter, sub

from ...samples import RankSample
from ..stats import sorted_median

#: A rank's fields, each read over all ranks in one C call.
STEP_TIME = attrgetter("step_time_ms")
RANK_NUMBER = attrgetter("rank")
_DATA_WAIT = attrgetter("data_wait_ms")
_SYNC_WAIT = attrgetter("sync_wait_ms")
_ALL_REDUCE_WAIT = attrgetter("all_reduce_wait_ms")


def _pstdev(values: list[float]) -> float:
    n = len(values)
    mean = sum(values) / n
    return (sum([(v - mean) ** 2 for v in values]) / n) ** 0.5


def reference(present: list[float]) -> float:
    """The rank others are compared with, from sorted values: the median, or the faster of two."""
    return sorted_median(present) if len(present) >= 3 else present[0]


def _or_zero(ranks: tuple[RankSample, ...], read: attrgetter[float | None]) -> list[float]:
    """A wait's column, an unreported (or zero) wait as 0.0."""
    column = list(map(read, ranks))
    return column if all(column) else [x or 0.0 for x in column]


def own_busy_vote(ranks: tuple[RankSample, ...], steps: list[float] | None) -> bool | None:
    """Does this report look like the own-busy convention? (None: it cannot tell.) ``steps``: every rank's
    step time (None: not every rank has one).

    Own busy time: everyone leaves the collective together, so data wait + step
    + sync wait is about equal across ranks. Wall time: the step itself is.
    """
    if steps is None:
        return None
    syncs = _or_zero(ranks, _SYNC_WAIT)
    if not any(syncs):
        return None
    leave = list(map(add, map(add, _or_zero(ranks, _DATA_WAIT), steps), syncs))
    return _pstdev(leave) < _pstdev(steps)


def lateness(ranks: tuple[RankSample, ...], own_busy: bool, steps: list[float] | None) -> list[float | None]:
    """Each rank's arrival at the collective (ms; relative units when only tokens/s are known); ``steps``: every
    rank's step time (None: not every rank has one). Only the tokens-per-second timing leaves a rank out (None)."""
    if steps is None:
        return [1000.0 / r.tokens_per_sec if r.tokens_per_sec else None for r in ranks]
    all_reduce = _or_zero(ranks, _ALL_REDUCE_WAIT)
    if own_busy:  # data wait + max(0, step - all-reduce)
        busy = map(sub, steps, all_reduce)
        data = _or_zero(ranks, _DATA_WAIT)
        return [d + (x if x > 0.0 else 0.0) for d, x in zip(data, busy, strict=True)]  # noqa: FURB136 (no call)
    # max(0, step - sync wait - all-reduce)
    wall = map(sub, map(sub, steps, _or_zero(ranks, _SYNC_WAIT)), all_reduce)
    return [x if x > 0.0 else 0.0 for x in wall]  # noqa: FURB136 (a comparison, not a call per rank)
