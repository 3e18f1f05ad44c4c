"""Incremental robust statistics: O(1) per value, no rescanning, no numpy.

Detectors keep one of these per series (per job, per GPU, per rank) and feed
it one value at a time, so a tick costs the same whatever the window size.

- :class:`RecentMedian` — median of the last few values: a one-tick spike
  (a GC pause, a sensor blip) never moves it.
- :class:`RobustBaseline` — the job's own normal level and spread: a median/MAD
  start, then an EWMA that learns only from values inside its band, so a fault
  never teaches the baseline that the fault is normal.
- :class:`Trend` — a least-squares line over a sliding time window with running
  sums, for forecasts (time to memory exhaustion, to the throttle temperature).
- :class:`WindowMin` — the minimum over a sliding time window (monotonic deque).
- :func:`decay` — how much of an exponential memory survives ``dt`` seconds.
"""

from __future__ import annotations

import math
from collections import deque

#: Converts a median absolute deviation to a normal standard deviation.
MAD_TO_SIGMA = 1.4826
#: Converts a mean absolute deviation to a normal standard deviation.
MEAN_ABS_TO_SIGMA = 1.2533


def decay(dt: float, tau: float) -> float:
    """The weight an exponential memory with time constant ``tau`` keeps after ``dt`` seconds."""
    return math.exp(-dt / tau) if dt > 0 else 1.0


def median(values: list[float]) -> float:
    """Median of a non-empty list (sorts a copy)."""
    s = sorted(values)
    n = len(s)
    mid = n // 2
    return s[mid] if n % 2 else 0.5 * (s[mid - 1] + s[mid])


class RecentMedian:
    """Median of the last ``size`` values (a ring; ``size`` is small, 3–9)."""

    __slots__ = ("_ring", "_size", "_next", "value")

    def __init__(self, size: int = 5) -> None:
        self._ring: list[float] = []
        self._size = size
        self._next = 0
        self.value: float | None = None

    def add(self, x: float) -> float:
        """Take ``x`` and return the median of the last ``size`` values."""
        ring = self._ring
        if len(ring) < self._size:
            ring.append(x)
        else:
            ring[self._next] = x
            self._next = (self._next + 1) % self._size
        self.value = median(ring)
        return self.value

    def __len__(self) -> int:
        return len(self._ring)


class RobustBaseline:
    """A series' normal level (``loc``) and spread (``scale``, a sigma), learned robustly.

    The first ``warmup`` values give the median and MAD. After that each value
    inside ``loc ± band·scale`` moves both by ``alpha``; values outside are
    ignored, so a fault — sudden or ramped — does not become the new normal.
    ``adopt`` (+1: higher, -1: lower) names the harmless side: values beyond the
    band on that side are learned anyway (a job that got faster is not broken).
    ``min_scale`` keeps the band open on very quiet series (rounded readings).
    """

    __slots__ = ("alpha", "warmup", "band", "adopt", "min_scale", "loc", "scale", "_seed")

    def __init__(
        self,
        alpha: float = 0.05,
        warmup: int = 10,
        band: float = 4.0,
        adopt: int = 0,
        min_scale: float = 0.0,
    ) -> None:
        self.alpha = alpha
        self.warmup = warmup
        self.band = band
        self.adopt = adopt
        self.min_scale = min_scale
        self.loc = 0.0
        self.scale = 0.0
        self._seed: list[float] | None = []

    @property
    def ready(self) -> bool:
        """True once the warm-up values have been seen."""
        return self._seed is None

    def update(self, x: float) -> None:
        """Learn from ``x`` if it looks normal (or during warm-up)."""
        seed = self._seed
        if seed is not None:
            seed.append(x)
            if len(seed) >= self.warmup:
                self.loc = median(seed)
                self.scale = max(self.min_scale, MAD_TO_SIGMA * median([abs(v - self.loc) for v in seed]))
                self._seed = None
            return
        dev = x - self.loc
        if abs(dev) <= self.band * self.scale or (self.adopt and dev * self.adopt > 0):
            self.loc += self.alpha * dev
            spread = MEAN_ABS_TO_SIGMA * min(abs(dev), self.band * self.scale)
            self.scale = max(self.min_scale, self.scale + self.alpha * (spread - self.scale))

    def z(self, x: float) -> float:
        """How many sigmas ``x`` is above the baseline (0 before warm-up)."""
        if self._seed is not None:
            return 0.0
        return (x - self.loc) / self.scale if self.scale > 0 else (math.inf if x > self.loc else 0.0)


