"""rank_straggler's columns as float64 numpy arrays: one call per step over every rank (see :mod:`.columns`).

Imported only when a job has thousands of ranks (:func:`.columns.columns_for`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .columns import UNKNOWN, Column, Columns


class _Arrays:
    """Columns as float64 numpy arrays (one call per step over every rank)."""

    def full(self, n: int, value: float) -> Column:
        return np.full(n, value)

    def of(self, values: Sequence[float | None]) -> Column:
        return np.array(values, dtype=float)  # None becomes NaN

    def waits(self, values: Sequence[float | None]) -> Column:
        column = np.array(values, dtype=float)
        column[(column != column) | (column == 0.0)] = 0.0  # a negative zero too, as ``v or 0.0``
        return column

    def inverse(self, rates: Sequence[float | None], scale: float) -> Column:
        column = np.array(rates, dtype=float)
        given = (column == column) & (column != 0.0)
        with np.errstate(over="ignore"):  # a rate near zero: an infinite lateness, as Python's division gives
            return np.divide(scale, column, out=np.full(len(column), UNKNOWN), where=given)

    def busy_lateness(self, step: Column, data: Column, all_reduce: Column) -> Column:
        busy = step - all_reduce
        return data + np.where(busy > 0.0, busy, 0.0)

    def wall_lateness(self, step: Column, sync: Column, all_reduce: Column) -> Column:
        wall = step - sync - all_reduce
        return np.where(wall > 0.0, wall, 0.0)

    def known(self, values: Column) -> Column:
        return np.sort(values[values == values])

    def forget_at_least(self, values: Column, limit: float) -> Column:
        return np.where(values >= limit, UNKNOWN, values)

    def place(self, values: Column, edges: tuple[float, float], levels: tuple[float, float, float]) -> Column:
        (lo, hi), (below, between, above) = edges, levels
        placed = np.where(values < lo, below, np.where(values < hi, between, above))
        return np.where(values == values, placed, UNKNOWN)

    def ewma(self, prior: Column, value: Column, alpha: float) -> Column:
        learned = np.where(prior != prior, value, prior + alpha * (value - prior))
        return np.where(value == value, learned, prior)

    def forgetful_min(self, best: Column, value: Column, forget: float, given: Column) -> Column:
        forgotten = best * forget
        learned = np.where(best != best, value, np.where(forgotten < value, forgotten, value))
        return np.where(given == given, learned, best)

    def median3(self, value: Column, prev1: Column, prev2: Column) -> tuple[Column, Column, Column]:
        lo, hi = np.minimum(prev1, prev2), np.maximum(prev1, prev2)  # NaN where either is unknown
        median = np.where(value >= hi, hi, np.where(value > lo, value, lo))
        kept = value != value
        return (
            np.where(kept | (lo != lo), value, median),
            np.where(kept, prev1, value),
            np.where(kept, prev2, prev1),
        )

    def relative(self, values: Column, typical: float) -> Column:
        return values / typical - 1.0

    def squared_deviation(self, values: Column, typical: float, mean: Column) -> Column:
        d = values / typical - 1.0 - mean
        return d * d

    def above(self, values: Column, floor: float) -> list[int]:
        return np.flatnonzero(values > floor).tolist()

    def tolist(self, values: Column) -> list[float]:
        return values.tolist()


ARRAYS: Columns = _Arrays()
