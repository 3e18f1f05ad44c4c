"""``trainpulse eval`` on the command line: the table, JSON, figures and exit code."""

from __future__ import annotations

import json

import pytest

from trainpulse_otel.cli import main
from trainpulse_otel.collect.sim.scenarios import SCENARIOS
from trainpulse_otel.diagnose.types import Transition
from trainpulse_otel.evaluation.pairs import PairResult, fault_pairs, parse_pairs, run_pair
from trainpulse_otel.evaluation.report import EvalReport, ScenarioResult, format_report
from trainpulse_otel.evaluation.sim_replay import latency as _latency


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
    assert "pairs" not in report and "pairs" not in report["summary"]  # opt-in
    assert set(report["summary"]["figures"]) == {
        "every_signal_detected",
        "median_latency",
        "max_latency",
        "top_cause",
        "healthy_silent",
        "oom_lead",
        "goodput_adds_up",
    }
    assert run["goodput_gap"] <= 0.01 and report["summary"]["goodput_adds_up"] == 1


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


# ------------------------------------------------------------------ pairs


def test_a_pair_is_scored_part_by_part_from_each_parts_own_onset():
    result = run_pair(("low_mfu", "rank_straggler"), duration_s=150.0)
    assert result.pair == "low_mfu+rank_straggler" and result.onsets_s == {"low_mfu": 0.0, "rank_straggler": 90.0}
    assert set(result.latency_s) == {"low_mfu", "rank_straggler"}
    assert result.latency_s["rank_straggler"]["rank_straggler"] <= 30  # from 90 s, not from 0
    assert result.detected and result.expected_causes == ["compute_inefficiency", "straggler_rank"]
    assert len(result.top_causes) <= 2 and result.causes_ok == (not result.missing_causes)


def _pair(detected: bool, missing: list[str]) -> PairResult:
    latency = {"a": {"x": 5.0}, "b": {"y": 7.0 if detected else None}}
    top = ["ca"] + ([] if missing else ["cb"])
    onsets = {"a": 0.0, "b": 90.0}
    return PairResult("a+b", 0, "default", onsets, latency, ["ca", "cb"], top, missing, [], [], detected, not missing)


def test_a_masked_pair_fails_its_figures_and_says_what_was_missed():
    ok = ScenarioResult("low_mfu", 0, "default", 0.0, [], {}, [], [], "c", "c", {}, True, True)
    report = EvalReport([ok], [], [_pair(True, []), _pair(False, ["cb"])])
    summary = report.summary()
    assert summary["pairs"]["detected"] == 1 and summary["pairs"]["causes_in_top_two"] == 1
    assert not summary["figures"]["pairs_detected"] and not summary["figures"]["pairs_causes_in_top_two"]
    assert not report.passed
    text = format_report(report)
    assert "y (b), cause cb" in text
    assert text.splitlines()[-1] == (
        "pairs: 1/2 detected (every signal of both faults); both causes in the top two 1/2; "
        "0 fault(s) excused, absent from the samples; 0 part(s) scored by the signals still due (a forecast as "
        "the fact or the forecast, a narrow link without its straggler); goodput adds up 2/2"
    )
    assert "missed: pairs_detected, pairs_causes_in_top_two" in text


def test_badput_that_does_not_add_up_is_a_missed_figure_and_says_by_how_much():
    off = ScenarioResult("low_mfu", 0, "default", 0.0, [], {}, [], [], "c", "c", {}, True, True, goodput_gap=0.05)
    pair = _pair(True, [])
    pair.goodput_gap = 0.02
    report = EvalReport([off], [], [pair])
    summary = report.summary()
    assert summary["goodput_adds_up"] == 0 and not summary["figures"]["goodput_adds_up"]
    assert summary["pairs"]["goodput_adds_up"] == 0 and not summary["figures"]["pairs_goodput_adds_up"]
    text = format_report(report)
    assert "[goodput off by 5.0% of wall time]" in text and "goodput off by 2.0% of wall time" in text
    assert "missed: goodput_adds_up, pairs_goodput_adds_up" in text


def test_eval_pairs_on_the_command_line(capsys):
    argv = ["eval", "-json", "-scenario", "sequence_padding", "-healthy", "0", "-pairs", "sequence_padding+low_mfu"]
    main(argv)
    report = json.loads(capsys.readouterr().out)
    (pair,) = report["pairs"]
    assert pair["pair"] == "sequence_padding+low_mfu" and pair["expected_causes"] == [
        "padding_waste",
        "compute_inefficiency",
    ]
    assert report["summary"]["pairs"]["runs"] == 1 and "pairs_detected" in report["summary"]["figures"]


def test_every_pair_and_pairs_of_the_chosen_scenarios():
    faults = [n for n in SCENARIOS if n != "healthy"]
    # every pair but two: the two hang scenarios (with and without heartbeats), and the two GPU leaks (to the
    # forecast, to the kill), move the same knob
    assert len(fault_pairs()) == len(faults) * (len(faults) - 1) // 2 - 2
    assert ("training_stalled", "training_stalled_no_heartbeat") not in fault_pairs()
    assert ("gpu_memory_leak", "out_of_memory") not in fault_pairs()
    assert fault_pairs(["rank_straggler", "low_mfu", "oom_risk"]) == [
        ("low_mfu", "rank_straggler"),
        ("low_mfu", "oom_risk"),
        ("rank_straggler", "oom_risk"),
    ]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("low_mfu+nope", "unknown scenario 'nope'"),
        ("low_mfu", "two scenarios"),
        ("low_mfu+oom_risk+pipeline_bubble", "two scenarios"),
    ],
)
def test_bad_pairs_are_usage_errors(capsys, spec, message):
    assert parse_pairs("low_mfu+rank_straggler,oom_risk+pipeline_bubble") == [
        ("low_mfu", "rank_straggler"),
        ("oom_risk", "pipeline_bubble"),
    ]
    assert main(["eval", "-scenario", "low_mfu", "-healthy", "0", "-pairs", spec]) == 2
    assert message in capsys.readouterr().err
