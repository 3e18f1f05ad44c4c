"""Actions in a live engine: a hanging action never delays a tick, and nothing runs while the diagnosis warms up.

A real simulated engine, ticked in virtual time; the action is a real command (``probe.py``); the counts are read
from the engine's own OTel counter (``trainpulse.actions``), as Prometheus reads it.
"""

from __future__ import annotations

import logging
import time

from tests import parts
from tests.actions.probe import probe, told
from tests.exports.receivers import wait_until
from trainpulse_otel.config import Settings
from trainpulse_otel.config.values import actions
from trainpulse_otel.runtime import warm_up

T0 = 1_764_400_000.0


def engine(tmp_path, scenario: str, onset: float, warmup: float, sleep_s: float = 0.0, timeout: str = "30s"):
    argv, out = probe(tmp_path, sleep_s)
    entry = {"on": {"signal": "*"}, "run": argv, "timeout": timeout, "name": "probe"}
    settings = Settings(
        mode="sim", scenario=scenario, onset=onset, warmup=warmup, addr="127.0.0.1:0", actions=actions([entry])
    )
    now = [T0]
    built = parts.engine(settings, clock=lambda: now[0], actions=True)
    return built, out


def counted(engine) -> dict[tuple[str, str], int]:
    """``trainpulse.actions`` by (action, outcome), from the engine's in-memory OTel reader."""
    out = {}
    for rm in engine.exports.datadog.reader.get_metrics_data().resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                if metric.name == "trainpulse.actions":
                    for p in metric.data.data_points:
                        out[(p.attributes["action"], p.attributes["outcome"])] = p.value
    return out


def test_a_hanging_action_never_delays_a_tick(tmp_path):
    # throughput_collapse begins 20 s after the 20 s warm-up and is raised a few ticks later
    built, out = engine(tmp_path, "throughput_collapse", onset=40.0, warmup=20.0, sleep_s=60.0, timeout="2s")
    try:
        warm_up(built)
        ts, raised = T0, False
        while not raised:  # tick until the fault is raised: the action is queued then
            ts += 1.0
            assert ts < T0 + 120, "the fault was never raised"
            raised = any(t.event == "raised" for t in built.tick(ts).transitions)
        assert wait_until(lambda: told(out))  # the action has started, and now hangs (for 60 s)
        hang_started, took = time.monotonic(), []
        while time.monotonic() - hang_started < 1.0:  # the action hangs meanwhile: ticks go on at their own pace
            ts += 1.0
            started = time.perf_counter()
            built.tick(ts)
            took.append(time.perf_counter() - started)
        assert len(took) >= 5 and max(took) < 1.0, (len(took), max(took))  # a blocked tick would take the 2 s timeout
        deadline = time.monotonic() + 15
        while counted(built).get(("probe", "timeout")) != 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert counted(built) == {("probe", "timeout"): 1}
        assert told(out)[0]["stdin"]["signal"] == "throughput_collapse"
    finally:
        built.close()


def test_nothing_runs_for_what_was_raised_during_the_warm_up(tmp_path, caplog):
    # rank 5 straggles from 5 s into a 60 s warm-up: raised (and escalated) before the daemon's first answer
    built, out = engine(tmp_path, "rank_straggler", onset=5.0, warmup=60.0)
    try:
        with caplog.at_level(logging.INFO, logger="trainpulse_otel.actions"):
            warm_up(built)
            for i in range(1, 11):
                built.tick(T0 + i)
        assert "rank_straggler" in {s.name for s in built.pipeline.diagnosis.signals}  # still active
        built.actions.close()
        assert told(out) == [] and counted(built) == {}
        assert any("outcome=warmup" in r.getMessage() and "warming up" in r.getMessage() for r in caplog.records)
        assert built.warming is False
    finally:
        built.close()
