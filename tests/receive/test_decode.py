"""The receive stage: OTLP requests as real senders make them, into node reports and an honest account."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest

from tests.receive.otlp_requests import (
    CUMULATIVE,
    NodeExporter,
    counter,
    gauge,
    histogram,
    megatron_interval,
    request,
)
from trainpulse_otel.collect.base import Collected
from trainpulse_otel.receive import OtlpReceiver, SeriesState, decode_request
from trainpulse_otel.samples import GpuSample, HostSample, RankSample, TrainingSample
from trainpulse_otel.telemetry.read_back import frame_from_samples

GPUS = (
    GpuSample(0, uuid="GPU-0", name="H100", utilization_percent=97.0, memory_used_bytes=70 << 30,
              temperature_celsius=88.0, sm_clock_mhz=1410.0, throttle_reasons=("hw_thermal",), xid_errors=(79,)),
    GpuSample(1, uuid="GPU-1", name="H100", utilization_percent=96.5, ecc_corrected_errors=3),
)  # fmt: skip
HOST = HostSample(cpu_percent=31.5, cpu_count=96, memory_available_bytes=400 << 30)
TRAINING = TrainingSample(
    model_name="llama", framework="pytorch", step_time_ms=512.0, loss=float("nan"), global_step=40,
    ranks=(RankSample(8, gpu_index=0, step_time_ms=505.0, phase="compute", pid=77), RankSample(9, gpu_index=1)),
)  # fmt: skip


def test_a_node_daemons_own_instruments_come_back_as_its_samples():
    node = NodeExporter("node-3")
    decoded = OtlpReceiver().decode(node.export(Collected(gpus=GPUS, host=HOST, training=TRAINING)))
    (report,) = decoded.reports
    expected = frame_from_samples(0.0, GPUS, HOST, TRAINING, node.latest.xid_counts())
    assert report.hostname == "node-3"
    assert report.gpus == tuple(g.on_node("node-3") for g in expected.gpus)  # built on their node, not copied to it
    assert report.host == expected.host
    assert report.xid_counts == tuple(replace(x, node="node-3") for x in expected.xid_counts)
    training = report.training
    assert training is not None and math.isnan(training.loss)  # carried by the nonfinite series
    assert training.ranks == tuple(replace(r, hostname="node-3") for r in expected.training.ranks)  # on their node
    assert (training.step_time_ms, training.model_name, training.global_step) == (512.0, "llama", 40)
    assert decoded.rejected == 0 and decoded.error_message == ""


def test_delta_counters_add_up_to_the_running_totals_the_frame_expects():
    node = NodeExporter("node-1", temporality="delta")
    receiver = OtlpReceiver()
    first = receiver.decode(node.export(Collected(gpus=GPUS)))
    node.latest.put(Collected(gpus=(GpuSample(0, xid_errors=(79, 79, 48)), GPUS[1])), 1001.0)
    second = receiver.decode(node.export())
    assert first.reports[0].xid_counts != second.reports[0].xid_counts
    totals = tuple(replace(x, node="node-1") for x in node.latest.xid_counts())
    assert second.reports[0].xid_counts == totals  # 79 three times, 48 once: the totals


def test_outputs_and_unknown_metrics_are_ignored_and_counted_by_name():
    node = NodeExporter("node-1")
    node.meter.create_gauge("trainpulse.health.score").set(42)
    node.meter.create_counter("trainpulse.ingest.samples").add(3, {"source": "rest"})
    node.provider.get_meter("someone_else").create_gauge("queue.depth").set(7)
    decoded = OtlpReceiver().decode(node.export(Collected(host=HOST)))
    assert decoded.ignored_metrics == {"trainpulse.health.score": 1, "trainpulse.ingest.samples": 1, "queue.depth": 1}
    assert decoded.ignored == 3 and decoded.rejected == 0
    assert decoded.reports[0].host == frame_from_samples(0.0, host=HOST).host


def test_megatron_metrics_become_the_jobs_training_report():
    attrs = {"host.name": "node-0", "dl.batch_size": 512, "dl.sequence_length": 4096, "megatron.precision": "bf16"}
    decoded = OtlpReceiver().decode(request(megatron_interval(step_ms=480.0, steps=10), attrs))
    (report,) = decoded.reports
    training = report.training
    assert (training.framework, training.precision, training.global_batch_size) == ("megatron", "bf16", 512)
    assert training.step_time_ms == pytest.approx(480.0)  # the interval's mean: sum / count
    assert (training.loss, training.tokens_per_sec, training.tflops) == (2.31, 85_000.0, 390.5)
    assert (training.grad_norm, training.learning_rate) == (1.25, 3e-4)
    assert training.samples_per_sec == pytest.approx(512 * 1000 / 480.0)  # derived by the megatron adapter
    assert decoded.ignored_metrics == {"megatron.training.memory_allocated_gb": 1}  # no contract field for it


def test_cumulative_histograms_and_counters_give_the_interval_since_the_previous_export():
    series = SeriesState()

    def export(total_ms: float, steps: int, skipped: int):
        metrics = [
            histogram("megatron.training.step_duration_ms", total_ms, steps, CUMULATIVE),
            counter("megatron.training.skipped_iters", skipped, CUMULATIVE),
        ]
        return decode_request(request(metrics), series).reports[0].training

    first = export(5_000.0, 10, 1)
    second = export(5_000.0 + 20 * 600.0, 30, 4)
    assert (first.step_time_ms, first.skipped_steps) == (500.0, 1)
    assert (second.step_time_ms, second.skipped_steps) == (600.0, 3)
    idle = decode_request(request([histogram("megatron.training.step_duration_ms", 17_000.0, 30, CUMULATIVE)]), series)
    assert idle.reports == () and idle.accepted == 1  # no step in the interval: nothing to report, nothing wrong


def test_out_of_range_points_are_rejected_by_name_and_the_rest_lands():
    metrics = [
        *megatron_interval(),
        gauge("megatron.training.learning_rate", -1.0, time_ns=2),  # newer than the good one: it is the value
    ]
    own = NodeExporter("node-0").export(Collected(host=HOST)).resource_metrics[0].scope_metrics[0]
    bad_util = gauge("trainpulse.gpu.utilization", 140.0, **{"gpu.index": 0})
    no_index = gauge("trainpulse.gpu.temperature", 60.0)
    own.metrics.extend([bad_util, no_index])
    req = request(metrics)
    req.resource_metrics[0].scope_metrics.append(own)
    decoded = OtlpReceiver().decode(req)
    assert decoded.rejected == 3
    message = decoded.error_message
    assert "megatron.training.learning_rate: training.learning_rate: must be >= 0" in message
    assert "trainpulse.gpu.utilization: gpu.utilization_percent: must be <= 100" in message
    assert "trainpulse.gpu.temperature: attribute gpu.index: is required" in message
    (report,) = decoded.reports
    assert report.gpus is None and report.host == frame_from_samples(0.0, host=HOST).host
    assert report.training.step_time_ms == 480.0 and report.training.learning_rate == 3e-4  # the last good one


def test_a_resource_without_host_name_is_rejected_with_a_reason():
    nameless = request(megatron_interval(), resource={"service.name": "trainer"})
    named = request(megatron_interval(step_ms=300.0))
    nameless.resource_metrics.extend(named.resource_metrics)
    decoded = OtlpReceiver().decode(nameless)
    assert decoded.rejected == len(megatron_interval())
    assert "without the host.name attribute" in decoded.error_message
    assert [r.hostname for r in decoded.reports] == ["node-0"]
    assert decoded.reports[0].training.step_time_ms == 300.0


def test_attribute_sets_read_once_judge_every_later_export_the_same():
    node = NodeExporter("node-5")
    receiver = OtlpReceiver()
    bad_rank = gauge("trainpulse.rank.step_time", 5.0, rank=-1)  # the same bad attribute set in every export
    node.latest.put(Collected(gpus=GPUS, host=HOST, training=TRAINING), 1000.0)
    exports = [node.export() for _ in range(3)]  # the same samples, exported three times
    for req in exports:
        req.resource_metrics[0].scope_metrics[0].metrics.append(bad_rank)
    sent = exports[-1].SerializeToString()
    first, second, third = (receiver.decode(req) for req in exports)  # each read through (its values cleared)
    fresh = OtlpReceiver().decode(ExportMetricsServiceRequest.FromString(sent))
    # remembered sets read as a first reading did, and as a fresh receiver reads them (repr: the loss is NaN)
    assert repr(first.reports) == repr(second.reports) == repr(third.reports) == repr(fresh.reports)
    for decoded in (first, second, third):
        assert decoded.rejected == 1
        assert decoded.error_message == "trainpulse.rank.step_time: attribute rank: must be >= 0, got -1"


def test_a_series_sent_twice_reads_as_its_newest_point_and_a_changed_set_is_read_again():
    own = "trainpulse_otel"
    temperature = "trainpulse.gpu.temperature"
    twice_in_one = gauge(temperature, 70.0, 5, **{"gpu.index": 0})
    twice_in_one.gauge.data_points.append(twice_in_one.gauge.data_points[0])
    twice_in_one.gauge.data_points[1].as_double, twice_in_one.gauge.data_points[1].time_unix_nano = 60.0, 3
    receiver = OtlpReceiver()
    for metrics in (
        [twice_in_one],  # one metric, the same GPU twice: the newer point
        [gauge(temperature, 60.0, 3, **{"gpu.index": 0}), gauge(temperature, 70.0, 5, **{"gpu.index": 0})],
        [gauge(temperature, 70.0, 5, **{"gpu.index": 0}), gauge(temperature, 60.0, 3, **{"gpu.index": 0})],
    ):
        (gpu,) = receiver.decode(request(metrics, scope=own)).reports[0].gpus
        assert (gpu.index, gpu.temperature_celsius, gpu.node) == (0, 70.0, "node-0")
    renamed = receiver.decode(request([gauge(temperature, 71.0, 6, **{"gpu.index": 0, "gpu.name": "B200"})], scope=own))
    assert renamed.reports[0].gpus[0].name == "B200"  # the same metric with other attributes: read, not recalled
    moved = receiver.decode(request([gauge(temperature, 72.0, 7, **{"gpu.index": 1, "gpu.name": "B200"})], scope=own))
    assert [(g.index, g.temperature_celsius) for g in moved.reports[0].gpus] == [(1, 72.0)]


def test_points_without_a_recorded_value_are_ignored_in_a_remembered_export_layout_too():
    node = NodeExporter("node-7")
    node.latest.put(Collected(gpus=GPUS, training=TRAINING), 1000.0)
    receiver = OtlpReceiver()
    sent = node.export().SerializeToString()
    first = receiver.decode(ExportMetricsServiceRequest.FromString(sent))
    assert (first.reports[0].gpus[0].temperature_celsius, first.reports[0].training.model_name) == (88.0, "llama")
    stale = ExportMetricsServiceRequest.FromString(sent)
    for metric in stale.resource_metrics[0].scope_metrics[0].metrics:
        if metric.name.endswith((".gpu.temperature", ".training.info")):  # a valued gauge and an always-1 one
            metric.gauge.data_points[0].flags = 1  # FLAG_NO_RECORDED_VALUE: stale
    for _ in range(2):  # a new layout, then the same one remembered
        decoded = receiver.decode(ExportMetricsServiceRequest.FromString(stale.SerializeToString()))
        report = decoded.reports[0]
        assert (report.gpus[0].temperature_celsius, report.training.model_name) == (None, None)
        assert (decoded.accepted, decoded.ignored) == (first.accepted - 2, first.ignored + 2)


def test_a_hosts_and_a_jobs_points_without_attributes_stay_apart_in_every_export():
    receiver = OtlpReceiver()
    for _ in range(2):  # read, then remembered
        metrics = [gauge("trainpulse.host.cpu.utilization", 31.5), gauge("trainpulse.training.step_time", 512.0)]
        (report,) = receiver.decode(request(metrics, scope="trainpulse_otel")).reports
        assert (report.host.cpu_percent, report.training.step_time_ms) == (31.5, 512.0)


def test_values_that_read_as_zero_keep_their_case_and_sign_in_every_export():
    receiver = OtlpReceiver()
    gpu = {"gpu.index": 0}
    for value in (-0.0, 0.0, 41.5, -0.0):  # the layout is read once, then remembered
        used = gauge("trainpulse.gpu.memory.used", 0.0, **gpu)
        used.gauge.data_points[0].as_int = 0  # an int gauge's zero
        unset = gauge("trainpulse.gpu.power", 0.0, **gpu)
        unset.gauge.data_points[0].ClearField("value")  # a point without a value: ignored
        metrics = [gauge("trainpulse.gpu.temperature", value, **gpu), used, unset]
        decoded = receiver.decode(request(metrics, scope="trainpulse_otel"))
        (sample,) = decoded.reports[0].gpus
        assert (math.copysign(1.0, sample.temperature_celsius), abs(sample.temperature_celsius)) == (
            math.copysign(1.0, value),
            abs(value),
        )
        assert type(sample.memory_used_bytes) is int and sample.memory_used_bytes == 0
        assert sample.power_watts is None and decoded.ignored == 1


def _export_of(node: NodeExporter, gpus, now: float) -> bytes:
    node.latest.put(Collected(gpus=gpus, host=HOST, training=TRAINING), now)
    return node.export(now=now).SerializeToString()


def test_a_nodes_later_exports_of_a_known_layout_read_as_a_first_reading_does():
    node, receiver = NodeExporter("node-4"), OtlpReceiver()
    sent = [
        _export_of(node, (replace(GPUS[0], temperature_celsius=t), GPUS[1]), 1000.0 + t) for t in (80.0, 84.5, 91.0)
    ]
    for body, temperature in zip(sent, (80.0, 84.5, 91.0), strict=True):
        remembered = receiver.decode(ExportMetricsServiceRequest.FromString(body))
        fresh = OtlpReceiver().decode(ExportMetricsServiceRequest.FromString(body))
        assert repr(remembered.reports) == repr(fresh.reports)  # repr: the loss is NaN
        assert (remembered.accepted, remembered.ignored) == (fresh.accepted, fresh.ignored)
        assert remembered.reports[0].gpus[0].temperature_celsius == temperature


def test_a_bad_value_in_a_known_layout_is_rejected_by_name_and_the_rest_lands():
    node, receiver = NodeExporter("node-6"), OtlpReceiver()
    good = _export_of(node, GPUS, 1000.0)
    receiver.decode(ExportMetricsServiceRequest.FromString(good))
    bad = ExportMetricsServiceRequest.FromString(good)  # the same layout, one value out of its bounds
    for metric in bad.resource_metrics[0].scope_metrics[0].metrics:
        if metric.name == "trainpulse.gpu.utilization":
            metric.gauge.data_points[1].as_double = 140.0
    decoded = receiver.decode(bad)
    assert decoded.rejected == 1
    assert decoded.error_message == "trainpulse.gpu.utilization: gpu.utilization_percent: must be <= 100, got 140.0"
    gpus = decoded.reports[0].gpus
    assert (gpus[0].utilization_percent, gpus[1].utilization_percent) == (97.0, None)
    assert gpus[1].ecc_corrected_errors == 3 and decoded.reports[0].host.cpu_percent == 31.5


def test_a_known_layout_and_more_of_the_nodes_points_in_another_scope_make_one_report():
    node, receiver = NodeExporter("node-2"), OtlpReceiver()
    body = _export_of(node, GPUS, 1000.0)
    receiver.decode(ExportMetricsServiceRequest.FromString(body))
    both = ExportMetricsServiceRequest.FromString(body)
    extra = gauge("trainpulse.gpu.power", 250.0, **{"gpu.index": 1})
    both.resource_metrics[0].scope_metrics.append(
        request([extra], scope="trainpulse_otel").resource_metrics[0].scope_metrics[0]
    )
    decoded = receiver.decode(both)
    gpus = decoded.reports[0].gpus
    assert (gpus[0].temperature_celsius, gpus[1].power_watts, gpus[1].ecc_corrected_errors) == (88.0, 250.0, 3)
    alone = OtlpReceiver().decode(ExportMetricsServiceRequest.FromString(body))
    assert decoded.accepted == alone.accepted + 1
