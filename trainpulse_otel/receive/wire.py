"""OTLP on the wire: an export request (metrics or logs) from protobuf or OTLP/JSON bytes, and the answer back.

Decoding is ``opentelemetry-proto``'s generated messages and protobuf's own
parsers — no hand-written wire parsing. OTLP/JSON is protobuf's JSON mapping
(lowerCamelCase keys; int64 as strings or numbers; enums by name or number),
and, as the OTLP specification asks of receivers, unknown fields are ignored.
"""

from __future__ import annotations

from typing import TypeVar

from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
ENCODINGS = (PROTOBUF, JSON)

Request = TypeVar("Request", bound=Message)


class UndecodableRequest(ValueError):
    """A body that is not the export request (``ExportMetricsServiceRequest``, …) in the encoding it claims."""


def parse_request(raw: bytes, encoding: str, message: type[Request] = ExportMetricsServiceRequest) -> Request:
    """The ``message`` (metrics by default) in ``raw`` (``encoding`` is :data:`PROTOBUF` or :data:`JSON`), or
    UndecodableRequest saying why."""
    request = message()
    name = message.__name__
    try:
        if encoding == PROTOBUF:
            request.ParseFromString(raw)
        else:
            json_format.Parse(raw.decode("utf-8"), request, ignore_unknown_fields=True)
    except DecodeError as exc:
        raise UndecodableRequest(f"body is not an OTLP {name} in protobuf: {exc}") from None
    except UnicodeDecodeError as exc:
        raise UndecodableRequest(f"body is not UTF-8 OTLP/JSON: {exc.reason} at byte {exc.start}") from None
    except (json_format.ParseError, RecursionError) as exc:
        detail = str(exc) or "nested too deeply"
        raise UndecodableRequest(f"body is not an OTLP/JSON {name}: {detail}"[:500]) from None
    return request


def response(rejected_points: int = 0, error_message: str = "") -> ExportMetricsServiceResponse:
    """The answer an OTLP receiver gives: ``partial_success`` only when something was rejected or noted."""
    answer = ExportMetricsServiceResponse()
    if rejected_points or error_message:
        answer.partial_success.rejected_data_points = rejected_points
        answer.partial_success.error_message = error_message
    return answer


def encode_response(answer: Message, encoding: str) -> bytes:
    """The response serialized in the request's encoding."""
    if encoding == PROTOBUF:
        return answer.SerializeToString()
    return json_format.MessageToJson(answer, indent=None).encode("utf-8")
