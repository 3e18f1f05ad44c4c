"""Per-rank columns for ``rank_straggler``: the element-wise steps its statistics take, over lists or arrays.

The detector keeps one column per statistic over the job's ranks (a rank's
place its index) and updates each as a whole on every report. Which holds
the columns is chosen by the job's size, as the measured costs of one report
say (``rank_straggler`` alone, a healthy job):

======  ============  ============
ranks   Python lists  numpy arrays
======  ============  ============
8       60 µs         187 µs
64      192 µs        227 µs
512     968 µs        509 µs
4,096   7.6 ms        2.9 ms
======  ============  ============

A numpy call costs a microsecond or more whatever its size, so a job's few
ranks are faster in comprehensions over lists; thousands of ranks as lists
are thousands of float objects scattered over the heap, and inside a job
daemon's tick (beside every other detector's state) each comprehension took
4-5x as long as alone, waiting on memory; an array is one block.

Both hold an unknown value (a rank not yet seen, or left out of a report) as
NaN, which every comparison treats as false, and both compute each element
with the same expression in the same order (numpy's element-wise float64
arithmetic is IEEE's, as Python's is), so a job's statistics are the same to
the last bit whichever holds them: a property test holds the two together.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache
from itertools import compress, count, repeat
from math import isnan
from operator import lt
from typing import Any, Protocol

#: An unknown value: NaN (every comparison with it is false).
UNKNOWN = math.nan
#: From this many ranks on, the columns are numpy arrays (see the module docstring's table).
ARRAY_RANKS = 128

Column = Any  # list[float] or a float64 numpy array: the columns that made it are the ones that read it


class Columns(Protocol):
    """The element-wise steps, over one kind of column. Every argument named ``value`` or ``prior`` is a column
    of the same length; unknown elements are NaN."""

    def full(self, n: int, value: float) -> Column:
        """A column of ``n`` copies of ``value``."""

    def of(self, values: Sequence[float | None]) -> Column:
        """A column of ``values``, None as unknown."""

    def waits(self, values: Sequence[float | None]) -> Column:
        """A wait's column: an unreported (or zero) wait as 0.0."""

    def inverse(self, rates: Sequence[float | None], scale: float) -> Column:
        """``scale / rate``; unknown where a rate is unreported or zero."""

    def busy_lateness(self, step: Column, data: Column, all_reduce: Column) -> Column:
        """``data + max(0, step - all_reduce)`` (own-busy step times)."""

    def wall_lateness(self, step: Column, sync: Column, all_reduce: Column) -> Column:
        """``max(0, step - sync - all_reduce)`` (wall step times)."""

    def known(self, values: Column) -> Column:
        """The known values, sorted (equal ones in any order: numpy's sort may swap a zero's sign between equal
        zeros; a lateness is never a negative zero)."""

    def forget_at_least(self, values: Column, limit: float) -> Column:
        """``values`` with every value at or above ``limit`` unknown."""

    def place(self, values: Column, edges: tuple[float, float], levels: tuple[float, float, float]) -> Column:
        """Per value, the level of its place: ``levels[0]`` below ``edges[0]``, ``levels[1]`` below ``edges[1]``,
        else ``levels[2]``; unknown where the value is."""

    def ewma(self, prior: Column, value: Column, alpha: float) -> Column:
        """``prior + alpha * (value - prior)``; ``value`` where ``prior`` is unknown, ``prior`` where ``value``
        is."""

    def forgetful_min(self, best: Column, value: Column, forget: float, given: Column) -> Column:
        """The lower of ``best * forget`` and ``value`` where ``given`` is known (else ``best``); ``value`` where
        ``best`` is unknown."""

    def median3(self, value: Column, prev1: Column, prev2: Column) -> tuple[Column, Column, Column]:
        """``(median of value and the two before, new prev1, new prev2)``: ``value`` itself while one before is
        unknown; an unknown ``value`` leaves its rank's history as it was."""

    def relative(self, values: Column, typical: float) -> Column:
        """``value / typical - 1.0``."""

    def squared_deviation(self, values: Column, typical: float, mean: Column) -> Column:
        """``(value / typical - 1.0 - mean) ** 2`` (as ``d * d``)."""

    def above(self, values: Column, floor: float) -> list[int]:
        """The places of the values above ``floor``, in order."""

    def tolist(self, values: Column) -> list[float]:
        """The column as Python floats."""


