"""Marian NMT's display lines: the update, the cost, words/s, the learning rate, and a step's time from the time
between two lines. The lines are the corpus's (its ``train`` split: tests/fixtures/logs/corpus/README.md)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from trainpulse_otel.config import Settings
from trainpulse_otel.logs.marian import MarianLines
from trainpulse_otel.runtime import replay_logs

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "corpus" / "train"
V110 = CORPUS / "marian_healthy_marian-v1.10-s2s-cost-times-words-after.log"


def test_a_display_line_is_a_report_and_the_next_one_times_the_updates_between():
    marian = MarianLines()
    first, second = (
        (
            "[2021-06-01 07:24:53] Ep. 3 : Up. 15500 : Sen. 165,243 : Cost 4.19193411 * 304,329 @ 617 after 10,741,148 : "
            "Time 178.32s : 1706.66 words/s : L.r. 3.0000e-04"
        ),
        (
            "[2021-06-01 07:27:48] Ep. 3 : Up. 16000 : Sen. 184,997 : Cost 4.39025354 * 306,189 @ 634 after 11,047,337 : "
            "Time 175.31s : 1746.56 words/s : L.r. 3.0000e-04"
        ),
    )
    (one,) = marian.feed(first, 1.0)
    assert one == {
        "global_step": 15500,
        "timestamp": 1.0,
        "loss": 4.19193411,
        "learning_rate": 3e-4,
        "tokens_per_sec": 1706.66,
    }  # no step time yet: the time is since a display line not seen
    (two,) = marian.feed(second, 2.0)
    assert two["global_step"] == 16000 and two["step_time_ms"] == pytest.approx(175.31 * 1000 / 500)


def test_older_and_newer_lines_a_nan_cost_and_validation():
    marian = MarianLines()
    (old,) = marian.feed("Ep. 1 : Up. 500 : Sen. 33,600 : Cost 6.32 : Time 95.94s : 11207.26 words/s", 0.0)
    assert old["loss"] == 6.32 and old["tokens_per_sec"] == 11207.26
    (new,) = marian.feed("Ep. 1 : Up. 1000 : Sen. 67,200 : Cost nan : Time 96.0s : 11000.00 words/s : gNorm inf", 1.0)
    assert math.isnan(new["loss"]) and math.isinf(new["grad_norm"])
    valid = "[2021-06-01 07:51:20] [valid] Ep. 4 : Up. 20000 : cross-entropy : 135.333 : new best"
    assert marian.feed(valid, 2.0) == [] and marian.feed("[2021-06-01] Using synchronous SGD", 3.0) is None


def test_a_marian_log_replays_as_marian_s_with_every_display_line_a_report():
    done = replay_logs([str(V110)], Settings())
    displayed = sum(1 for line in V110.read_text().splitlines() if " : Up. " in line and "[valid]" not in line)
    assert done.reader.stats.reports == displayed > 0
    assert done.result.diagnosis.signals == ()
