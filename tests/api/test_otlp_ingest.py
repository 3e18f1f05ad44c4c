"""``POST /v1/metrics`` and the OTLP/gRPC receiver, fed by the OTel SDK's own exporters and by hand-built
``opentelemetry-proto`` messages, against a real waitress server (and a real gRPC server) on loopback."""

from __future__ import annotations

import gzip
import json
import logging

import pytest
from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter as HttpExporter
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceResponse
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, MetricExportResult
from opentelemetry.sdk.resources import Resource

from tests import parts
from tests.receive.otlp_requests import gauge, megatron_interval, request
from trainpulse_otel.api.otlp_grpc import OtlpGrpcServer
from trainpulse_otel.telemetry.otlp import TEMPORALITIES

TOKEN = "s3cret-token-for-otlp-tests"
PROTOBUF = {"Content-Type": "application/x-protobuf"}


class MegatronProcess:
    """A trainer's OTel SDK recording Megatron's instruments, exported by the SDK's own OTLP exporter."""

    def __init__(self, temporality: str = "delta", hostname: str = "gpu-node-4") -> None:
        self.reader = InMemoryMetricReader(preferred_temporality=TEMPORALITIES[temporality])
        resource = Resource.create({"host.name": hostname, "dl.batch_size": 256, "model": "gpt-7b"})
        meter = MeterProvider(metric_readers=[self.reader], resource=resource).get_meter("megatron")
        self.step = meter.create_histogram("megatron.training.step_duration_ms", unit="ms")
        self.loss = meter.create_gauge("megatron.training.loss")
        self.tokens = meter.create_gauge("megatron.training.tokens_per_sec")
        self.skipped = meter.create_counter("megatron.training.skipped_iters")

    def log_interval(self, step_times_ms: list[float], loss: float, tokens_per_sec: float, skipped: int = 0) -> None:
        for ms in step_times_ms:
            self.step.record(ms)
        self.loss.set(loss)
        self.tokens.set(tokens_per_sec)
        if skipped:
            self.skipped.add(skipped)

    def export(self, exporter) -> MetricExportResult:
        return exporter.export(self.reader.get_metrics_data())


def training(served):
    served.engine.tick()
    return served.get_json("/v1/snapshot")[1]["training"]


def post(served, body: bytes, headers: dict[str, str]):
    status, response_headers, raw = served.send(
        "POST", "/v1/metrics", body, {"Content-Length": str(len(body)), **headers}
    )
    return status, response_headers, raw


def healthy(served) -> bool:
    return served.get_json("/healthz")[0] == 200


@pytest.mark.parametrize("compression", [Compression.Gzip, Compression.NoCompression])
def test_the_sdks_http_exporter_feeds_megatron_metrics_into_the_training_view(served, compression):
    trainer = MegatronProcess()
    exporter = HttpExporter(endpoint=served.url + "/v1/metrics", compression=compression, timeout=5)
    trainer.log_interval([500.0, 520.0, 540.0], loss=2.5, tokens_per_sec=64_000.0, skipped=2)
    assert trainer.export(exporter) is MetricExportResult.SUCCESS
    job = training(served)
    assert (job["step_time_ms"], job["tokens_per_sec"], job["loss"]) == (520.0, 64_000.0, 2.5)
    assert (job["framework"], job["model_name"]) == ("megatron", "gpt-7b")
    assert [p.skipped_steps for p in served.engine.frame.losses] == [2]  # the loss detectors' stream
    trainer.log_interval([600.0], loss=2.4, tokens_per_sec=55_000.0)  # delta: this interval only
    assert trainer.export(exporter) is MetricExportResult.SUCCESS
    assert training(served)["step_time_ms"] == 600.0


def test_cumulative_exports_give_each_intervals_mean_step_time(served):
    trainer = MegatronProcess(temporality="cumulative")
    exporter = HttpExporter(endpoint=served.url + "/v1/metrics", timeout=5)
    trainer.log_interval([400.0, 400.0], loss=3.0, tokens_per_sec=1.0)
    assert trainer.export(exporter) is MetricExportResult.SUCCESS
    trainer.log_interval([700.0], loss=2.9, tokens_per_sec=1.0)
    assert trainer.export(exporter) is MetricExportResult.SUCCESS
    assert training(served)["step_time_ms"] == 700.0  # (400 + 400 + 700 - 800) / (3 - 2)


