"""``POST /v1/logs`` and the gRPC ``LogsService``: OTLP log records read as a job's console lines, against a real
waitress server (and a real gRPC server) on loopback, fed by the OTel SDK's own log exporters and by hand-built
``opentelemetry-proto`` requests."""

from __future__ import annotations

import gzip
import json

import pytest
from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter as GrpcLogExporter
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter as HttpLogExporter
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, LogRecordExportResult, SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource

from tests import parts
from tests.receive.log_requests import NAN_ITERATION, WATCHDOG_RANK3, log_request, record
from trainpulse_otel.api.otlp_grpc import OtlpGrpcServer

TOKEN = "s3cret-token-for-otlp-log-tests"
PROTOBUF = {"Content-Type": "application/x-protobuf"}
OTLP_JSON = {"Content-Type": "application/json"}


class Shipper:
    """A node's log shipper on the OTel SDK: each line a record of ``path`` with its number (as the filelog
    receiver sends them), exported by the SDK's OTLP exporter."""

    def __init__(self, hostname: str = "gpu-node-3", path: str = "/var/log/job/rank3.log") -> None:
        self.memory = InMemoryLogRecordExporter()
        provider = LoggerProvider(resource=Resource.create({"host.name": hostname}))
        provider.add_log_record_processor(SimpleLogRecordProcessor(self.memory))
        self.logger = provider.get_logger("filelog")
        self.path = path
        self.number = 0

    def write(self, *lines: str) -> None:
        for line in lines:
            self.number += 1
            where = {"log.file.path": self.path, "log.file.name": "rank3.log", "log.file.record_number": self.number}
            self.logger.emit(body=line, attributes=where)

    def export(self, exporter) -> LogRecordExportResult:
        batch = self.memory.get_finished_logs()
        self.memory.clear()
        return exporter.export(batch)


def post(served, body: bytes, headers: dict[str, str], path: str = "/v1/logs"):
    return served.send("POST", path, body, {"Content-Length": str(len(body)), **headers})


def diagnosis(served) -> dict:
    served.engine.tick()
    served.engine.tick()  # an iteration held for its timer lines is put once its stream was quiet for a tick
    return served.get_json("/v1/snapshot")[1]["diagnosis"]


def signal(served, name: str) -> dict | None:
    return next((s for s in diagnosis(served)["signals"] if s["name"] == name), None)


def healthy(served) -> bool:
    return served.get_json("/healthz")[0] == 200


def counted(served, metric: str, tag: str) -> dict[str, float]:
    """A counter's values by one tag, as the Datadog-style JSON reads them."""
    return {
        next(t for t in m["tags"] if t.startswith(tag + ":")): m["value"]
        for m in served.get_json("/v1/metrics")[1]
        if m["metric"].endswith(metric)
    }


@pytest.mark.parametrize("compression", [Compression.Gzip, Compression.NoCompression])
def test_the_sdks_http_log_exporter_ships_a_nan_iteration_and_a_watchdog_timeout(served, compression):
    shipper = Shipper()
    shipper.write(NAN_ITERATION, WATCHDOG_RANK3)
    exporter = HttpLogExporter(endpoint=served.url + "/v1/logs", compression=compression, timeout=5)
    assert shipper.export(exporter) is LogRecordExportResult.SUCCESS
    found = {s["name"]: s for s in diagnosis(served)["signals"]}
    assert {"nonfinite_loss", "collective_timeout"} <= set(found)
    timeout = found["collective_timeout"]
    assert timeout["subject"] == {"ranks": [3]}
    assert timeout["evidence"]["op"] == "ALLREDUCE" and timeout["evidence"]["seq"] == 80078
    assert timeout["evidence"]["lines"] == ["/var/log/job/rank3.log:2"]  # the file and line the record names
    assert served.engine.frame.training.step_time_ms == pytest.approx(1979.2)  # the iteration's other fields land


def test_otlp_json_answers_in_json_and_a_record_with_no_line_is_rejected_not_an_error(served):
    request = log_request([record(AnyValue(int_value=42)), NAN_ITERATION])
    status, headers, raw = post(served, json_format.MessageToJson(request).encode(), OTLP_JSON)
    assert status == 200 and headers["Content-Type"] == "application/json"
    partial = json.loads(raw)["partialSuccess"]
    assert partial["rejectedLogRecords"] == "1"  # int64 as a string, as OTLP/JSON writes it
    assert "body is int holds no console line" in partial["errorMessage"]
    assert signal(served, "nonfinite_loss") is not None  # the good record landed
    served.engine.tick()
    assert counted(served, "otlp.log_records", "outcome") == {"outcome:accepted": 1, "outcome:rejected": 1}


