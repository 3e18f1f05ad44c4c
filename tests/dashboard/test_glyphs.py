"""The drawing primitives, number formats and the snapshot ring, one behaviour at a time."""

from __future__ import annotations

import pytest

from trainpulse_otel.dashboard import fmt
from trainpulse_otel.dashboard.glyphs import SPARKS, bar, big_number, sparkline, stacked_bar
from trainpulse_otel.dashboard.panels.training import breakdown
from trainpulse_otel.dashboard.view import History
from trainpulse_otel.publish.snapshot import Snapshot
from trainpulse_otel.samples import TrainingSample


@pytest.mark.parametrize("fraction", [None, 0.0, 0.07, 0.5, 0.999, 1.0, 1.7, -0.2])
@pytest.mark.parametrize("width", [1, 7, 30])
def test_a_bar_is_always_exactly_its_width(fraction, width):
    assert bar(fraction, width, "green").cell_len == width


def test_a_bar_fills_in_eighths():
    assert bar(0.5, 8, "x").plain == "████░░░░"
    assert bar(0.5 + 1 / 16, 8, "x").plain == "████▌░░░"
    assert bar(1.0, 4, "x").plain == "████"


def test_a_sparkline_keeps_the_newest_values_and_shows_gaps():
    line = sparkline([1.0, 2.0, None, 4.0], 3, "cyan").plain
    assert line == f"{SPARKS[0]} {SPARKS[-1]}"  # the first value fell off; None is a hole
    assert sparkline([5.0], 4, "cyan").plain.startswith("   ")  # short history is right-aligned


def test_a_sparkline_does_not_turn_noise_into_cliffs():
    noisy = sparkline([100.0, 98.0, 100.0, 99.0], 4, "c").plain
    assert set(noisy) <= set(SPARKS[-2:])  # 2 % of noise is a ripple at the top
    collapse = sparkline([100.0, 100.0, 60.0, 60.0], 4, "c").plain
    assert SPARKS.index(collapse[0]) - SPARKS.index(collapse[-1]) >= 5


def test_a_stacked_bar_splits_its_width_by_largest_remainder():
    text = stacked_bar([(70.0, "a"), (20.0, "b"), (10.0, "c")], 10)
    assert text.cell_len == 10
    assert [(span.style, span.end - span.start) for span in text.spans] == [("a", 7), ("b", 2), ("c", 1)]
    assert stacked_bar([(1.0, "a"), (1.0, "b"), (1.0, "c")], 10).cell_len == 10
    assert stacked_bar([(0.0, "a")], 5).plain == "·····"


def test_the_step_breakdown_takes_compute_as_the_remainder():
    parts = {
        label: ms
        for label, ms, _ in breakdown(
            TrainingSample(step_time_ms=2000.0, data_wait_ms=100.0, sync_wait_ms=500.0, checkpoint_ms=0.0)
        )
    }
    assert parts == {
        "compute": 1400.0,
        "data": 100.0,
        "tokenizer": 0.0,
        "sync": 500.0,
        "all-reduce": 0.0,
        "checkpoint": 0.0,
    }
    over = {label: ms for label, ms, _ in breakdown(TrainingSample(step_time_ms=100.0, sync_wait_ms=150.0))}
    assert over["compute"] == 0.0  # reports that do not add up never draw a negative part


def test_big_digits_are_three_rows_of_equal_width():
    rows = big_number("100", "green")
    assert len(rows) == 3 and len({r.cell_len for r in rows}) == 1
    assert rows[0].plain == "▀█  █▀█ █▀█"


@pytest.mark.parametrize(
    ("value", "text"),
    [(None, "-"), (0, "0"), (0.4513, "0.451"), (75234.0, "75.2k"), (117000.0, "117k"), (2.5e9, "2.5G")],
)
def test_num(value, text):
    assert fmt.num(value) == text


@pytest.mark.parametrize(
    ("value", "text"), [(0, "0B"), (512, "512B"), (65035829248, "60.6G"), (2 * 1024**4, "2T"), (None, "-")]
)
def test_size(value, text):
    assert fmt.size(value) == text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0s"), (59.9, "59s"), (95, "1m35s"), (3 * 3600 + 125, "3h02m"), (90000, "1d01h"), (-3, "0s"), (None, "-")],
)
def test_duration(seconds, text):
    assert fmt.duration(seconds) == text


def test_millis_and_percent():
    assert (fmt.millis(850.4), fmt.millis(2309.9), fmt.millis(None)) == ("850ms", "2.31s", "-")
    assert (fmt.percent(88.0), fmt.percent(0.345, is_fraction=True), fmt.percent(4.25)) == ("88%", "34%", "4.2%")


def test_the_ring_replaces_a_snapshot_polled_twice_and_forgets_the_oldest():
    ring = History(size=3)
    for ts, tps in ((1.0, 10.0), (2.0, 20.0), (2.0, 21.0), (3.0, None), (4.0, 40.0)):
        ring.add(Snapshot(ts, "sim", training=TrainingSample(tokens_per_sec=tps) if tps else None))
    ring.add(Snapshot(None, "sim"))  # before a first tick there is no frame to keep
    assert len(ring) == 3
    assert ring.training_series(lambda t: t.tokens_per_sec) == [21.0, None, 40.0]
    assert ring.last_training() == (4.0, TrainingSample(tokens_per_sec=40.0))


def test_a_daemons_history_fills_the_ring_without_counting_a_frame_twice():
    ring = History(size=4)
    ring.add(Snapshot(2.0, "sim", training=TrainingSample(tokens_per_sec=20.0)))
    ring.extend(Snapshot(ts, "sim", training=TrainingSample(tokens_per_sec=ts * 10)).frame for ts in (1.0, 2.0, 3.0))
    assert [f.ts for f in ring] == [2.0, 3.0]  # older than the ring's newest: already seen; the same: replaced
    assert ring.newest_ts == 3.0 and ring.size == 4
