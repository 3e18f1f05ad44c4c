"""receive/otlp_logs.py: OTLP log records into console lines, pure (no server, no clock)."""

from __future__ import annotations

import gzip

import pytest
from google.protobuf import json_format
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue, KeyValueList

from tests.receive.log_requests import NAN_ITERATION, WATCHDOG_RANK3, log_request, record
from trainpulse_otel.logs import LogLine, LogReader
from trainpulse_otel.receive import JSON, PROTOBUF, UndecodableRequest, decode_logs, logs_response, parse_logs_request

NOW = 1_764_400_000.0


def test_each_record_is_a_line_of_its_node_and_file_at_its_time():
    request = log_request(
        [
            record("first", time_ns=1_764_399_990_500_000_000, extra={"log.file.record_number": 7}),
            record("second", observed_ns=1_764_399_995_000_000_000),
            record("third", path=None, extra={"log.file.name": "job-17-2.out"}),
        ]
    )
    decoded = decode_logs(request, NOW)
    assert (decoded.accepted, decoded.rejected, decoded.error_message) == (3, 0, "")
    assert decoded.lines == (
        LogLine("first", "/var/log/job/rank3.log", 7, "gpu-node-3", None, 1_764_399_990.5),
        LogLine("second", "/var/log/job/rank3.log", None, "gpu-node-3", None, 1_764_399_995.0),
        LogLine("third", "job-17-2.out", None, "gpu-node-3", None, NOW),  # no time: when it arrived
    )


def test_this_daemons_own_host_is_this_node():
    decoded = decode_logs(log_request(["a line"], {"host.name": "me"}), NOW, local_hosts={"me"})
    assert decoded.lines[0].node is None


def test_a_body_of_several_lines_gives_each_and_a_newline_at_the_end_is_none():
    request = log_request([record("Traceback (most recent call last):\r\n  File x\nValueError: y\n")])
    [traceback] = [decode_logs(request, NOW).lines]
    assert [line.text for line in traceback] == ["Traceback (most recent call last):", "  File x", "ValueError: y"]


def test_shippers_map_and_bytes_bodies_hold_their_line():
    fluent_bit = AnyValue(kvlist_value=KeyValueList(values=[KeyValue(key="log", value=AnyValue(string_value="fb"))]))
    vector = AnyValue(
        kvlist_value=KeyValueList(
            values=[
                KeyValue(key="host", value=AnyValue(string_value="n")),
                KeyValue(key="message", value=AnyValue(string_value="vec")),
            ]
        )
    )
    decoded = decode_logs(log_request([record(fluent_bit), record(vector), record(b"raw bytes")]), NOW)
    assert [line.text for line in decoded.lines] == ["fb", "vec", "raw bytes"]


@pytest.mark.parametrize(
    ("body", "kind"),
    [
        (AnyValue(int_value=3), "int"),
        (AnyValue(double_value=1.5), "double"),
        (AnyValue(array_value=ArrayValue(values=[AnyValue(string_value="x")])), "array"),
        (AnyValue(kvlist_value=KeyValueList(values=[KeyValue(key="msg", value=AnyValue(int_value=1))])), "kvlist"),
        (AnyValue(bytes_value=b"\xff\xfe"), "bytes"),
        (AnyValue(), "empty"),
    ],
)
def test_a_body_with_no_line_is_rejected_and_counted_not_an_error(body, kind):
    decoded = decode_logs(log_request([record(body), "kept"]), NOW)
    assert (decoded.accepted, decoded.rejected) == (1, 1)
    assert f"body is {kind} holds no console line" in decoded.error_message
    assert [line.text for line in decoded.lines] == ["kept"]


def test_a_resource_without_host_name_names_no_node_and_its_records_are_rejected():
    request = log_request(["a", "b"], {"service.name": "x"})
    request.resource_logs.extend(log_request(["c"]).resource_logs)
    decoded = decode_logs(request, NOW)
    assert (decoded.accepted, decoded.rejected) == (1, 2)
    assert "without the host.name attribute" in decoded.error_message and "2 log records" in decoded.error_message


def test_the_reader_reads_the_lines_a_nan_iteration_and_rank_3s_watchdog_timeout():
    lines = decode_logs(log_request([NAN_ITERATION, WATCHDOG_RANK3]), NOW).lines
    reader = LogReader()
    told = [item for line in lines for item in reader.feed(line)] + reader.flush()
    [event] = [t for t in told if getattr(t, "kind", None) == "watchdog_timeout"]
    [report] = [t for t in told if getattr(t, "global_step", None) == 9]
    assert (event.rank, event.hostname, event.source) == (3, "gpu-node-3", "/var/log/job/rank3.log")
    assert report.loss != report.loss  # NaN: the loss vanished from the line


def test_protobuf_and_otlp_json_parse_and_anything_else_says_why():
    request = log_request(["x"])
    assert parse_logs_request(request.SerializeToString(), PROTOBUF) == request
    assert parse_logs_request(json_format.MessageToJson(request).encode(), JSON) == request
    with pytest.raises(UndecodableRequest, match="not an OTLP ExportLogsServiceRequest in protobuf"):
        parse_logs_request(gzip.compress(b"not protobuf"), PROTOBUF)
    with pytest.raises(UndecodableRequest, match="not an OTLP/JSON ExportLogsServiceRequest"):
        parse_logs_request(b'{"resourceLogs": [{"scopeLogs": 5}]}', JSON)


def test_the_answer_has_partial_success_only_when_something_was_rejected():
    assert not logs_response().HasField("partial_success")
    answer = logs_response(2, "why")
    assert (answer.partial_success.rejected_log_records, answer.partial_success.error_message) == (2, "why")


def test_trainpulses_own_events_are_ignored_and_counted():
    request = log_request(["a job's line"])
    own = request.resource_logs[0].scope_logs.add()
    own.scope.name = "trainpulse_otel"
    own.log_records.add(event_name="trainpulse.signal.raised").body.string_value = "rank 5 is 38% slower"
    decoded = decode_logs(request, NOW)
    assert (decoded.accepted, decoded.rejected, decoded.ignored) == (1, 0, 1)
    assert [line.text for line in decoded.lines] == ["a job's line"]
