"""Incremental robust statistics: O(1) per value, no rescanning, no numpy.

Detectors keep one of these per series (per job, per GPU, per rank) and feed
it one value at a time, so a tick costs the same whatever the window size.

- :class:`RecentMedian` — median of the last few values: a one-tick spike
  (a GC pause, a sensor blip) never moves it.
- :class:`RobustBaseline` — the job's own normal level and spread: a median/MAD
  start, then an EWMA that learns only from values inside its band, so a fault
  never teaches the baseline that the fault is normal.
- :class:`Trend` — least-squares lines over trailing time windows with prefix
  sums, for forecasts (time to memory exhaustion, to the throttle temperature).
- :class:`WindowMin` — the minimum over a sliding time window (monotonic deque).
- :class:`RecentSpread` — the sigma of the last values, outliers included (read on demand).
- :func:`decay` — how much of an exponential memory survives ``dt`` seconds.
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_left, insort
from collections import deque

#: Converts a median absolute deviation to a normal standard deviation.
MAD_TO_SIGMA = 1.4826
#: Converts a mean absolute deviation to a normal standard deviation.
MEAN_ABS_TO_SIGMA = 1.2533
#: Converts an interquartile range to a normal standard deviation.
IQR_TO_SIGMA = 1.349


def decay(dt: float, tau: float) -> float:
    """The weight an exponential memory with time constant ``tau`` keeps after ``dt`` seconds."""
    return math.exp(-dt / tau) if dt > 0 else 1.0


def median(values: list[float]) -> float:
    """Median of a non-empty list (sorts a copy)."""
    return sorted_median(sorted(values))


def sorted_median(s: list[float]) -> float:
    """Median of a non-empty, already sorted list."""
    n = len(s)
    mid = n // 2
    return s[mid] if n % 2 else 0.5 * (s[mid - 1] + s[mid])


class RecentMedian:
    """Median of the last ``size`` values (a ring; ``size`` is small, 3–31).

    The ring's values are also kept sorted (one bisect out, one in, instead of
    sorting the ring on every value: 1.4x at 5 values, 2.6x at 31). While the
    ring holds a value whose place in a sort depends on where it sits in the
    ring — a NaN, a ``-0.0`` beside ``0.0``, an int beside an equal float —
    the median is read from ``sorted(ring)`` as before, so it is the same
    value, to the bit, either way.
    """

    __slots__ = ("_next", "_odd", "_ring", "_size", "_sorted", "value")

    def __init__(self, size: int = 5) -> None:
        self._ring: list[float] = []
        self._sorted: list[float] = []  # the ring's plain floats, sorted
        self._odd = 0  # values in the ring that are not plain floats (see the class docstring)
        self._size = size
        self._next = 0
        self.value: float | None = None

    def add(self, x: float) -> float:
        """Take ``x`` and return the median of the last ``size`` values."""
        ring, ordered = self._ring, self._sorted
        n = len(ring)
        if n < self._size:
            ring.append(x)
            n += 1
        else:
            i = self._next
            old = ring[i]
            ring[i] = x
            self._next = (i + 1) % n
            if _odd(old):
                self._odd -= 1
            else:
                del ordered[bisect_left(ordered, old)]
        if _odd(x):
            self._odd += 1
        else:
            insort(ordered, x)
        self.value = value = sorted_median(ordered if not self._odd else sorted(ring))
        return value

    def __len__(self) -> int:
        return len(self._ring)


def _odd(x: float) -> bool:
    """A value whose place among equal ones matters: not a float, a NaN, or a negative zero."""
    return type(x) is not float or x != x or (x == 0.0 and math.copysign(1.0, x) < 0.0)


class RobustBaseline:
    """A series' normal level (``loc``) and spread (``scale``, a sigma), learned robustly.

    The first ``warmup`` values give the median and MAD. After that each value
    inside ``loc ± band·scale`` moves both by ``alpha``; values outside are
    ignored, so a fault — sudden or ramped — does not become the new normal.
    ``adopt`` (+1: higher, -1: lower) names the harmless side: values beyond the
    band on that side are learned anyway (a job that got faster is not broken).
    ``min_scale`` keeps the band open on very quiet series (rounded readings).
    """

    __slots__ = ("_seed", "adopt", "alpha", "band", "loc", "min_scale", "scale", "warmup")

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


#: Running sums kept per point of a :class:`Trend`: n, Σt, Σy, Σt², Σty, Σy².
SUMS = 6
Sums = tuple[float, float, float, float, float, float]
_ZERO: Sums = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0)


class Trend:
    """Least-squares lines through the last ``span`` seconds of a series, for any span up to ``max_span_s``.

    Points are kept with running prefix sums (n, Σt, Σy, Σt², Σty, Σy²), so
    adding a point and fitting any trailing window are both O(1) (plus a
    bisection): one series serves a 15-second and a 10-minute forecast alike.
    Times and values are stored relative to an origin point, re-based now and
    then, so unix timestamps and byte counts lose no precision. ``every_s``
    thins the points to one per ``every_s`` seconds. Storage is flat arrays
    of doubles (64 bytes a point, no Python object per point), so a daemon
    that keeps dozens of 10-minute series holds little and fragments nothing.
    """

    __slots__ = ("_base", "_cum", "_head", "_last", "_origin", "_sums", "_t", "_y", "every_s", "max_span_s")

    def __init__(self, max_span_s: float, every_s: float = 0.0) -> None:
        self.max_span_s = max_span_s
        self.every_s = every_s
        self._t = array("d")
        self._y = array("d")
        self._cum = array("d")  # the SUMS running sums of each point, one point after the other
        self._head = 0  # index of the oldest point inside the span
        self._base: Sums = _ZERO  # the sums just before the head
        self._sums: Sums = _ZERO  # the newest point's sums (the array's last SUMS doubles, kept to save a slice)
        self._origin: tuple[float, float] | None = None
        self._last = -math.inf

    def add(self, ts: float, y: float) -> None:
        """Add a point at unix time ``ts`` (thinned to one per ``every_s``)."""
        if ts - self._last < self.every_s:
            return
        self._last = ts
        origin = self._origin
        if origin is None:
            origin = self._origin = (ts, y)
        t, v = ts - origin[0], y - origin[1]
        n, st, sy, stt, sty, syy = self._sums
        self._sums = sums = (n + 1, st + t, sy + v, stt + t * t, sty + t * v, syy + v * v)
        times, head = self._t, self._head
        times.append(t)
        self._y.append(v)
        self._cum.extend(sums)
        while t - times[head] > self.max_span_s:
            head += 1
        if head != self._head:
            self._base = self._sums_before(head)
            self._head = head
        if head > 256 and 2 * head > len(times):
            self._compact()

    def _sums_before(self, i: int) -> Sums:
        """The running sums up to (not including) point ``i``."""
        if i == 0:
            return self._base
        n, st, sy, stt, sty, syy = self._cum[SUMS * (i - 1) : SUMS * i]
        return n, st, sy, stt, sty, syy

    def _compact(self) -> None:
        """Drop the points that left the window; re-base on the oldest point when the sums grew large."""
        head = self._head
        del self._t[:head], self._y[:head], self._cum[: SUMS * head]
        self._head = 0
        if self._cum[-SUMS] < 100_000:
            return
        t0, y0 = self._t[0], self._y[0]
        self._origin = (self._origin[0] + t0, self._origin[1] + y0)  # type: ignore[index]
        self._t = array("d", (t - t0 for t in self._t))
        self._y = array("d", (v - y0 for v in self._y))
        self._cum = array("d")
        n = st = sy = stt = sty = syy = 0.0
        for t, v in zip(self._t, self._y, strict=True):
            n, st, sy, stt, sty, syy = n + 1, st + t, sy + v, stt + t * t, sty + t * v, syy + v * v
            self._cum.extend((n, st, sy, stt, sty, syy))
        self._base = _ZERO
        self._sums = (n, st, sy, stt, sty, syy)

    def __len__(self) -> int:
        return len(self._t) - self._head

    def window(self, span_s: float) -> tuple[int, float, float]:
        """``(points, seconds covered, change of the raw value)`` over the trailing ``span_s``."""
        times = self._t
        if len(times) <= self._head:
            return 0, 0.0, 0.0
        i = bisect_left(times, times[-1] - span_s, self._head)
        return len(times) - i, times[-1] - times[i], self._y[-1] - self._y[i]

    def fit(self, span_s: float) -> tuple[float, float, float, int] | None:
        """``(slope per second, fitted value now, r², points)`` over the trailing ``span_s``; None below 3 points."""
        times = self._t
        if len(times) - self._head < 3:
            return None
        i = bisect_left(times, times[-1] - span_s, self._head)
        lo = self._base if i == self._head else self._sums_before(i)
        n, st, sy, stt, sty, syy = (b - a for a, b in zip(lo, self._sums, strict=True))
        if n < 3:
            return None
        sxx = stt - st * st / n
        if sxx <= 0:
            return None
        sxy = sty - st * sy / n
        syy -= sy * sy / n
        slope = sxy / sxx
        r2 = min(1.0, sxy * sxy / (sxx * syy)) if syy > 0 else 0.0
        now = sy / n + slope * (times[-1] - st / n)
        return slope, self._origin[1] + now, r2, round(n)  # type: ignore[index]


def t_stat(r2: float, n: int) -> float:
    """A fitted slope's t statistic from its r² and point count (how sure the trend is not noise)."""
    if r2 >= 1.0:
        return math.inf
    return math.sqrt(r2 * (n - 2) / (1.0 - r2)) if n > 2 else 0.0