def test_otlp_json_answers_in_json_with_partial_success_and_the_good_points_land(served):
    req = request(megatron_interval(step_ms=450.0))
    req.resource_metrics[0].scope_metrics[0].metrics.append(gauge("megatron.training.tokens_per_sec", -5.0, 9))
    nameless = request([gauge("megatron.training.loss", 1.0)], resource={"service.name": "x"})
    req.resource_metrics.extend(nameless.resource_metrics)
    body = json_format.MessageToJson(req).encode()
    status, headers, raw = post(served, body, {"Content-Type": "application/json"})
    assert status == 200 and headers["Content-Type"] == "application/json"
    partial = json.loads(raw)["partialSuccess"]
    assert partial["rejectedDataPoints"] == "2"  # int64 as a string, as OTLP/JSON writes it
    assert "megatron.training.tokens_per_sec: training.tokens_per_sec: must be >= 0" in partial["errorMessage"]
    assert "without the host.name attribute" in partial["errorMessage"]
    job = training(served)
    assert (job["step_time_ms"], job["tokens_per_sec"], job["loss"]) == (450.0, 85_000.0, 2.31)


def test_a_clean_protobuf_request_gets_an_empty_protobuf_answer(served):
    status, headers, raw = post(served, request(megatron_interval()).SerializeToString(), PROTOBUF)
    assert status == 200 and headers["Content-Type"] == "application/x-protobuf"
    answer = ExportMetricsServiceResponse.FromString(raw)
    assert not answer.HasField("partial_success")


def test_bad_requests_are_refused_with_json_errors_and_the_daemon_stays_healthy(served):
    good = request(megatron_interval()).SerializeToString()
    cases = [
        (b"\xff\xff\xff not protobuf", PROTOBUF, 400, "not an OTLP ExportMetricsServiceRequest in protobuf"),
        (b'{"resourceMetrics": 7}', {"Content-Type": "application/json"}, 400, "OTLP/JSON"),
        (good, {"Content-Type": "text/plain"}, 415, "unsupported content type 'text/plain'"),
        (good, {}, 415, "unsupported content type none"),
        (b"\x1f\x8b not gzip", {**PROTOBUF, "Content-Encoding": "gzip"}, 400, "not valid gzip data"),
        (gzip.compress(good)[:-9], {**PROTOBUF, "Content-Encoding": "gzip"}, 400, "truncated"),
        (good, {**PROTOBUF, "Content-Encoding": "br"}, 415, "unsupported Content-Encoding 'br'"),
        (b"\x00" * (2 << 20), PROTOBUF, 413, "larger than"),
        (gzip.compress(b"\x00" * (64 << 20)), {**PROTOBUF, "Content-Encoding": "gzip"}, 413, "once decompressed"),
    ]
    for body, headers, status, words in cases:
        got, response_headers, raw = post(served, body, headers)
        assert (got, words in json.loads(raw)["error"]) == (status, True), (headers, raw[:300])
        assert response_headers["Content-Type"] == "application/json"
        assert healthy(served)
    assert post(served, good, PROTOBUF)[0] == 200  # and takes the next good request
    assert training(served)["step_time_ms"] == 480.0
    assert served.get_json("/v1/metrics")[0] == 200  # GET keeps serving the Datadog-style JSON


def test_the_token_guards_otlp_ingest_but_not_reading_metrics(serve_app):
    served = serve_app(lambda engine: parts.app(engine, auth_token=TOKEN))
    body = request(megatron_interval()).SerializeToString()
    status, _headers, raw = post(served, body, PROTOBUF)
    assert status == 401 and json.loads(raw)["field"] == "Authorization"
    assert post(served, body, {**PROTOBUF, "Authorization": f"Bearer {TOKEN}"})[0] == 200
    assert served.get_json("/v1/metrics")[0] == 200


def test_otlp_points_are_counted_by_outcome(served):
    req = request([*megatron_interval(), gauge("megatron.training.loss", float("nan"), 5), gauge("queue.depth", 3.0)])
    assert post(served, req.SerializeToString(), PROTOBUF)[0] == 200
    points = {
        next(tag for tag in m["tags"] if tag.startswith("outcome:")): m["value"]
        for m in served.get_json("/v1/metrics")[1]
        if m["metric"].endswith("otlp.points")
    }
    accepted = len(megatron_interval()) - 1  # memory_allocated_gb has no field: ignored
    assert points == {"outcome:accepted": accepted + 1, "outcome:ignored": 2}  # a NaN loss is data