def test_the_docs_curl_example_is_a_valid_otlp_json_body(served):
    body = {
        "resourceLogs": [
            {
                "resource": {"attributes": [{"key": "host.name", "value": {"stringValue": "gpu-node-3"}}]},
                "scopeLogs": [
                    {
                        "logRecords": [
                            {
                                "body": {"stringValue": WATCHDOG_RANK3},
                                "attributes": [
                                    {"key": "log.file.path", "value": {"stringValue": "/var/log/job/rank3.log"}}
                                ],
                            }
                        ]
                    }
                ],
            }
        ]
    }
    status, _, raw = post(served, json.dumps(body).encode(), OTLP_JSON)
    assert (status, json.loads(raw)) == (200, {})
    assert signal(served, "collective_timeout")["subject"] == {"ranks": [3]}


def test_a_clean_protobuf_request_gets_an_empty_protobuf_answer(served):
    status, headers, raw = post(served, log_request(["nothing to see"]).SerializeToString(), PROTOBUF)
    assert status == 200 and headers["Content-Type"] == "application/x-protobuf"
    assert not ExportLogsServiceResponse.FromString(raw).HasField("partial_success")


def test_lines_from_this_daemons_own_host_are_this_nodes(served):
    [own] = sorted(served.engine.hostnames)
    post(served, log_request([WATCHDOG_RANK3], {"host.name": own}).SerializeToString(), PROTOBUF)
    other = log_request([WATCHDOG_RANK3.replace("rank3", "rank4").replace("Rank 3", "Rank 4")], {"host.name": "b"})
    post(served, other.SerializeToString(), PROTOBUF)
    served.engine.tick()
    events = served.engine.frame.events
    assert [(e.rank, e.hostname) for e in events] == [(3, None), (4, "b")]


def test_bad_requests_are_refused_with_json_errors_and_the_daemon_stays_healthy(served):
    good = log_request([NAN_ITERATION]).SerializeToString()
    gzip_bomb = gzip.compress(b"\x00" * (64 << 20))  # 64 MiB of zeros in ~64 kB
    cases = [
        (b"\xff\xff\xff not protobuf", PROTOBUF, 400, "not an OTLP ExportLogsServiceRequest in protobuf"),
        (b'{"resourceLogs": 7}', OTLP_JSON, 400, "not an OTLP/JSON ExportLogsServiceRequest"),
        (b'{"resourceLogs": [', OTLP_JSON, 400, "not an OTLP/JSON ExportLogsServiceRequest"),
        (b"\xc3\x28", OTLP_JSON, 400, "not UTF-8 OTLP/JSON"),
        (good, {"Content-Type": "text/plain"}, 415, "unsupported content type 'text/plain'"),
        (good, {}, 415, "unsupported content type none"),
        (b"\x1f\x8b not gzip", {**PROTOBUF, "Content-Encoding": "gzip"}, 400, "not valid gzip data"),
        (good, {**PROTOBUF, "Content-Encoding": "br"}, 415, "unsupported Content-Encoding 'br'"),
        (b"\x00" * (2 << 20), PROTOBUF, 413, "larger than"),
        (gzip_bomb, {**PROTOBUF, "Content-Encoding": "gzip"}, 413, "once decompressed"),
    ]
    for body, headers, status, words in cases:
        got, response_headers, raw = post(served, body, headers)
        assert (got, words in json.loads(raw)["error"]) == (status, True), (headers, raw[:300])
        assert response_headers["Content-Type"] == "application/json"
        assert healthy(served)
    assert post(served, good, PROTOBUF)[0] == 200  # and takes the next good request
    assert signal(served, "nonfinite_loss") is not None
    served.engine.tick()
    refused = counted(served, "ingest.errors", "reason")
    assert refused == {
        "reason:malformed": 4,
        "reason:invalid_field": 1,  # not gzip: a 400 naming Content-Encoding
        "reason:unsupported_media_type": 3,
        "reason:too_large": 2,
    }


def test_the_token_guards_log_ingest(serve_app):
    served = serve_app(lambda engine: parts.app(engine, auth_token=TOKEN))
    body = log_request([WATCHDOG_RANK3]).SerializeToString()
    status, _, raw = post(served, body, PROTOBUF)
    assert status == 401 and json.loads(raw)["field"] == "Authorization"
    assert post(served, body, {**PROTOBUF, "Authorization": f"Bearer {TOKEN}"})[0] == 200


def test_other_methods_at_v1_logs_are_flasks_and_list_post(served):
    status, headers, raw = served.send("GET", "/v1/logs")
    assert status == 405 and "POST" in headers["Allow"] and json.loads(raw)["field"] is None


