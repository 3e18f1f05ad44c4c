"""OTLP push to real receivers (gRPC and HTTP/protobuf): metrics, resource, events and temporality."""

from __future__ import annotations

import socket

import pytest
from opentelemetry.proto.metrics.v1.metrics_pb2 import AggregationTemporality

from tests.exports.receivers import attributes
from tests.exports.scenario import straggler_cleared, straggler_raised
from trainpulse_otel import __version__
from trainpulse_otel.config import Settings
from trainpulse_otel.diagnose import SIGNALS
from trainpulse_otel.publish.otel import EVENT_CLEARED, EVENT_RAISED, EVENT_ROOT_CAUSE
from trainpulse_otel.runtime.assemble import resource_attributes
from trainpulse_otel.samples import parse_training
from trainpulse_otel.telemetry.providers import build_resource

pytestmark = pytest.mark.e2e

DELTA = AggregationTemporality.AGGREGATION_TEMPORALITY_DELTA
CUMULATIVE = AggregationTemporality.AGGREGATION_TEMPORALITY_CUMULATIVE
QUIET = 3600  # export_interval: the test flushes explicitly, the periodic thread stays out of the way


def number(point) -> float:  # point: a protobuf NumberDataPoint
    return getattr(point, point.WhichOneof("value"))


def test_push_carries_health_signals_gpus_resource_and_events(otlp_receiver, make_engine):
    receiver = otlp_receiver
    engine = make_engine(
        "sim", otlp={"endpoint": receiver.endpoint, "protocol": receiver.protocol, "export_interval": QUIET}
    )
    for _ in range(3):
        engine.tick()
    engine.publisher.publish(straggler_raised(engine.clock()))
    assert engine.flush()
    got = receiver.received
    assert got.wait_for(lambda r: r.metrics and r.events(EVENT_RAISED) and r.events(EVENT_ROOT_CAUSE))

    assert number(got.metric_points("trainpulse.health.score")[-1][1]) == 62.0
    active = {
        (a["signal"], a["severity"]): number(p)
        for _, p in got.metric_points("trainpulse.signal.active")
        for a in [attributes(p.attributes)]
    }
    assert active[("rank_straggler", "warning")] == 1 and active[("rank_straggler", "critical")] == 0
    assert sum(active.values()) == 1 and len(active) == len(SIGNALS) * 2  # every contract signal, both severities
    gpus = {attributes(p.attributes)["gpu.index"] for _, p in got.metric_points("trainpulse.gpu.utilization")}
    assert gpus == set(range(8))

    resource = got.resource_attributes()
    assert resource["service.name"] == "trainpulse" and resource["service.version"] == __version__
    assert resource["host.name"] == socket.gethostname()

    raised = got.events(EVENT_RAISED)[-1]
    event_attrs = attributes(raised.attributes)
    assert event_attrs["signal"] == "rank_straggler" and event_attrs["severity"] == "warning"
    assert event_attrs["subject.rank"] == 5 and raised.body.string_value.startswith("rank 5 is 38% slower")
    cause = attributes(got.events(EVENT_ROOT_CAUSE)[-1].attributes)
    assert cause["cause"] == "straggler_rank" and cause["signals"] == ["rank_straggler"]
    assert all(res["service.name"] == "trainpulse" for res, _ in got.log_records())

    engine.publisher.publish(straggler_cleared(engine.clock() + 60))
    assert engine.flush()
    assert got.wait_for(lambda r: r.events(EVENT_CLEARED) and len(r.events(EVENT_ROOT_CAUSE)) == 2)
    cleared = got.events(EVENT_CLEARED)[-1]
    assert attributes(cleared.attributes)["signal"] == "rank_straggler" and cleared.severity_text == "INFO"
    assert attributes(got.events(EVENT_ROOT_CAUSE)[-1].attributes)["cause"] == "none"
    assert number(got.metric_points("trainpulse.health.score")[-1][1]) == 100.0


def _export_twice(engine) -> None:
    """Two ingests, an export, one more ingest, another export."""
    for step_time_ms in (800.0, 1200.0):
        engine.ingest(parse_training({"step_time_ms": step_time_ms, "framework": "pytorch", "model_name": "m"}))
    assert engine.flush()
    engine.ingest(parse_training({"step_time_ms": 30_000.0, "framework": "pytorch", "model_name": "m"}), source="sdk")
    assert engine.flush()