@pytest.fixture
def grpc_receiver(served):
    servers = []

    def start(token: str | None = None) -> OtlpGrpcServer:
        servers.append(OtlpGrpcServer(served.engine, "127.0.0.1:0", token, max_message_bytes=1 << 20))
        servers[-1].start()
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def test_the_grpc_receiver_takes_the_sdks_grpc_exporter_with_the_token(served, grpc_receiver):
    server = grpc_receiver(TOKEN)
    trainer = MegatronProcess()
    trainer.log_interval([300.0, 310.0], loss=1.9, tokens_per_sec=9000.0)
    endpoint = f"127.0.0.1:{server.port}"
    anonymous = GrpcExporter(endpoint=endpoint, insecure=True, timeout=5)
    assert trainer.export(anonymous) is MetricExportResult.FAILURE  # UNAUTHENTICATED
    assert training(served) is None
    trainer.log_interval([300.0, 310.0], loss=1.9, tokens_per_sec=9000.0)
    signed = GrpcExporter(endpoint=endpoint, insecure=True, timeout=5, headers={"authorization": f"Bearer {TOKEN}"})
    assert trainer.export(signed) is MetricExportResult.SUCCESS
    job = training(served)
    assert (job["step_time_ms"], job["loss"], job["tokens_per_sec"]) == (305.0, 1.9, 9000.0)
    assert healthy(served)


def refused(served) -> dict[str, float]:
    """The refused-ingest counter by reason, as the Datadog-style JSON reads it."""
    return {
        next(tag for tag in m["tags"] if tag.startswith("reason:")): m["value"]
        for m in served.get_json("/v1/metrics")[1]
        if m["metric"].endswith("ingest.errors")
    }


def test_refused_exports_are_counted_by_reason_and_a_401_says_how_to_authenticate(serve_app):
    served = serve_app(lambda engine: parts.app(engine, auth_token=TOKEN))
    signed = {**PROTOBUF, "Authorization": f"Bearer {TOKEN}"}
    status, headers, _ = post(served, b"x", PROTOBUF)
    challenge = {name.lower(): value for name, value in headers.items()}["www-authenticate"]
    assert status == 401 and challenge == 'Bearer realm="trainpulse"'
    assert post(served, b"x", {**signed, "Content-Type": "text/csv"})[0] == 415
    assert post(served, b"\xff\xff\xff", signed)[0] == 400
    status, _, raw = post(served, b"x", {**signed, "Content-Length": "lots"})
    assert status == 400  # waitress's own answer to a malformed length, in the API's shape
    assert json.loads(raw)["error"]
    served.engine.tick()
    assert refused(served) == {"reason:unauthorized": 1, "reason:unsupported_media_type": 1, "reason:malformed": 1}


def test_other_methods_at_the_otlp_path_are_flasks_and_list_post(served):
    status, headers, raw = served.send("PUT", "/v1/metrics", b"{}", PROTOBUF)
    assert status == 405 and {"GET", "POST"} <= set(headers["Allow"].replace(" ", "").split(","))
    assert json.loads(raw)["field"] is None
    status, headers, _ = served.send("OPTIONS", "/v1/metrics")
    assert status == 200 and {"GET", "POST", "OPTIONS"} <= set(headers["Allow"].replace(" ", "").split(","))


def test_a_failure_behind_the_otlp_handler_is_a_logged_json_500_and_the_next_export_lands(served, caplog):
    real = served.engine.ingest_otlp
    served.engine.ingest_otlp = lambda request: (_ for _ in ()).throw(RuntimeError("decoder state corrupted"))
    body = request(megatron_interval()).SerializeToString()
    with caplog.at_level(logging.ERROR, logger="trainpulse_otel.api.otlp_ingest"):
        status, headers, raw = post(served, body, PROTOBUF)
    assert status == 500 and headers["Content-Type"] == "application/json"
    assert json.loads(raw) == {"error": "internal error; the daemon's log has the details", "field": None}
    assert any("decoder state corrupted" in (r.exc_text or "") for r in caplog.records)
    served.engine.ingest_otlp = real
    assert post(served, body, PROTOBUF)[0] == 200 and training(served)["step_time_ms"] == 480.0


def test_a_chunked_export_lands_and_an_oversized_one_is_a_413(served):
    body = request(megatron_interval(step_ms=430.0)).SerializeToString()
    pieces = [body[i : i + 100] for i in range(0, len(body), 100)]  # Transfer-Encoding: chunked, no length
    assert served.send("POST", "/v1/metrics", pieces, PROTOBUF)[0] == 200
    assert training(served)["step_time_ms"] == 430.0
    status, _, raw = served.send("POST", "/v1/metrics", [b"\x00" * (1 << 20)] * 2, PROTOBUF)
    assert status == 413 and "larger than" in json.loads(raw)["error"]
    assert healthy(served)
