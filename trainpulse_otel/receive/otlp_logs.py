"""OTLP logs in: an ``ExportLogsServiceRequest`` as the console lines the log reader reads.

Each log record's body is one line of a job's output: a string (what the
Collector's ``filelog`` receiver sends); a map holding ``log`` or ``message``
(Fluent Bit's and Vector's records) gives that string, and UTF-8 bytes are
read as text. A body of several lines gives each. The resource's
``host.name`` names the node (one of this daemon's own names: ``None``, this
node); ``log.file.path``, else ``log.file.name``, names the file (its stream,
and through its name the rank), ``log.file.record_number`` the line's number;
``time_unix_nano``, else ``observed_time_unix_nano``, else ``now`` is when
the line arrived. A record with no line in it (a number, a list, no body) or
whose resource names no node is rejected: counted in the answer's
``partial_success``, saying why. TrainPulse's own events (a node daemon's
signals, scope ``trainpulse_otel``) are no job's output: ignored, counted.
Pure: the request and the time in, lines out.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs

from ..logs import LogLine
from ..telemetry.instruments import METER_NAME
from .points import HOST_NAME, AttributeValue, attribute_dict
from .tally import Tally
from .wire import parse_request

#: Record attributes the filelog receiver sets (``include_file_path``, ``include_file_name``,
#: ``include_file_record_number``); the path is preferred: two nodes' ``rank0.log`` in different folders differ.
FILE_PATH, FILE_NAME, RECORD_NUMBER = "log.file.path", "log.file.name", "log.file.record_number"
#: Keys of a map body that hold the line: Fluent Bit's tail input (``log``), Vector's file source (``message``).
BODY_KEYS = ("log", "message")
#: What TrainPulse's own events are counted as when ignored.
OWN_EVENTS = "trainpulse events"


@dataclass(frozen=True, slots=True)
class DecodedLogs:
    """The lines of one request, and the account of its records (``accepted``: read into lines; ``ignored``:
    TrainPulse's own events)."""

    lines: tuple[LogLine, ...]
    accepted: int = 0
    rejected: int = 0
    ignored: int = 0
    error_message: str = ""


def parse_logs_request(raw: bytes, encoding: str) -> ExportLogsServiceRequest:
    """The request in ``raw`` (protobuf or OTLP/JSON), or UndecodableRequest saying why."""
    return parse_request(raw, encoding, ExportLogsServiceRequest)


def decode_logs(request: ExportLogsServiceRequest, now: float, local_hosts: Collection[str] = ()) -> DecodedLogs:
    """Every record of ``request`` as lines, in order; ``now`` stamps a record without a time, ``local_hosts``
    are this daemon's own names (their lines are this node's: ``node=None``)."""
    tally = Tally()
    lines: list[LogLine] = []
    for resource_logs in request.resource_logs:
        resource = attribute_dict(resource_logs.resource.attributes)
        host = resource.get(HOST_NAME)
        if not isinstance(host, str) or not host:
            _reject_nameless(resource_logs, tally)
            continue
        node = None if host in local_hosts else host
        for scope_logs in resource_logs.scope_logs:
            if scope_logs.scope.name == METER_NAME:  # a TrainPulse daemon's events (signal raised, …)
                tally.ignore(OWN_EVENTS, len(scope_logs.log_records))
                continue
            for record in scope_logs.log_records:
                found = record_lines(record, node, resource, now)
                if isinstance(found, str):
                    tally.reject(found)
                else:
                    tally.accept()
                    lines.extend(found)
    return DecodedLogs(tuple(lines), tally.accepted, tally.rejected, tally.ignored, tally.message())


def record_lines(
    record: LogRecord, node: str | None, resource: Mapping[str, AttributeValue], now: float
) -> list[LogLine] | str:
    """A record's lines, or why it holds none."""
    text = body_text(record.body)
    if text is None:
        kind = (record.body.WhichOneof("value") or "empty").removesuffix("_value")
        return f"a log record whose body is {kind} holds no console line (send each line as a string body)"
    attributes = attribute_dict(record.attributes)
    source = _text(attributes.get(FILE_PATH)) or _text(attributes.get(FILE_NAME)) or _text(resource.get(FILE_PATH))
    number = attributes.get(RECORD_NUMBER)
    number = number if isinstance(number, int) and not isinstance(number, bool) and number > 0 else None
    nanos = record.time_unix_nano or record.observed_time_unix_nano
    ts = nanos / 1e9 if nanos else now
    pieces = text.rstrip("\r\n").split("\n")  # one line, or each of a shipper's joined lines
    return [
        LogLine(piece.removesuffix("\r"), source, None if number is None else number + i, node, None, ts)
        for i, piece in enumerate(pieces)
    ]


def body_text(body: AnyValue) -> str | None:
    """The console text a record's body holds, or None."""
    kind = body.WhichOneof("value")
    if kind == "string_value":
        return body.string_value
    if kind == "bytes_value":
        try:
            return body.bytes_value.decode("utf-8")
        except UnicodeDecodeError:
            return None
    if kind == "kvlist_value":
        for pair in body.kvlist_value.values:
            if pair.key in BODY_KEYS and pair.value.WhichOneof("value") == "string_value":
                return pair.value.string_value
    return None


def logs_response(rejected: int = 0, error_message: str = "") -> ExportLogsServiceResponse:
    """The answer an OTLP receiver gives: ``partial_success`` only when something was rejected or noted."""
    answer = ExportLogsServiceResponse()
    if rejected or error_message:
        answer.partial_success.rejected_log_records = rejected
        answer.partial_success.error_message = error_message
    return answer


def _reject_nameless(resource_logs: ResourceLogs, tally: Tally) -> None:
    records = sum(len(scope_logs.log_records) for scope_logs in resource_logs.scope_logs)
    if records:
        tally.reject(
            f"a resource without the {HOST_NAME} attribute names no node of the job: its {records} log records "
            f"were rejected (set {HOST_NAME}: collector_config/otelcol/logs.yaml shows how)",
            records,
        )


def _text(value: AttributeValue | None) -> str | None:
    return value if isinstance(value, str) and value else None
