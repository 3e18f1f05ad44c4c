"""rank_straggler's columns: each step does, element by element, what it says (unknown values, ties, both
zeros), and the detector over arbitrary jobs (ranks missing, a paused rank, tokens/s only) stays well formed."""

from __future__ import annotations

import math
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.diagnose.frames import healthy, report, slow
from trainpulse_otel.diagnose.detectors import RankStraggler, columns
from trainpulse_otel.diagnose.detectors.columns import UNKNOWN
from trainpulse_otel.diagnose.tick import TickBuilder

VALUE = st.one_of(
    st.floats(min_value=0.0, max_value=1e5, allow_nan=False),
    st.sampled_from([0.0, -0.0, 1.0, 1700.0]),  # ties and both zeros
    st.just(UNKNOWN),
)


def same(got: list[float], want: list[float]) -> bool:
    """Equal, element by element, an unknown (NaN) equal to an unknown."""
    return len(got) == len(want) and all(g == w or (g != g and w != w) for g, w in zip(got, want, strict=True))


def unknown(*values: float) -> bool:
    return any(math.isnan(v) for v in values)


def three_columns():
    return st.integers(min_value=1, max_value=12).flatmap(
        lambda n: st.tuples(*(st.lists(VALUE, min_size=n, max_size=n) for _ in range(3)))
    )


@settings(max_examples=200, deadline=None)
@given(three_columns(), st.floats(min_value=0.01, max_value=1.0), st.floats(min_value=1.0, max_value=2e4))
def test_every_step_does_what_it_says_per_rank(cols, alpha, typical):
    a, b, c = cols
    rows = list(zip(a, b, c, strict=True))
    assert same(columns.ewma(a, b, alpha), [p if v != v else v if p != p else p + alpha * (v - p) for p, v, _ in rows])
    assert same(
        columns.forgetful_min(a, b, 1.0005, c),
        [x if g != g else v if x != x else (q if (q := x * 1.0005) < v else v) for x, v, g in rows],
    )
    median, prev1, prev2 = columns.median3(a, b, c)
    assert same(median, [x if unknown(x, p, q) else sorted([x, p, q])[1] for x, p, q in rows])
    assert same(prev1, [p if x != x else x for x, p, _ in rows])  # a rank left out keeps its history
    assert same(prev2, [q if x != x else p for x, p, q in rows])
    assert columns.known(a) == sorted(v for v in a if v == v)
    assert same(columns.forget_at_least(a, typical), [UNKNOWN if v >= typical else v for v in a])
    placed = columns.place(a, (typical / 2, typical), (0.1, 0.2, 0.3))
    assert same(placed, [UNKNOWN if v != v else 0.1 if v < typical / 2 else 0.2 if v < typical else 0.3 for v in a])
    assert same(columns.relative(a, typical), [v / typical - 1.0 for v in a])
    assert same(columns.squared_deviation(a, typical, b), [(d := v / typical - 1.0 - m) * d for v, m, _ in rows])
    assert columns.above(a, typical / 2) == [i for i, v in enumerate(a) if v > typical / 2]


@settings(max_examples=200, deadline=None)
@given(three_columns())
def test_rank_fields_read_into_columns(cols):
    """A report's fields (None: not reported), as the detector reads them: waits, rates, the two lateness forms."""
    step, data, all_reduce = ([None if v != v else v for v in col] for col in cols)
    assert same(columns.of(step), [UNKNOWN if v is None else v for v in step])
    assert columns.waits(data) == [v or 0.0 for v in data]
    assert same(columns.inverse(step, 1000.0), [1000.0 / v if v else UNKNOWN for v in step])
    known_step = [1.0 if v is None else v for v in step]
    d, r = columns.waits(data), columns.waits(all_reduce)
    assert columns.busy_lateness(known_step, d, r) == [
        w + max(0.0, s - x) for s, w, x in zip(known_step, d, r, strict=True)
    ]
    assert columns.wall_lateness(known_step, d, r) == [
        max(0.0, s - w - x) for s, w, x in zip(known_step, d, r, strict=True)
    ]


def jobs():
    """Arbitrary jobs: 2 to 40 ranks, either convention or tokens/s only, one rank slow from some report on,
    another paused for one report, ranks missing from some reports."""
    return st.tuples(
        st.integers(min_value=2, max_value=40),
        st.sampled_from(["own_busy", "wall", "tokens"]),
        st.floats(min_value=1.0, max_value=1.6),
        st.integers(min_value=0, max_value=60),
        st.sets(st.integers(min_value=0, max_value=79), max_size=6),
        st.integers(min_value=0, max_value=79),
    )


def frames_of(job) -> list:
    n, convention, factor, from_t, missing_at, pause_at = job
    frames = []

    def paused(r, rng):  # rank 0 sits out a stall for one report
        return healthy(r, rng) * (40.0 if r == 0 else 1.0)

    for t in range(80):
        work = paused if t == pause_at else slow(n - 1, factor, from_t, t)
        frame = report(t, n, work, "wall" if convention == "wall" else "own_busy")
        ranks = frame.training.ranks
        if convention == "tokens":
            ranks = tuple(replace(r, tokens_per_sec=1e6 / r.step_time_ms, step_time_ms=None) for r in ranks)
        if t in missing_at:
            ranks = ranks[:-1]
        frames.append(replace(frame, training=replace(frame.training, ranks=ranks)))
    return frames


@settings(max_examples=25, deadline=None)
@given(jobs())
def test_the_detector_stays_well_formed_over_arbitrary_jobs(job):
    det, ticks = RankStraggler(), TickBuilder()
    n = job[0]
    for frame in frames_of(job):
        for finding in det.update(ticks.next(frame)) or ():
            assert 0 <= finding.subject["rank"] < n
            assert finding.score > 0.0 and math.isfinite(finding.score)
            for value in finding.evidence.values():
                assert isinstance(value, str) or (type(value) is float and math.isfinite(value))
        assert all(0.0 <= rel <= 1.0 and 0.0 <= ind <= 1.0 for rel, ind in det.scores().values())
        assert det.reference is None or det.reference > 0
