"""OTLP log requests as shippers make them: a file's lines as records (the Collector's ``filelog`` receiver's
shape: a string body, ``log.file.path`` and ``log.file.name``, the node's ``host.name`` on the resource), built
from ``opentelemetry-proto`` messages; and the real lines the tests ship, from tests/fixtures/logs/."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs, ScopeLogs

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "logs"


def fixture_line(name: str, contains: str = "") -> str:
    """The first line of fixture ``name`` holding ``contains`` (see tests/fixtures/logs/SOURCES.md for its source)."""
    for line in (FIXTURES / name).read_text(encoding="utf-8").splitlines():
        if contains in line:
            return line
    raise LookupError(f"{name} has no line with {contains!r}")


#: Megatron-DeepSpeed's iteration line without ``lm loss``: a NaN loss (deepspeedai/Megatron-DeepSpeed#434).
NAN_ITERATION = fixture_line("megatron/2024_megatron_deepspeed_nan_no_loss.log", "iteration")
#: Rank 3's NCCL watchdog timeout, with torchrun's ``[rank3]:`` prefix (NVIDIA/nccl#1409), unindented.
WATCHDOG_RANK3 = fixture_line("failures/2024_ops_disagree_same_seq.txt", "[rank3]:").strip()


def any_value(value: object) -> AnyValue:
    if isinstance(value, AnyValue):
        return value
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    if isinstance(value, bytes):
        return AnyValue(bytes_value=value)
    return AnyValue(string_value=str(value))


def key_values(attributes: Mapping[str, object]) -> list[KeyValue]:
    return [KeyValue(key=k, value=any_value(v)) for k, v in attributes.items()]


def record(
    body: object,
    path: str | None = "/var/log/job/rank3.log",
    time_ns: int = 0,
    observed_ns: int = 0,
    extra: Mapping[str, object] | None = None,
) -> LogRecord:
    """One record as the filelog receiver sends it (``body``: a string, or any AnyValue; ``extra``: attributes)."""
    attributes = {"log.file.path": path, "log.file.name": path.rpartition("/")[2]} if path is not None else {}
    attributes.update(extra or {})
    return LogRecord(
        body=any_value(body),
        attributes=key_values(attributes),
        time_unix_nano=time_ns,
        observed_time_unix_nano=observed_ns,
    )


def log_request(
    records: Sequence[LogRecord | str], resource: Mapping[str, object] | None = None
) -> ExportLogsServiceRequest:
    """One resource's records (strings become records of the default file); ``host.name`` gpu-node-3 by default."""
    attrs = {"host.name": "gpu-node-3"} if resource is None else resource
    built = [r if isinstance(r, LogRecord) else record(r) for r in records]
    scope = ScopeLogs(log_records=built)
    return ExportLogsServiceRequest(
        resource_logs=[ResourceLogs(resource={"attributes": key_values(attrs)}, scope_logs=[scope])]
    )
