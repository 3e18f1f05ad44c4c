"""The OTLP/gRPC receiver on ``-otlp-grpc-addr``: ``MetricsService/Export`` and ``LogsService/Export``, with the
same decode and token as OTLP/HTTP.

Off by default (OTLP/HTTP is always on ``POST /v1/metrics`` and ``/v1/logs``). grpcio comes
with the OTLP gRPC exporter TrainPulse already depends on. The server runs
in its own small thread pool beside waitress and hands each request to the
backend exactly as the HTTP route does; with an ``auth_token`` the call must
carry ``authorization: Bearer <token>`` metadata (the OTel SDK sends it from
``OTEL_EXPORTER_OTLP_HEADERS``). Messages over ``max_body_bytes``
(decompressed) are refused by gRPC itself with ``RESOURCE_EXHAUSTED``.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import grpc
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.logs.v1.logs_service_pb2_grpc import (
    LogsServiceServicer,
    add_LogsServiceServicer_to_server,
)
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2_grpc import (
    MetricsServiceServicer,
    add_MetricsServiceServicer_to_server,
)

from ..receive import logs_response, response
from .auth import token_matches

if TYPE_CHECKING:
    from .app import ApiBackend

log = logging.getLogger(__name__)

#: How long stopping waits for calls in flight (SIGTERM must end promptly).
STOP_GRACE_S = 2.0


class MetricsReceiver(MetricsServiceServicer):
    """``Export``: check the token, hand the request to the backend, answer with its partial success."""

    def __init__(self, backend: ApiBackend, auth_token: str | None) -> None:
        self.backend = backend
        self.expected = auth_token.encode("utf-8") if auth_token else None

    def Export(  # noqa: N802 (the generated service's method name)
        self, request: ExportMetricsServiceRequest, context: grpc.ServicerContext
    ) -> ExportMetricsServiceResponse:
        _check_token(self.backend, self.expected, context)
        decoded = self.backend.ingest_otlp(request)
        return response(decoded.rejected, decoded.error_message)


class LogsReceiver(LogsServiceServicer):
    """``Export`` of logs: check the token, hand the records to the backend's log reader, answer as metrics do."""

    def __init__(self, backend: ApiBackend, auth_token: str | None) -> None:
        self.backend = backend
        self.expected = auth_token.encode("utf-8") if auth_token else None

    def Export(  # noqa: N802 (the generated service's method name)
        self, request: ExportLogsServiceRequest, context: grpc.ServicerContext
    ) -> ExportLogsServiceResponse:
        _check_token(self.backend, self.expected, context)
        decoded = self.backend.ingest_otlp_logs(request)
        return logs_response(decoded.rejected, decoded.error_message)


def _check_token(backend: ApiBackend, expected: bytes | None, context: grpc.ServicerContext) -> None:
    """Abort the call, UNAUTHENTICATED, unless it carries the token (when there is one)."""
    if expected is not None and not token_matches(_authorization(context), expected):
        backend.ops.rejected("unauthorized")
        context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or invalid bearer token (authorization metadata)")


def _authorization(context: grpc.ServicerContext) -> str:
    for key, value in context.invocation_metadata():
        if key == "authorization":
            return value if isinstance(value, str) else value.decode("utf-8", "surrogateescape")
    return ""


class OtlpGrpcServer:
    """A gRPC server for OTLP metrics and logs on ``addr`` (``HOST:PORT``; port 0 picks one)."""

    def __init__(
        self, backend: ApiBackend, addr: str, auth_token: str | None, max_message_bytes: int, threads: int = 4
    ) -> None:
        pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="trainpulse-otlp-grpc")
        options = [("grpc.max_receive_message_length", max_message_bytes)]
        self._server = grpc.server(pool, options=options, maximum_concurrent_rpcs=threads * 16)
        add_MetricsServiceServicer_to_server(MetricsReceiver(backend, auth_token), self._server)
        add_LogsServiceServicer_to_server(LogsReceiver(backend, auth_token), self._server)
        self.host = addr.rpartition(":")[0]
        self.port = self._server.add_insecure_port(addr)  # RuntimeError when it cannot bind

    def start(self) -> None:
        self._server.start()
        log.info("OTLP/gRPC receiver listening on %s:%d", self.host, self.port)

    def close(self) -> None:
        """Stop accepting, give calls in flight :data:`STOP_GRACE_S`, then end."""
        self._server.stop(STOP_GRACE_S).wait(STOP_GRACE_S + 1.0)