@pytest.fixture
def grpc_server(served):
    servers = []

    def start(token: str | None = None) -> OtlpGrpcServer:
        servers.append(OtlpGrpcServer(served.engine, "127.0.0.1:0", token, max_message_bytes=1 << 20))
        servers[-1].start()
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def test_the_grpc_logs_service_takes_the_sdks_exporter_with_the_token(served, grpc_server):
    endpoint = f"127.0.0.1:{grpc_server(TOKEN).port}"
    shipper = Shipper()
    shipper.write(WATCHDOG_RANK3)
    assert shipper.export(GrpcLogExporter(endpoint=endpoint, insecure=True, timeout=5)) is (
        LogRecordExportResult.FAILURE  # UNAUTHENTICATED
    )
    assert signal(served, "collective_timeout") is None
    shipper.write(WATCHDOG_RANK3)
    signed = GrpcLogExporter(endpoint=endpoint, insecure=True, timeout=5, headers={"authorization": f"Bearer {TOKEN}"})
    assert shipper.export(signed) is LogRecordExportResult.SUCCESS
    assert signal(served, "collective_timeout")["subject"] == {"ranks": [3]}
    assert healthy(served)


def test_the_grpc_logs_service_refuses_a_message_over_the_limit(served, grpc_server):
    endpoint = f"127.0.0.1:{grpc_server().port}"
    shipper = Shipper()
    shipper.write("x" * (2 << 20))
    assert shipper.export(GrpcLogExporter(endpoint=endpoint, insecure=True, timeout=5)) is (
        LogRecordExportResult.FAILURE  # RESOURCE_EXHAUSTED
    )
    assert healthy(served)


def test_what_the_lines_became_is_counted_with_source_otlp(served):
    post(served, log_request([NAN_ITERATION, WATCHDOG_RANK3, "nobody knows this line"]).SerializeToString(), PROTOBUF)
    served.engine.tick()
    served.engine.tick()  # the iteration is reported once its stream was quiet for a tick
    counts = {
        (m["metric"].rpartition(".")[2], next(t for t in m["tags"] if t.startswith(("outcome:", "kind:")))): m["value"]
        for m in served.get_json("/v1/metrics")[1]
        if m["metric"].endswith(("logs.lines", "logs.records")) and "source:otlp" in m["tags"]
    }
    assert counts == {
        ("lines", "outcome:understood"): 2,
        ("lines", "outcome:unknown"): 1,
        ("records", "kind:report"): 1,
        ("records", "kind:event"): 1,
    }


def test_a_parsers_bug_costs_its_line_not_the_request(served, monkeypatch, caplog):
    feed = served.engine.log_reader.feed

    def broken(line):
        if "Watchdog" in line.text:
            raise RuntimeError("parser bug")
        return feed(line)

    monkeypatch.setattr(served.engine.log_reader, "feed", broken)
    status, _, _ = post(served, log_request([WATCHDOG_RANK3, NAN_ITERATION]).SerializeToString(), PROTOBUF)
    assert status == 200 and signal(served, "nonfinite_loss") is not None
    assert any("could not be read" in r.getMessage() for r in caplog.records)


def test_a_node_daemons_own_events_are_no_console_lines(served):
    provider = LoggerProvider(resource=Resource.create({"host.name": "gpu-node-3"}))
    memory = InMemoryLogRecordExporter()
    provider.add_log_record_processor(SimpleLogRecordProcessor(memory))
    event = f"collective_timeout raised: {WATCHDOG_RANK3}"  # even one that quotes a failure line
    provider.get_logger("trainpulse_otel").emit(body=event, event_name="trainpulse.signal.raised")
    exporter = HttpLogExporter(endpoint=served.url + "/v1/logs", timeout=5)
    assert exporter.export(memory.get_finished_logs()) is LogRecordExportResult.SUCCESS
    assert signal(served, "collective_timeout") is None
    assert counted(served, "otlp.log_records", "outcome") == {"outcome:ignored": 1}


def test_a_nan_line_beside_the_nan_loss_the_sdk_reported_is_one_nonfinite_loss(served):
    """Logs and telemetry meet: the SDK's report of step 9 with a NaN loss and the job's own NaN iteration line of
    step 9 (shipped by a Collector) are one job-level signal, not two."""
    sdk = b'{"global_step": 9, "loss": NaN, "step_time_ms": 1979.2, "framework": "megatron"}'
    status, _, _ = post(served, sdk, {"Content-Type": "application/json"}, path="/v1/training")
    assert status in (200, 202)
    assert post(served, log_request([NAN_ITERATION]).SerializeToString(), PROTOBUF)[0] == 200
    found = [s for s in diagnosis(served)["signals"] if s["name"] == "nonfinite_loss"]
    assert len(found) == 1 and found[0]["subject"] == {}


def test_records_refused_for_want_of_a_node_are_said_in_the_daemon_s_log_once_a_minute(served, caplog):
    nameless = log_request([WATCHDOG_RANK3], {}).SerializeToString()
    with caplog.at_level("WARNING", logger="trainpulse_otel.runtime.engine"):
        for _ in range(3):
            status, _, _ = post(served, nameless, PROTOBUF)
            assert status == 200
    said = [r.getMessage() for r in caplog.records if "OTLP logs" in r.getMessage()]
    assert len(said) == 1 and "1 record(s) rejected" in said[0] and "host.name" in said[0]
