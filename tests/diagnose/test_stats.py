"""The incremental statistics detectors are built from."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainpulse_otel.diagnose.stats import RecentMedian, RobustBaseline, Trend, WindowMin, sorted_median, t_stat


def test_recent_median_ignores_a_single_spike():
    m = RecentMedian(5)
    values = [m.add(x) for x in (10, 11, 9, 500, 10, 12)]
    assert values[3] == pytest.approx(10.5)  # the spike is one of four: it only shifts the middle
    assert max(values[4:]) <= 12


# Plain floats with many repeats, and the values whose order in a sort depends on where they sit: NaN, ±0, ints.
SERIES_VALUES = st.one_of(
    st.sampled_from([1.0, 2.0, 2.0, 3.5, 0.0, -0.0, math.nan, math.inf, -math.inf, 2, 0]),
    st.floats(allow_nan=True, allow_infinity=True),
)


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=1, max_value=9), st.lists(SERIES_VALUES, max_size=60))
def test_recent_median_is_the_median_of_its_sorted_ring_to_the_bit(size, xs):
    """The kept-sorted ring gives what sorting the ring on every value gave, whatever the values."""
    m = RecentMedian(size)
    ring: list[float] = []
    for i, x in enumerate(xs):
        if len(ring) < size:
            ring.append(x)
        else:
            ring[(i - size) % size] = x
        assert repr(m.add(x)) == repr(sorted_median(sorted(ring)))


def test_robust_baseline_learns_normal_values_and_ignores_a_fault():
    rng = random.Random(1)
    b = RobustBaseline(alpha=0.05, warmup=20)
    for _ in range(200):
        b.update(100 + rng.gauss(0, 2))
    assert b.ready and b.loc == pytest.approx(100, abs=1) and b.scale == pytest.approx(2, rel=0.3)
    for _ in range(500):  # a fault far outside the band never becomes normal
        b.update(60 + rng.gauss(0, 2))
    assert b.loc == pytest.approx(100, abs=1)
    assert b.z(60) < -10


def test_robust_baseline_adopts_the_harmless_side():
    b = RobustBaseline(alpha=0.1, warmup=10, adopt=+1)
    for _ in range(10):
        b.update(100.0)
    for _ in range(100):
        b.update(150.0)
    assert b.loc == pytest.approx(150, rel=0.01)


def test_baseline_is_not_ready_during_warmup_and_scores_zero():
    b = RobustBaseline(warmup=5)
    for x in (1, 2, 3):
        b.update(x)
    assert not b.ready and b.z(100) == 0.0


def test_trend_fits_any_trailing_window_exactly():
    trend = Trend(600.0)
    for t in range(300):
        y = 5.0 if t < 200 else 5.0 + 0.5 * (t - 200)  # flat, then a ramp over the last 100 s
        trend.add(1e9 + t, y)
    slope, now, r2, n = trend.fit(60.0)
    assert slope == pytest.approx(0.5) and now == pytest.approx(5.0 + 0.5 * 99) and r2 == pytest.approx(1.0)
    assert n == 61
    long_slope = trend.fit(300.0)[0]
    assert 0 < long_slope < 0.5  # the long window still sees the flat part
    points, covered, change = trend.window(60.0)
    assert (points, covered, change) == (61, 60.0, pytest.approx(30.0))


def test_trend_thins_points_and_forgets_beyond_its_span():
    trend = Trend(100.0, every_s=2.0)
    for t in range(1000):
        trend.add(float(t), float(t))
    assert len(trend) == 51
    assert trend.fit(100.0)[0] == pytest.approx(1.0)


def test_trend_stays_exact_over_a_long_run_with_rebasing():
    trend = Trend(120.0)
    rng = random.Random(3)
    for t in range(250_000):
        trend.add(1.7e9 + t, 7e10 + 1000.0 * t + rng.gauss(0, 10))
    slope, now, r2, _ = trend.fit(120.0)
    assert slope == pytest.approx(1000.0, rel=1e-3)
    assert now == pytest.approx(7e10 + 1000.0 * 249_999, rel=1e-9)
    assert r2 > 0.99


def test_t_stat_grows_with_fit_quality_and_points():
    assert t_stat(0.9, 30) > t_stat(0.9, 10) > t_stat(0.5, 10) > 0
    assert math.isinf(t_stat(1.0, 5))


def test_window_min_slides():
    w = WindowMin(10.0)
    got = [w.add(float(t), x) for t, x in enumerate([5, 3, 8, 9, 7, 6, 9, 9, 9, 9, 9, 9, 9, 9])]
    assert got[1] == 3 and got[11] == 3 and got[12] == 6