def columns_for(ranks: int) -> Columns:
    """The columns a job of ``ranks`` ranks is fastest in (see the module docstring)."""
    return arrays() if ranks >= ARRAY_RANKS else LISTS


@lru_cache(maxsize=1)
def arrays() -> Columns:
    """The numpy columns (:mod:`.array_columns`), imported by the first job with thousands of ranks: numpy
    costs a daemon ~0.2 s and ~14 MiB, which a node's own few ranks never need."""
    from .array_columns import ARRAYS

    return ARRAYS


class _Lists:
    """Columns as lists of Python floats (comprehensions: no call per element)."""

    def full(self, n: int, value: float) -> Column:
        return [value] * n

    def of(self, values: Sequence[float | None]) -> Column:
        return list(values) if None not in values else [UNKNOWN if v is None else v for v in values]

    def waits(self, values: Sequence[float | None]) -> Column:
        return list(values) if all(values) else [v or 0.0 for v in values]

    def inverse(self, rates: Sequence[float | None], scale: float) -> Column:
        return [scale / r if r else UNKNOWN for r in rates]

    def busy_lateness(self, step: Column, data: Column, all_reduce: Column) -> Column:
        return [d + (x if (x := s - a) > 0.0 else 0.0) for s, d, a in zip(step, data, all_reduce, strict=True)]

    def wall_lateness(self, step: Column, sync: Column, all_reduce: Column) -> Column:
        return [x if (x := s - w - a) > 0.0 else 0.0 for s, w, a in zip(step, sync, all_reduce, strict=True)]

    def known(self, values: Column) -> Column:
        return sorted([v for v in values if v == v])

    def forget_at_least(self, values: Column, limit: float) -> Column:
        return [UNKNOWN if v >= limit else v for v in values]

    def place(self, values: Column, edges: tuple[float, float], levels: tuple[float, float, float]) -> Column:
        (lo, hi), (below, between, above) = edges, levels
        return [(below if v < lo else between if v < hi else above) if v == v else UNKNOWN for v in values]

    def ewma(self, prior: Column, value: Column, alpha: float) -> Column:
        return [(v if p != p else p + alpha * (v - p)) if v == v else p for p, v in zip(prior, value, strict=True)]

    def forgetful_min(self, best: Column, value: Column, forget: float, given: Column) -> Column:
        return [
            (v if b != b else (q if (q := b * forget) < v else v)) if g == g else b
            for b, v, g in zip(best, value, given, strict=True)
        ]

    def median3(self, value: Column, prev1: Column, prev2: Column) -> tuple[Column, Column, Column]:
        median = [
            x
            if x != x or a != a or b != b
            else ((a if x >= a else (x if x > b else b)) if b < a else (b if x >= b else (x if x > a else a)))  # noqa: FURB136
            for x, a, b in zip(value, prev1, prev2, strict=True)
        ]  # the median of three in comparisons, not min/max calls: no call per rank
        if not any(map(isnan, value)):  # every rank reported: the history shifts whole
            return median, value, prev1
        return (
            median,
            [a if x != x else x for x, a in zip(value, prev1, strict=True)],
            [b if x != x else a for x, a, b in zip(value, prev1, prev2, strict=True)],
        )

    def relative(self, values: Column, typical: float) -> Column:
        return [v / typical - 1.0 for v in values]

    def squared_deviation(self, values: Column, typical: float, mean: Column) -> Column:
        return [(d := v / typical - 1.0 - m) * d for v, m in zip(values, mean, strict=True)]

    def above(self, values: Column, floor: float) -> list[int]:
        return list(compress(count(), map(lt, repeat(floor), values)))  # ``floor < v``, told in C

    def tolist(self, values: Column) -> list[float]:
        return list(values)


LISTS: Columns = _Lists()
