"""What the receiver remembers between requests: per (node, series), running totals and the previous export.

OTLP sums and histograms come cumulative (everything since the exporter
started) or as deltas (only the interval since its previous export: the
Datadog profile, ``OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE=delta``).
The frame wants running totals for TrainPulse's counters (ECC errors, XID
counts) and interval values for Megatron's histogram and counter (the mean
step time of the interval, the iterations skipped since the previous export),
so each temporality is turned into what is wanted here. The state is bounded:
the least recently updated series go first.
"""

from __future__ import annotations

from .points import AttributeValue, Series

#: Series remembered at most (a 64-node job of 8 GPUs with every counter is a few thousand).
MAX_SERIES = 65_536

SeriesKey = tuple[str, str, tuple[tuple[str, AttributeValue], ...]]


class SeriesState:
    """Running totals of delta sums and the previous cumulative export, per (node, series). Not thread-safe."""

    def __init__(self, max_series: int = MAX_SERIES) -> None:
        self.max_series = max_series
        self._totals: dict[SeriesKey, float] = {}
        self._previous: dict[SeriesKey, tuple[float, int]] = {}

    def running_total(self, node: str, series: Series, delta: bool, value: float) -> float:
        """A sum point of ``series`` as the total since its exporter started: a delta adds to the series' total."""
        if not delta:
            return value
        key = (node, *series)
        total = self._totals.pop(key, 0.0) + value
        self._remember(self._totals, key, total)
        return total

    def interval(self, node: str, series: Series, delta: bool, total: float, count: int = 0) -> tuple[float, int]:
        """What a sum (``total``) or histogram (``total``, ``count``) point added since the previous export.

        A delta point is that already. A cumulative one is compared with the
        series' previous export; the first export of a series, or one after its
        exporter restarted (the count or total went down), counts whole.
        """
        if delta:
            return total, count
        key = (node, *series)
        previous = self._previous.pop(key, None)
        self._remember(self._previous, key, (total, count))
        if previous is None or count < previous[1] or (count == previous[1] == 0 and total < previous[0]):
            return total, count
        return total - previous[0], count - previous[1]

    def _remember(self, table: dict, key: SeriesKey, value: object) -> None:
        table[key] = value
        if len(table) > self.max_series:
            del table[next(iter(table))]  # the least recently updated series
