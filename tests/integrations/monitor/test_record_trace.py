"""``TrainingMonitor(record=FILE)``: the in-process pipeline writes the trace ``trainpulse daemon -record`` would,
and ``trainpulse replay`` reads it back to the diagnosis the monitor made live."""

from __future__ import annotations

import json
import math
import time

import pytest

from trainpulse_otel import TrainingMonitor
from trainpulse_otel.cli import main

TICK_S = 0.05  # the test's own ticks (flush), spaced so that replay -interval 10ms rebuilds each one


def test_an_in_process_monitor_records_a_trace_that_replay_diagnoses_as_it_did(tmp_path, capsys):
    trace = tmp_path / "trace.jsonl"
    monitor = TrainingMonitor(model_name="unit", interval=3600, hardware="none", record=trace)
    engine = monitor._destination.engine  # the test ticks it itself, to see each tick's transitions
    live_timeline = []
    try:
        for i in range(12):
            with monitor.step(tokens=1000, samples=4, loss=2.0 - 0.01 * i if i < 8 else float("nan")):
                time.sleep(0.005)
            live_timeline += [t.to_dict() for t in engine.tick().transitions]  # what flush() does
            time.sleep(TICK_S)
    finally:
        monitor.close()  # its last tick is recorded too
    live = monitor.diagnosis()
    lines = [json.loads(line) for line in trace.read_text().splitlines()]
    reports = [x["training"] for x in lines if "global_step" in x.get("training", {})]  # besides heartbeats alone
    assert sorted({t["global_step"] for t in reports}) == list(range(1, 13))  # every tick's report
    assert reports[0]["model_name"] == "unit" and reports[0]["step_time_ms"] > 0
    assert all(t["ranks"][0]["pid"] > 0 for t in reports)  # rank 0's heartbeat rides along, as the daemon records it
    training = [x["training"] for x in lines if "training" in x]
    assert math.isnan(training[-1]["loss"]) and '"loss":NaN' in trace.read_text()

    assert main(["replay", str(trace), "-json", "-interval", "10ms"]) == 0
    replayed = json.loads(capsys.readouterr().out)
    # raised as a warning at the first NaN report, critical at the second: live and on replay alike
    assert [(t["signal"], t["severity"]) for t in live_timeline] == [
        ("nonfinite_loss", "warning"),
        ("nonfinite_loss", "critical"),
    ]
    assert replayed["timeline"] == live_timeline
    signals = [(s["name"], s["severity"], s["subject"], s["since"]) for s in live["signals"]]
    assert [(s["name"], s["severity"], s["subject"], s["since"]) for s in replayed["diagnosis"]["signals"]] == signals
    assert (
        replayed["diagnosis"]["root_causes"][0]["cause"] == live["root_causes"][0]["cause"] == "numerical_instability"
    )


def test_record_with_an_endpoint_is_an_error_naming_the_daemon_s_flag(tmp_path):
    with pytest.raises(ValueError, match="daemon -record"):
        TrainingMonitor(endpoint="http://127.0.0.1:9", record=tmp_path / "trace.jsonl")
    assert not (tmp_path / "trace.jsonl").exists()
