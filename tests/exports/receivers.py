"""Real OTLP receivers for the tests, built on opentelemetry-proto.

- :class:`GrpcReceiver`: a grpcio server implementing the collector's
  ``MetricsService`` and ``LogsService``;
- :class:`HttpReceiver`: an ``http.server`` answering ``POST /v1/metrics`` and
  ``/v1/logs`` with protobuf bodies (gzip or deflate when the exporter says so);
- :class:`HangingServer`: accepts connections and never answers (a stuck collector);
- :func:`free_port`: a loopback port nobody listens on (a collector that is down).

Decoded requests land in :class:`Received`, with helpers to read them back.
"""

from __future__ import annotations

import gzip
import socket
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from concurrent import futures
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import grpc
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


@dataclass
class Received:
    """What a receiver got, in arrival order; waiters are woken on each request."""

    metrics: list[metrics_service_pb2.ExportMetricsServiceRequest] = field(default_factory=list)
    logs: list[logs_service_pb2.ExportLogsServiceRequest] = field(default_factory=list)
    _changed: threading.Condition = field(default_factory=threading.Condition, repr=False)

    def add(self, request: Any) -> None:
        with self._changed:
            target = self.metrics if isinstance(request, metrics_service_pb2.ExportMetricsServiceRequest) else self.logs
            target.append(request)
            self._changed.notify_all()

    def wait_for(self, predicate: Callable[[Received], bool], timeout: float = 15.0) -> bool:
        """Wait until ``predicate(self)`` holds; False on timeout."""
        with self._changed:
            return self._changed.wait_for(lambda: predicate(self), timeout)

    # ----------------------------------------------------------- reading back

    def metric_points(self, name: str) -> list[tuple[Any, Any]]:
        """Every (metric, data point) received for instrument ``name``, oldest first."""
        out = []
        for request in list(self.metrics):
            for metric in _metrics(request):
                if metric.name == name:
                    data = getattr(metric, metric.WhichOneof("data"))
                    out.extend((metric, point) for point in data.data_points)
        return out

    def metric_names(self) -> set[str]:
        return {metric.name for request in list(self.metrics) for metric in _metrics(request)}

    def resource_attributes(self) -> dict[str, Any]:
        """Resource attributes of the latest metrics request."""
        request = self.metrics[-1]
        return attributes(request.resource_metrics[0].resource.attributes)

    def log_records(self) -> list[tuple[dict[str, Any], Any]]:
        """Every (resource attributes, log record) received."""
        out = []
        for request in list(self.logs):
            for resource_logs in request.resource_logs:
                resource = attributes(resource_logs.resource.attributes)
                for scope_logs in resource_logs.scope_logs:
                    out.extend((resource, record) for record in scope_logs.log_records)
        return out

    def events(self, event_name: str) -> list[Any]:
        return [record for _, record in self.log_records() if record.event_name == event_name]


def _metrics(request: metrics_service_pb2.ExportMetricsServiceRequest) -> Iterator[Any]:
    for resource_metrics in request.resource_metrics:
        for scope_metrics in resource_metrics.scope_metrics:
            yield from scope_metrics.metrics


def value(any_value: AnyValue) -> Any:
    """A protobuf AnyValue as a Python value."""
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [value(v) for v in any_value.array_value.values]
    return getattr(any_value, kind) if kind else None


def attributes(key_values: Any) -> dict[str, Any]:
    return {kv.key: value(kv.value) for kv in key_values}


# ------------------------------------------------------------------ gRPC


class _MetricsServicer(metrics_service_pb2_grpc.MetricsServiceServicer):
    def __init__(self, received: Received) -> None:
        self.received = received

    def Export(self, request, context):  # noqa: N802 - gRPC's method name
        self.received.add(request)
        return metrics_service_pb2.ExportMetricsServiceResponse()


class _LogsServicer(logs_service_pb2_grpc.LogsServiceServicer):
    def __init__(self, received: Received) -> None:
        self.received = received

    def Export(self, request, context):  # noqa: N802 - gRPC's method name
        self.received.add(request)
        return logs_service_pb2.ExportLogsServiceResponse()


class GrpcReceiver:
    """An OTLP/gRPC receiver on loopback (``port`` 0 picks a free one)."""

    def __init__(self, port: int = 0) -> None:
        self.received = Received()
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(_MetricsServicer(self.received), self._server)
        logs_service_pb2_grpc.add_LogsServiceServicer_to_server(_LogsServicer(self.received), self._server)
        self.port = self._server.add_insecure_port(f"127.0.0.1:{port}")
        self._server.start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self._server.stop(grace=None).wait(5)


# ------------------------------------------------------------------ HTTP

_PATHS = {
    "/v1/metrics": (metrics_service_pb2.ExportMetricsServiceRequest, metrics_service_pb2.ExportMetricsServiceResponse),
    "/v1/logs": (logs_service_pb2.ExportLogsServiceRequest, logs_service_pb2.ExportLogsServiceResponse),
}


class _OtlpHandler(BaseHTTPRequestHandler):
    received: Received  # set on the subclass made per receiver
    headers_seen: list[dict[str, str]]

    def do_POST(self) -> None:
        kinds = _PATHS.get(self.path)
        if kinds is None:
            self.send_error(404)
            return
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.headers_seen.append({k.lower(): v for k, v in self.headers.items()})
        encoding = (self.headers.get("Content-Encoding") or "").lower()
        if encoding == "gzip":
            body = gzip.decompress(body)
        elif encoding == "deflate":
            body = zlib.decompress(body)
        if self.headers.get("Content-Type") != "application/x-protobuf":
            self.send_error(415)
            return
        request_type, response_type = kinds
        self.received.add(request_type.FromString(body))
        payload = response_type().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - BaseHTTPRequestHandler's parameter name
        pass


class HttpReceiver:
    """An OTLP/HTTP (protobuf) receiver on loopback."""

    def __init__(self, port: int = 0) -> None:
        self.received = Received()
        self.headers_seen: list[dict[str, str]] = []
        handler = type("Handler", (_OtlpHandler,), {"received": self.received, "headers_seen": self.headers_seen})
        self._server = ThreadingHTTPServer(("127.0.0.1", port), handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)


# ------------------------------------------------------------- failures


class HangingServer:
    """Accepts TCP connections and never answers: a collector that hangs."""

    def __init__(self) -> None:
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        self._held: list[socket.socket] = []
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        self._sock.settimeout(0.1)
        while not self._closed.is_set():
            try:
                conn, _ = self._sock.accept()
            except (TimeoutError, OSError):
                continue
            self._held.append(conn)

    def close(self) -> None:
        self._closed.set()
        self._thread.join(5)
        for conn in self._held:
            conn.close()
        self._sock.close()


def free_port() -> int:
    """A loopback port with no listener (connections are refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until(predicate: Callable[[], bool], timeout: float = 15.0, step: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()
