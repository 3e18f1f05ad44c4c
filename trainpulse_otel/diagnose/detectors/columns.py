"""Per-rank columns for ``rank_straggler``: the element-wise steps its statistics take.

The detector keeps one column per statistic over the job's ranks (a rank's
place its index) and updates each as a whole on every report. A column is a
list of Python floats; an unknown value (a rank not yet seen, or left out of a
report) is NaN, which every comparison treats as false. Each step is one
comprehension over the ranks (no call per element), every argument named
``value`` or ``prior`` a column of the same length.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import compress, count, repeat
from math import isnan
from operator import lt

#: An unknown value: NaN (every comparison with it is false).
UNKNOWN = math.nan

Column = list[float]


def full(n: int, value: float) -> Column:
    """A column of ``n`` copies of ``value``."""
    return [value] * n


def of(values: Sequence[float | None]) -> Column:
    """A column of ``values``, None as unknown."""
    return list(values) if None not in values else [UNKNOWN if v is None else v for v in values]


def waits(values: Sequence[float | None]) -> Column:
    """A wait's column: an unreported (or zero) wait as 0.0."""
    return list(values) if all(values) else [v or 0.0 for v in values]


def inverse(rates: Sequence[float | None], scale: float) -> Column:
    """``scale / rate``; unknown where a rate is unreported or zero."""
    return [scale / r if r else UNKNOWN for r in rates]


def busy_lateness(step: Column, data: Column, all_reduce: Column) -> Column:
    """``data + max(0, step - all_reduce)`` (own-busy step times)."""
    return [d + (x if (x := s - a) > 0.0 else 0.0) for s, d, a in zip(step, data, all_reduce, strict=True)]


def wall_lateness(step: Column, sync: Column, all_reduce: Column) -> Column:
    """``max(0, step - sync - all_reduce)`` (wall step times)."""
    return [x if (x := s - w - a) > 0.0 else 0.0 for s, w, a in zip(step, sync, all_reduce, strict=True)]


def known(values: Column) -> Column:
    """The known values, sorted."""
    return sorted([v for v in values if v == v])


def forget_at_least(values: Column, limit: float) -> Column:
    """``values`` with every value at or above ``limit`` unknown."""
    return [UNKNOWN if v >= limit else v for v in values]


def place(values: Column, edges: tuple[float, float], levels: tuple[float, float, float]) -> Column:
    """Per value, the level of its place: ``levels[0]`` below ``edges[0]``, ``levels[1]`` below ``edges[1]``, else
    ``levels[2]``; unknown where the value is."""
    (lo, hi), (below, between, above) = edges, levels
    return [(below if v < lo else between if v < hi else above) if v == v else UNKNOWN for v in values]


def ewma(prior: Column, value: Column, alpha: float) -> Column:
    """``prior + alpha * (value - prior)``; ``value`` where ``prior`` is unknown, ``prior`` where ``value`` is."""
    return [(v if p != p else p + alpha * (v - p)) if v == v else p for p, v in zip(prior, value, strict=True)]


def forgetful_min(best: Column, value: Column, forget: float, given: Column) -> Column:
    """The lower of ``best * forget`` and ``value`` where ``given`` is known (else ``best``); ``value`` where
    ``best`` is unknown."""
    return [
        (v if b != b else (q if (q := b * forget) < v else v)) if g == g else b
        for b, v, g in zip(best, value, given, strict=True)
    ]


def median3(value: Column, prev1: Column, prev2: Column) -> tuple[Column, Column, Column]:
    """``(median of value and the two before, new prev1, new prev2)``: ``value`` itself while one before is
    unknown; an unknown ``value`` leaves its rank's history as it was."""
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


def relative(values: Column, typical: float) -> Column:
    """``value / typical - 1.0``."""
    return [v / typical - 1.0 for v in values]


def squared_deviation(values: Column, typical: float, mean: Column) -> Column:
    """``(value / typical - 1.0 - mean) ** 2`` (as ``d * d``)."""
    return [(d := v / typical - 1.0 - m) * d for v, m in zip(values, mean, strict=True)]


def above(values: Column, floor: float) -> list[int]:
    """The places of the values above ``floor``, in order."""
    return list(compress(count(), map(lt, repeat(floor), values)))  # ``floor < v``, told in C