class WindowMin:
    """Minimum of the values of the last ``span_s`` seconds (monotonic deque, O(1) amortised)."""

    __slots__ = ("_q", "span_s")

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


class RecentSpread:
    """The level (median) and spread (a sigma, from the mean absolute deviation about it) of the last values.

    Where :class:`RobustBaseline` ignores outliers as faults, this counts them: for a series whose noise *is*
    its outliers — a CPU collective that takes 0.45 ms or, when a rank is descheduled, 5 ms — a median
    absolute deviation is 0 and every slow step would look like many sigmas. A read sorts the values, so it
    is worked out again only every ``size // 8`` values (a window's level and spread move slowly: ~13 µs a
    read at 62 values, once per training report otherwise).
    """

    __slots__ = ("_read", "_refresh", "_ring", "_since")

    def __init__(self, size: int = 60) -> None:
        self._ring: deque[float] = deque(maxlen=size)
        self._read: tuple[float, float] | None = None
        self._refresh = max(1, size // 8)
        self._since = 0  # values added since the last read was worked out

    def add(self, x: float) -> None:
        self._ring.append(x)
        self._since += 1
        if self._since >= self._refresh or len(self._ring) <= self._refresh:  # fresh while the window fills
            self._read = None

    def __len__(self) -> int:
        return len(self._ring)

    def read(self) -> tuple[float, float]:
        """``(level, sigma)`` of the values held (zeros with none), as of at most ``size // 8`` values ago."""
        if self._read is None:
            ring = self._ring
            level = median(list(ring)) if ring else 0.0
            sigma = MEAN_ABS_TO_SIGMA * sum(abs(x - level) for x in ring) / len(ring) if ring else 0.0
            self._read = (level, sigma)
            self._since = 0
        return self._read
