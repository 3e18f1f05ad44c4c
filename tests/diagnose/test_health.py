"""The health score: the documented formula, its smoothing, and the status."""

from __future__ import annotations

import pytest

from trainpulse_otel.diagnose import SIGNALS, VOCABULARY
from trainpulse_otel.diagnose.health import HealthScorer, status_for
from trainpulse_otel.diagnose.health import target_score as score_of
from trainpulse_otel.diagnose.types import Signal

IMPACT = VOCABULARY.impacts


def target_score(signals) -> float:
    return score_of(signals, IMPACT)


def sig(name: str, severity: str = "warning", **subject) -> Signal:
    return Signal(name, severity, 0.0, "", subject)


def test_every_signal_has_an_impact():
    assert set(IMPACT) == set(SIGNALS)


def test_the_formula():
    assert target_score([]) == 100.0
    assert target_score([sig("rank_straggler")]) == pytest.approx(90.0)
    assert target_score([sig("rank_straggler", "critical")]) == pytest.approx(75.0)
    assert target_score([sig("rank_straggler"), sig("sync_imbalance")]) == pytest.approx(100 * 0.9 * 0.92)
    # the same signal on 8 GPUs: the worst, 1.5x at most for the spread
    eight = [sig("memory_pressure", gpu_index=i) for i in range(8)]
    assert target_score(eight) == pytest.approx(100 * (1 - 0.10 * 1.5))
    assert 0.0 <= target_score([sig(n, "critical") for n in SIGNALS]) < 5.0


def test_status():
    assert status_for(100.0, []) == "healthy"
    assert status_for(95.0, [sig("low_mfu")]) == "degraded"
    assert status_for(95.0, [sig("low_mfu", "critical")]) == "critical"
    assert status_for(45.0, []) == "critical" and status_for(70.0, []) == "degraded"


def test_the_score_falls_within_seconds_and_recovers_slowly():
    h = HealthScorer(IMPACT)
    h.update(0.0, ())
    bad = (sig("throughput_collapse", "critical"),)  # target 62.5
    after = [h.update(float(t), bad).score for t in range(1, 31)]
    assert after[4] < 77.0 and after[-1] == pytest.approx(62.5, abs=0.1)  # 63 % of the way in 5 s
    back = [h.update(30.0 + t, ()).score for t in range(1, 61)]
    assert back[4] < 75.0  # 5 s after recovery the score is still low: it recovers over ~30 s
    assert back[-1] > 94.0  # two 30 s time constants: 86 % recovered
    assert h.update(91.0, ()).status == "healthy"
