"""The pipeline end to end on simulated faults: expected top cause per scenario, and the OTel outputs."""

from __future__ import annotations

import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from tests import parts
from trainpulse_otel.collect.sim.scenarios import SCENARIOS
from trainpulse_otel.evaluation.report import _subject_matches, run_scenario
from trainpulse_otel.evaluation.sim_replay import sim_records
from trainpulse_otel.publish.otel import EVENT_RAISED, EVENT_ROOT_CAUSE, DiagnosisPublisher
from trainpulse_otel.runtime.replay import TraceFeed, group_ticks

#: Long enough for each fault to show and its cause to settle (the full runs are ``trainpulse eval``).
SHORT = {
    "thermal_instability": 240,
    "thermal_throttle_risk": 200,
    "memory_pressure": 170,
    "oom_risk": 130,
    "gpu_memory_leak": 130,
    "checkpoint_stall": 100,
    "gpu_underutilization": 140,
    "gpu_memory_degradation": 170,
    "training_stalled": 150,  # a stall exists only after 30 s without a step
    "training_stalled_no_heartbeat": 150,
    "collective_timeout": 160,  # the watchdog gives up after 60 s
    "out_of_memory": 340,  # the GPU's memory runs out at 330 s
}
FAULTS = [n for n in SCENARIOS if n != "healthy"]


@pytest.mark.parametrize("name", FAULTS)
def test_every_scenario_replays_to_its_signals_and_top_cause(name):
    scenario = SCENARIOS[name]
    result = run_scenario(name, duration_s=SHORT.get(name, 120 if scenario.onset_s else 40))
    assert result.detected, result.latency_s
    assert result.top_cause == scenario.expected_cause, result
    assert _subject_matches(scenario.expected_subject, result.top_subject), result.top_subject
    assert result.early == []


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_healthy_stretch_with_its_checkpoint_stays_silent(seed):
    # the routine save at 20 min, and the minute after it: the GPUs' rebound from the save is no heat trend (with
    # seeds 1 and 2 one or two GPUs were forecast to throttle 75-90 s after it while the rebound's last degree
    # counted)
    result = run_scenario("healthy", seed=seed, duration_s=1320)
    assert result.extra == [] and result.top_cause is None


def _drive(name: str, seconds: int, publisher: DiagnosisPublisher) -> None:
    stepper = parts.stepper()
    feed = TraceFeed(stepper.latest)
    for group in group_ticks(sim_records(SCENARIOS[name], 0, seconds)):
        publisher.publish(stepper.step(feed.apply(group)))


def test_a_scenario_signal_becomes_otel_events_and_gauges():
    exporter = InMemoryLogRecordExporter()
    logs = LoggerProvider()
    logs.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    reader = InMemoryMetricReader()
    meter = MeterProvider(metric_readers=[reader]).get_meter("trainpulse_otel")
    publisher = DiagnosisPublisher(meter, logs.get_logger("trainpulse_otel"))
    _drive("rank_straggler", 130, publisher)

    records = [r.log_record for r in exporter.get_finished_logs()]
    raised = [r for r in records if r.attributes.get("event.name") == EVENT_RAISED]
    straggler = [r for r in raised if r.attributes["signal"] == "rank_straggler"]
    assert (
        straggler and straggler[0].attributes["subject.rank"] == 5 and straggler[0].attributes["subject.gpu_index"] == 5
    )
    assert "slower than the median rank" in straggler[0].body
    causes = [r for r in records if r.attributes.get("event.name") == EVENT_ROOT_CAUSE]
    assert causes and causes[-1].attributes["cause"] == "straggler_rank"
    assert causes[-1].attributes["remediation"]

    points = {}
    for rm in reader.get_metrics_data().resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                points[metric.name] = metric.data.data_points
    active = {(p.attributes["signal"], p.attributes["severity"]): p.value for p in points["trainpulse.signal.active"]}
    assert active[("rank_straggler", "critical")] == 1 and active[("rank_straggler", "warning")] == 0
    assert active[("low_mfu", "warning")] == 0
    health = points["trainpulse.health.score"][0]
    assert health.value < 80 and health.attributes["status"] == "critical"
