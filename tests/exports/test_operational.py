"""The daemon's own counters and histograms: counted where they happen, never read back into the diagnosis."""

from __future__ import annotations

from opentelemetry.sdk.metrics.export import Histogram, Sum

from tests.exports.scenario import exercise_every_instrument
from trainpulse_otel.collect.base import Collected
from trainpulse_otel.runtime.assemble import SDK_FRAME_MAX_RANKS
from trainpulse_otel.samples import NodeReport, parse_training
from trainpulse_otel.telemetry.latest import ALL
from trainpulse_otel.telemetry.read_back import frame_from_samples


class BrokenCollector:
    name = "nvml"

    def collect(self, now: float) -> Collected:
        raise RuntimeError("NVML went away")

    def close(self) -> None:
        pass


def points(engine, name: str) -> list:
    for rm in engine.exports.datadog.reader.get_metrics_data().resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                if metric.name == name:
                    return [(metric.data, p) for p in metric.data.data_points]
    return []


def test_the_frame_holds_only_the_catalogue_whatever_the_daemon_counts(make_engine):
    engine = make_engine("sim")
    engine.latest.node_series = ALL  # the SDK then reports every node's series: the frame it reads is whole
    engine.tick()
    for _ in range(3):
        exercise_every_instrument(engine)
    ts = engine.clock()
    frame = engine.stepper.frames.read(ts)  # a job daemon's view (the exercise adds a node): read back
    current = engine.latest.current()
    latest = engine.latest
    assert frame == frame_from_samples(
        ts, current.gpus, current.host, current.training, latest.xid_counts(), latest.nodes(), ports=current.ports
    )
    assert frame == engine.telemetry.frame_reader.read(ts)  # what the in-process OTel reader collects
    assert frame.nodes and any(g.node for g in frame.gpus)  # another node of the job came through too
    assert points(engine, "trainpulse.ingest.samples")[0][1].value == 3  # while the counters did count


def test_a_job_daemon_exports_only_the_series_it_owns_and_the_nodes_summaries(make_engine):
    engine = make_engine("sim")
    engine.tick()
    for _ in range(3):
        exercise_every_instrument(engine)
    ranks = parse_training({"ranks": [{"rank": 96, "step_time_ms": 980.0, "hostname": "node-012"}]})
    engine.latest.put_node(NodeReport("node-012", training=ranks), engine.clock())
    ts = engine.clock()
    frame, exported = engine.stepper.frames.read(ts), engine.telemetry.frame_reader.read(ts)
    others = {node.hostname for node in frame.nodes}
    assert others and any(g.node in others for g in frame.gpus)  # the diagnosis sees the other node's GPUs
    assert [g for g in exported.gpus if g.node is not None] == []  # the export leaves them to their daemon
    assert [n.hostname for n in exported.nodes] == sorted(others)  # each node's summary stays
    assert all(n.host is None for n in exported.nodes)
    remote = [r.rank for r in frame.training.ranks if r.hostname in others]
    assert remote and not [r for r in exported.training.ranks if r.hostname in others]
    assert exported.gpus == tuple(g for g in frame.gpus if g.node is None)


def test_a_daemon_told_of_many_ranks_reads_its_frame_back_and_it_is_what_the_sdk_collects(make_engine):
    engine = make_engine("sim")
    engine.tick()
    many = [{"rank": r, "gpu_index": r % 8, "step_time_ms": 1000.0 + r} for r in range(SDK_FRAME_MAX_RANKS + 1)]
    engine.ingest(parse_training({"step_time_ms": 1100.0, "ranks": many}))
    ts = engine.clock()
    frame = engine.stepper.frames.read(ts)
    assert len(frame.training.ranks) == SDK_FRAME_MAX_RANKS + 1 and not frame.nodes
    assert frame == engine.telemetry.frame_reader.read(ts)  # the read-back is the SDK's frame, cheaper


def test_ticks_and_failing_collectors_are_counted(make_engine):
    engine = make_engine()
    engine.collectors = (BrokenCollector(),)
    engine.tick()
    engine.tick()
    [(data, failures)] = points(engine, "trainpulse.collector.errors")
    assert isinstance(data, Sum) and data.is_monotonic
    assert (failures.value, dict(failures.attributes)) == (2, {"collector": "nvml"})
    [(data, ticks)] = points(engine, "trainpulse.tick.duration")
    assert isinstance(data, Histogram) and ticks.count == 2 and 0 < ticks.sum < 5


def test_ingest_sources_are_told_apart(make_engine):
    engine = make_engine()
    engine.ingest(parse_training({"step_time_ms": 100.0}))
    engine.ingest(parse_training({"step_time_ms": 100.0, "framework": "pytorch"}), source="sdk")
    engine.ops.flush()  # noted on the request path, recorded at the next tick or metrics read
    counted = {tuple(sorted(p.attributes.items())): p.value for _, p in points(engine, "trainpulse.ingest.samples")}
    assert counted == {(("source", "rest"),): 1, (("framework", "pytorch"), ("source", "sdk")): 1}


def test_a_report_of_heartbeats_alone_is_a_heartbeat_not_a_training_sample(make_engine):
    engine = make_engine()
    for rank in range(4):  # what each rank's monitor posts every 2 s: its heartbeat, and nothing measured
        engine.ingest(parse_training({"ranks": [{"rank": rank, "global_step": 9, "phase": "data", "pid": 40 + rank}]}))
    engine.ingest(parse_training({"ranks": [{"rank": 0, "step_time_ms": 99.0, "global_step": 9}]}))  # a measurement
    engine.ops.flush()
    beats = {tuple(sorted(p.attributes.items())): p.value for _, p in points(engine, "trainpulse.ingest.heartbeats")}
    samples = {tuple(sorted(p.attributes.items())): p.value for _, p in points(engine, "trainpulse.ingest.samples")}
    assert beats == {(("source", "rest"),): 4} and samples == {(("source", "rest"),): 1}