@pytest.mark.parametrize(
    ("profile", "temporality", "rest_counts", "step_counts"),
    [
        ("datadog", DELTA, [2], [2, 1]),  # a delta series without new measurements is not sent
        ("default", CUMULATIVE, [2, 2], [2, 3]),
    ],
)
def test_profile_sets_temporality_of_counters_and_histograms(
    profile, temporality, rest_counts, step_counts, otlp_receiver, make_engine
):
    receiver = otlp_receiver
    engine = make_engine(
        otlp={
            "endpoint": receiver.endpoint,
            "protocol": receiver.protocol,
            "profile": profile,
            "export_interval": QUIET,
        }
    )
    _export_twice(engine)
    got = receiver.received
    assert got.wait_for(lambda r: len(r.metrics) >= 2)

    samples = got.metric_points("trainpulse.ingest.samples")
    assert {m.sum.aggregation_temporality for m, _ in samples} == {temporality}
    assert all(m.sum.is_monotonic for m, _ in samples)
    rest = [p.as_int for _, p in samples if attributes(p.attributes)["source"] == "rest"]
    assert rest == rest_counts
    assert [p.as_int for _, p in samples if attributes(p.attributes)["source"] == "sdk"] == [1]
    steps = got.metric_points("trainpulse.training.step_duration")
    assert {m.histogram.aggregation_temporality for m, _ in steps} == {temporality}
    assert [p.count for _, p in steps] == step_counts
    assert list(steps[0][1].explicit_bounds)[:3] == [0.01, 0.025, 0.05]
    assert number(got.metric_points("trainpulse.health.score")[-1][1]) == 100.0  # gauges stay gauges


def test_standard_variables_configure_the_push(monkeypatch, http_receiver, make_engine):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", http_receiver.endpoint)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", "delta")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-team=ml-infra")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment.name=staging")
    monkeypatch.setenv("OTEL_METRIC_EXPORT_INTERVAL", str(QUIET * 1000))
    engine = make_engine()
    _export_twice(engine)
    got = http_receiver.received
    assert got.wait_for(lambda r: len(r.metrics) >= 2)
    samples = got.metric_points("trainpulse.ingest.samples")
    assert {m.sum.aggregation_temporality for m, _ in samples} == {DELTA}
    assert got.resource_attributes()["deployment.environment.name"] == "staging"
    assert all(h["x-team"] == "ml-infra" and h["content-encoding"] == "gzip" for h in http_receiver.headers_seen)


def test_config_block_overrides_the_environment(monkeypatch, http_receiver, grpc_receiver, make_engine):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", grpc_receiver.endpoint)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    engine = make_engine(
        otlp={
            "endpoint": http_receiver.endpoint,
            "protocol": "http/protobuf",
            "headers": {"dd-api-key": "secret"},
            "export_interval": QUIET,
            "logs": False,
        }
    )
    engine.publisher.publish(straggler_raised(engine.clock()))
    assert engine.flush()
    assert http_receiver.received.wait_for(lambda r: r.metrics)
    assert http_receiver.headers_seen[-1]["dd-api-key"] == "secret"
    assert not grpc_receiver.received.metrics
    assert not http_receiver.received.logs  # "logs": false leaves the events at home


def test_a_simulated_node_of_a_job_pushes_as_its_simulated_host(otlp_receiver, make_engine):
    """``-sim-nodes 4 -sim-node-rank 2`` is ``node-002`` to a job daemon."""
    otlp = {"endpoint": otlp_receiver.endpoint, "protocol": otlp_receiver.protocol, "export_interval": QUIET}
    engine = make_engine("sim", sim_nodes=4, sim_node_rank=2, otlp=otlp)
    engine.tick()
    assert engine.flush()
    assert otlp_receiver.received.wait_for(lambda r: r.metrics)
    assert otlp_receiver.received.resource_attributes()["host.name"] == "node-002"


def test_the_simulated_host_name_yields_to_otel_resource_attributes(monkeypatch):
    node = Settings(mode="sim", sim_nodes=4, sim_node_rank=2)
    assert build_resource(resource_attributes(node, "sim")).attributes["host.name"] == "node-002"
    assert (
        build_resource(resource_attributes(Settings(mode="sim"), "sim")).attributes["host.name"] == socket.gethostname()
    )
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "host.name=rack7-gpu3")
    assert build_resource(resource_attributes(node, "sim")).attributes["host.name"] == "rack7-gpu3"
