"""Judge locally, correlate globally: a node daemon's verdict travels in its own OTLP export, and the job daemon
takes it instead of judging the node's GPUs again."""

from __future__ import annotations

from opentelemetry.exporter.otlp.proto.common.metrics_encoder import encode_metrics
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.resources import Resource

from trainpulse_otel.collect.sim import SimulatedNode
from trainpulse_otel.diagnose import Diagnosis, Signal
from trainpulse_otel.diagnose.pipeline import PipelineResult
from trainpulse_otel.publish.otel import DiagnosisPublisher
from trainpulse_otel.receive import OtlpReceiver
from trainpulse_otel.runtime import build_pipeline, discover
from trainpulse_otel.samples import NodeReport, NodeSignal, parse_training
from trainpulse_otel.telemetry.instruments import METER_NAME, register_measurements
from trainpulse_otel.telemetry.latest import LatestSamples
from trainpulse_otel.telemetry.read_back import frame_from_samples

NODE = "node-037"
T0 = 1764400000.0


class NoLogger:
    def emit(self, *_args, **_kwargs) -> None:
        pass


def node_export(signals: tuple[Signal, ...] | None) -> bytes:
    """What a node daemon's OTLP exporter sends: its samples, and its diagnosis when it judges (``signals``)."""
    latest, reader = LatestSamples(), InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader], resource=Resource.create({"host.name": NODE}))
    meter = provider.get_meter(METER_NAME)
    register_measurements(meter, latest)
    if signals is not None:
        publisher = DiagnosisPublisher(meter, NoLogger())
        publisher.publish(PipelineResult(Diagnosis(T0, signals=signals), (), False))
    latest.put(SimulatedNode("healthy", seed=3, hostname=NODE, start_ts=T0).sample(0.0), T0)
    return encode_metrics(reader.get_metrics_data()).SerializeToString()


def decoded(body: bytes) -> NodeReport:
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest

    (report,) = OtlpReceiver().decode(ExportMetricsServiceRequest.FromString(body)).reports
    return report


HOT = Signal("thermal_instability", "critical", T0, "GPU 5 overheats", {"gpu_index": 5, "rank": 301})


def test_a_judging_nodes_export_carries_its_active_signals_with_its_host():
    report = decoded(node_export((HOT,)))
    assert report.hostname == NODE and len(report.gpus) == 8  # its measurements as before
    assert report.signals == (
        NodeSignal("thermal_instability", "critical", {"hostname": NODE, "gpu_index": 5, "rank": 301}),
    )


def test_a_judging_node_with_nothing_active_still_says_it_judges_and_an_otel_only_node_does_not():
    assert decoded(node_export(())).signals == ()  # its health came: it judges, nothing is wrong
    assert decoded(node_export(None)).signals is None  # measurements only: the job daemon judges them


def test_the_job_daemon_leaves_a_judging_nodes_gpus_out_of_its_frame_and_takes_its_gpu_signals():
    latest = LatestSamples()
    report = NodeReport(NODE, gpus=decoded(node_export(None)).gpus, signals=decoded(node_export((HOT,))).signals)
    latest.put_node(report, T0)
    (node,) = latest.nodes()
    assert node.judged and [g.index for g in node.gpus] == list(range(8))  # held to be shown
    assert latest.current().gpus == ()  # not judged twice
    pipeline = build_pipeline(discover(autoload=False))
    signals = {}
    for t in range(3):
        latest.put_node(NodeReport(NODE, signals=report.signals), T0 + t)
        frame = frame_from_samples(T0 + t, (), None, latest.current().training, (), latest.nodes())
        signals = {s.name: s for s in pipeline.update(frame).diagnosis.signals}
    relayed = signals["thermal_instability"]
    assert relayed.severity == "critical" and relayed.subject == {"hostname": NODE, "gpu_index": 5, "rank": 301}
    assert NODE in relayed.message and relayed.evidence["judged_by"] == NODE
    latest.put_node(NodeReport(NODE, signals=()), T0 + 3)  # the node cleared it
    for t in (3, 4, 5):
        frame = frame_from_samples(T0 + t, (), None, None, (), latest.nodes())
        signals = {s.name: s for s in pipeline.update(frame).diagnosis.signals}
    assert "thermal_instability" not in signals


def test_only_a_nodes_gpu_and_host_signals_are_taken_the_job_judges_its_ranks_itself():
    latest = LatestSamples()
    told = (
        NodeSignal("rank_straggler", "warning", {"hostname": NODE, "rank": 300}),
        NodeSignal("memory_pressure", "warning", {"hostname": NODE}),
        NodeSignal("a_plugins_signal", "warning", {"hostname": NODE}),
    )
    training = parse_training({"ranks": [{"rank": 300, "step_time_ms": 1000.0}]})
    latest.put_node(NodeReport(NODE, training=training, signals=told), T0)
    pipeline = build_pipeline(discover(autoload=False))
    frame = frame_from_samples(T0, (), None, latest.current().training, (), latest.nodes())
    names = {s.name for s in pipeline.update(frame).diagnosis.signals}
    assert names == {"memory_pressure"}