class Trend:
    """Least-squares line through the points of the last ``span_s`` seconds.

    Running sums make ``add`` and ``fit`` O(1); every few hundred points the
    sums are rebuilt from the window so rounding cannot drift. Times and values
    are kept relative to the first point, so unix timestamps and byte counts
    lose no precision.
    ``every_s`` thins the points (one per ``every_s`` seconds) so a long window
    stays small.
    """

    __slots__ = ("span_s", "every_s", "_points", "_origin", "_sums", "_last", "_adds")

    def __init__(self, span_s: float, every_s: float = 0.0) -> None:
        self.span_s = span_s
        self.every_s = every_s
        self._points: deque[tuple[float, float]] = deque()
        self._origin: tuple[float, float] | None = None
        self._sums = [0.0] * 6  # n, Σt, Σy, Σtt, Σty, Σyy (relative to the origin point)
        self._last = -math.inf
        self._adds = 0

    def add(self, ts: float, y: float) -> None:
        """Add a point at unix time ``ts`` (thinned to one per ``every_s``)."""
        if ts - self._last < self.every_s:
            return
        self._last = ts
        if self._origin is None:
            self._origin = (ts, y)
        t, y = ts - self._origin[0], y - self._origin[1]
        points = self._points
        points.append((t, y))
        self._sum(t, y, 1.0)
        while t - points[0][0] > self.span_s:
            self._sum(*points.popleft(), -1.0)
        self._adds += 1
        if self._adds >= 256:
            self._adds = 0
            self._sums = [0.0] * 6
            for t0, y0 in points:
                self._sum(t0, y0, 1.0)

    def _sum(self, t: float, y: float, sign: float) -> None:
        s = self._sums
        s[0] += sign
        s[1] += sign * t
        s[2] += sign * y
        s[3] += sign * t * t
        s[4] += sign * t * y
        s[5] += sign * y * y

    def __len__(self) -> int:
        return len(self._points)

    @property
    def covered_s(self) -> float:
        """Seconds between the oldest and newest point."""
        return self._points[-1][0] - self._points[0][0] if len(self._points) > 1 else 0.0

    def fit(self) -> tuple[float, float, float] | None:
        """``(slope per second, fitted value now, r²)``, or None with fewer than 3 points."""
        n, st, sy, stt, sty, syy = self._sums
        if n < 3:
            return None
        sxx = stt - st * st / n
        if sxx <= 0:
            return None
        sxy = sty - st * sy / n
        slope = sxy / sxx
        syy -= sy * sy / n
        r2 = min(1.0, sxy * sxy / (sxx * syy)) if syy > 0 else 0.0
        now = self._points[-1][0]
        return slope, self._origin[1] + sy / n + slope * (now - st / n), r2  # type: ignore[index]

    def t_stat(self, fit: tuple[float, float, float]) -> float:
        """The slope's t statistic for a fit from :meth:`fit` (how sure the trend is not noise)."""
        r2 = fit[2]
        n = self._sums[0]
        if r2 >= 1.0:
            return math.inf
        return math.sqrt(r2 * (n - 2) / (1.0 - r2))


class WindowMin:
    """Minimum of the values of the last ``span_s`` seconds (monotonic deque, O(1) amortised)."""

    __slots__ = ("span_s", "_q")

    def __init__(self, span_s: float) -> None:
        self.span_s = span_s
        self._q: deque[tuple[float, float]] = deque()

    def add(self, ts: float, x: float) -> float:
        """Take ``x`` at ``ts`` and return the window's minimum."""
        q = self._q
        while q and q[-1][1] >= x:
            q.pop()
        q.append((ts, x))
        while q[0][0] < ts - self.span_s:
            q.popleft()
        return q[0][1]
