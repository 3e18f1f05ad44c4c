"""The checkpoint interval: Young's and Daly's optimum on known inputs, and the ETTR Daly's model predicts."""

from __future__ import annotations

import math

import pytest

from trainpulse_otel.diagnose.joblife import advise_interval, daly_interval, expected_ettr, young_interval

#: Llama 3 405B's pre-training: 419 unexpected interruptions in 54 days (Meta, "The Llama 3 Herd of Models", 2024).
LLAMA3_MTBF_S = 54 * 86400 / 419


def test_young_is_the_square_root_of_twice_the_save_cost_times_the_mtbf():
    assert young_interval(60.0, 10_800.0) == pytest.approx(1138.42, abs=0.01)  # sqrt(2 x 60 x 3 h)
    assert young_interval(8.0, 2.0) == pytest.approx(math.sqrt(32.0))


def test_daly_tends_to_young_for_cheap_saves_and_to_the_mtbf_for_dear_ones():
    assert daly_interval(1.0, 1e6) == pytest.approx(young_interval(1.0, 1e6), rel=1e-3)
    assert daly_interval(600.0, 3600.0) < young_interval(600.0, 3600.0)  # it subtracts the save itself
    assert daly_interval(10_000.0, 4_000.0) == 4_000.0  # a save longer than two MTBFs: save once per MTBF


@pytest.mark.parametrize(("save_s", "restart_s", "mtbf_s"), [(60, 600, LLAMA3_MTBF_S), (5, 120, LLAMA3_MTBF_S),
                                                              (300, 900, 4 * 3600), (30, 60, 600)])  # fmt: skip
def test_daly_s_interval_is_the_best_interval_of_its_own_model(save_s, restart_s, mtbf_s):
    best = daly_interval(save_s, mtbf_s)
    grid = [best * f for f in (0.5, 0.7, 0.85, 0.95, 1.05, 1.2, 1.5, 2.0)]
    at_best = expected_ettr(best, save_s, restart_s, mtbf_s)
    assert all(expected_ettr(t, save_s, restart_s, mtbf_s) <= at_best + 1e-4 for t in grid)


def test_the_worked_example_llama3_failure_rate():
    dear = advise_interval(60.0, 600.0, LLAMA3_MTBF_S, current_interval_s=3600.0)
    assert 18 * 60 <= dear.interval_s <= 19 * 60 and dear.expected_ettr == pytest.approx(0.85, abs=0.01)
    assert dear.current_ettr is not None and dear.current_ettr < dear.expected_ettr  # hourly saves cost ~6 points
    cheap = advise_interval(5.0, 120.0, LLAMA3_MTBF_S)
    assert 5 * 60 <= cheap.interval_s <= 6 * 60 and cheap.expected_ettr == pytest.approx(0.96, abs=0.01)
    assert cheap.to_dict()["method"] == "daly" and cheap.to_dict()["mtbf_from"] == "observed"


def test_a_job_that_never_fails_loses_only_its_saves():
    assert expected_ettr(3600.0, 36.0, 600.0, 1e12) == pytest.approx(1 - 0.01, abs=1e-4)


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf])
def test_a_cost_that_is_no_positive_number_of_seconds_is_refused(bad):
    with pytest.raises(ValueError, match="must be a positive number of seconds"):
        daly_interval(bad, 3600.0)
    with pytest.raises(ValueError, match="mtbf_s must be a positive number"):
        young_interval(60.0, bad)


def test_the_advice_says_so_when_the_job_saves_far_more_or_less_often_than_daly_s_interval():
    best = advise_interval(60.0, 600.0, LLAMA3_MTBF_S).interval_s  # ~1,116 s
    hourly = advise_interval(60.0, 600.0, LLAMA3_MTBF_S, current_interval_s=3600.0)
    assert hourly.note is not None and "3.2x less often than Daly's" in hourly.note
    assert "ETTR 0.787 now, 0.853 at 18.6 min" in hourly.note and hourly.to_dict()["note"] == hourly.note
    often = advise_interval(60.0, 600.0, LLAMA3_MTBF_S, current_interval_s=300.0)
    assert often.note is not None and "3.7x more often" in often.note
    for near in (best * 0.6, best, best * 1.9):  # within a factor of two: the curve is flat, nothing said
        assert advise_interval(60.0, 600.0, LLAMA3_MTBF_S, current_interval_s=near).note is None
