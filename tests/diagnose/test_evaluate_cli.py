"""``trainpulse eval`` on the command line: the table, JSON, figures and exit code."""

from __future__ import annotations

import json

from trainpulse_otel.cli import main
from trainpulse_otel.diagnose.types import Transition
from trainpulse_otel.runtime.evaluate import EvalReport, ScenarioResult, _latency


def test_eval_prints_a_row_per_scenario_and_a_summary(capsys):
    code = main(["eval", "-scenario", "low_mfu", "-scenario", "throughput_collapse", "-healthy", "2m"])
    out = capsys.readouterr().out
    assert code == 0
    assert "low_mfu" in out and "throughput_collapse" in out and "gpu_power_throttling" in out
    assert "healthy 120 s (default, seed 0): 0 signal(s) raised" in out
    assert out.strip().splitlines()[-1].startswith("summary: 2/2 detected")


def test_eval_json(capsys):
    assert main(["eval", "-json", "-scenario", "sequence_padding", "-healthy", "0"]) == 0
    report = json.loads(capsys.readouterr().out)
    run = report["scenarios"][0]
    assert run["scenario"] == "sequence_padding" and run["top_cause"] == "padding_waste" and run["cause_ok"]
    assert run["latency_s"]["sequence_padding"] <= 10
    assert report["summary"]["figures"]["top_cause"] is True


def test_eval_rejects_unknown_names(capsys):
    assert main(["eval", "-scenario", "nope"]) == 2
    assert "unknown variant or scenario: nope" in capsys.readouterr().err


def test_a_missed_figure_fails_the_run():
    missed = ScenarioResult(
        "low_mfu",
        0,
        "default",
        0.0,
        ["low_mfu"],
        {"low_mfu": None},
        [],
        [],
        "compute_inefficiency",
        None,
        {},
        False,
        True,
    )
    report = EvalReport([missed], [])
    figures = report.summary()["figures"]
    assert not figures["every_signal_detected"] and not figures["top_cause"] and not report.passed


def test_latency_counts_from_the_onset_and_an_already_active_signal_at_zero():
    def t(ts: float, event: str) -> tuple[float, Transition]:
        return ts, Transition(ts, event, "s", "warning", {})

    assert _latency([t(95.0, "raised")], "s", 90.0) == 5.0
    assert _latency([t(50.0, "raised"), t(95.0, "raised")], "s", 90.0) == 0.0
    assert _latency([t(50.0, "raised"), t(60.0, "cleared"), t(97.0, "raised")], "s", 90.0) == 7.0
    assert _latency([t(50.0, "raised"), t(60.0, "cleared")], "s", 90.0) is None
