"""rank_straggler's columns: Python lists and numpy arrays give the same statistics, to the bit.

Each element-wise step over arbitrary columns (unknown values, zeros of both signs, ties), then the
whole detector over arbitrary reports, once with each kind of column.
"""

from __future__ import annotations

import math
import struct
import subprocess
import sys
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.diagnose.test_straggler import healthy, report, slow
from trainpulse_otel.diagnose.detectors import RankStraggler
from trainpulse_otel.diagnose.detectors.array_columns import ARRAYS
from trainpulse_otel.diagnose.detectors.columns import ARRAY_RANKS, LISTS, UNKNOWN, columns_for
from trainpulse_otel.diagnose.tick import TickBuilder

VALUE = st.one_of(
    st.floats(min_value=0.0, max_value=1e5, allow_nan=False),
    st.sampled_from([0.0, -0.0, 1.0, 1700.0]),  # ties and both zeros
    st.just(UNKNOWN),
)


def bits(values) -> list[int]:
    """A column's exact values (NaN and -0.0 told apart from everything else)."""
    return [struct.unpack("<q", struct.pack("<d", v))[0] if v == v else -1 for v in LISTS.tolist(values)]


def same(a, b) -> bool:
    return bits(a) == bits(b)


def columns(n_min: int = 1):
    return st.integers(min_value=n_min, max_value=12).flatmap(
        lambda n: st.tuples(*(st.lists(VALUE, min_size=n, max_size=n) for _ in range(3)))
    )


@settings(max_examples=200, deadline=None)
@given(columns(), st.floats(min_value=0.01, max_value=1.0), st.floats(min_value=1.0, max_value=2e4))
def test_every_step_is_the_same_over_lists_and_arrays(cols, alpha, typical):
    a, b, c = cols
    arrays = [ARRAYS.of(x) for x in cols]
    assert same(LISTS.ewma(a, b, alpha), ARRAYS.ewma(*arrays[:2], alpha))
    assert same(LISTS.forgetful_min(a, b, 1.0005, c), ARRAYS.forgetful_min(arrays[0], arrays[1], 1.0005, arrays[2]))
    for got, want in zip(LISTS.median3(a, b, c), ARRAYS.median3(*arrays), strict=True):
        assert same(got, want)
    assert LISTS.known(a) == ARRAYS.known(arrays[0]).tolist()  # equal values: a zero's sign may move in a sort
    assert same(LISTS.forget_at_least(a, typical), ARRAYS.forget_at_least(arrays[0], typical))
    edges, levels = (typical / 2, typical), (0.1, 0.2, 0.3)
    assert same(LISTS.place(a, edges, levels), ARRAYS.place(arrays[0], edges, levels))
    assert same(LISTS.relative(a, typical), ARRAYS.relative(arrays[0], typical))
    assert same(LISTS.squared_deviation(a, typical, b), ARRAYS.squared_deviation(arrays[0], typical, arrays[1]))
    assert LISTS.above(a, typical / 2) == ARRAYS.above(arrays[0], typical / 2)


@settings(max_examples=200, deadline=None)
@given(columns())
def test_rank_fields_read_the_same_into_lists_and_arrays(cols):
    """A report's fields (None: not reported), as the detector reads them: waits, rates, the two lateness forms."""
    raw = [[None if v != v else v for v in col] for col in cols]
    step, data, all_reduce = raw
    assert same(LISTS.of(step), ARRAYS.of(step))
    assert same(LISTS.waits(data), ARRAYS.waits(data))
    assert same(LISTS.inverse(step, 1000.0), ARRAYS.inverse(step, 1000.0))
    known_step = [1.0 if v is None else v for v in step]
    for late in ("busy_lateness", "wall_lateness"):
        got = getattr(LISTS, late)(LISTS.of(known_step), LISTS.waits(data), LISTS.waits(all_reduce))
        want = getattr(ARRAYS, late)(ARRAYS.of(known_step), ARRAYS.waits(data), ARRAYS.waits(all_reduce))
        assert same(got, want)


def run(columns, frames) -> list:
    """Every output of the detector over ``frames``: findings, scores, the reference and each rank's consistency."""
    det, ticks, out = RankStraggler(columns), TickBuilder(), []
    for frame in frames:
        findings = det.update(ticks.next(frame))
        out.append(
            (
                None
                if findings is None
                else [(f.score, f.severity, f.message, f.subject, f.evidence) for f in findings],
                det.scores(),
                det.reference,
                det.convention,
                [det.consistency(i) for i in range(len(det.scores()))],
            )
        )
    return out


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
def test_the_detector_finds_the_same_over_lists_and_arrays(job):
    frames = frames_of(job)
    assert repr(run(lambda n: LISTS, frames)) == repr(run(lambda n: ARRAYS, frames))


def test_a_straggler_is_found_alike_at_thousands_of_ranks():
    """Past ARRAY_RANKS the statistics are arrays by default; the finding is the lists' own."""
    n = 2 * ARRAY_RANKS
    assert columns_for(n) is ARRAYS and columns_for(8) is LISTS
    frames = [report(t, n, slow(n // 3, 1.3, 20, t)) for t in range(60)]
    by_default, by_lists = run(lambda n: columns_for(n), frames), run(lambda n: LISTS, frames)
    assert repr(by_default) == repr(by_lists)
    findings = by_default[-1][0]
    assert [f[3]["rank"] for f in findings] == [n // 3]
    assert all(type(v) is float for v in findings[0][4].values() if not isinstance(v, str))
    assert math.isclose(findings[0][4]["slower_than_median"], 0.3, rel_tol=0.1)


def test_a_daemon_without_thousands_of_ranks_never_imports_numpy():
    """numpy costs a process ~0.2 s and ~14 MiB: only the first job with thousands of ranks imports it."""
    code = (
        "import sys\n"
        "from tests.diagnose.test_straggler import report\n"
        "from trainpulse_otel.runtime import build_pipeline, discover\n"
        "pipeline = build_pipeline(discover(autoload=False))\n"
        "for t in range(30): pipeline.update(report(t, 64, lambda r, rng: 1700.0))\n"
        "assert 'numpy' not in sys.modules, 'numpy imported at 64 ranks'\n"
        "for t in range(30, 40): pipeline.update(report(t, 256, lambda r, rng: 1700.0))\n"
        "assert 'numpy' in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
