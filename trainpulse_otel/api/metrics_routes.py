"""Metrics routes: ``GET /metrics`` (Prometheus), ``GET /v1/metrics`` (Datadog-style JSON),
and the count of refused ingest requests.

Both read the backend's ``exports`` (readers on the engine's MeterProvider),
so they show the same instruments as OTLP and the diagnosis. With
``prometheus.enabled`` false ``/metrics`` answers 404 with a reason.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from flask import Blueprint, Flask, Response, jsonify, request

from .auth import INGEST_PATHS

if TYPE_CHECKING:
    from .app import ApiBackend


_REASONS_BY_STATUS = {
    401: "unauthorized",
    403: "unauthorized",
    413: "too_large",
    415: "unsupported_media_type",
    429: "rate_limited",
}


def rejection_reason(status: int, field: str | None) -> str:
    """The ``reason`` attribute for a refused ingest request."""
    if status == 400:
        return "invalid_field" if field else "malformed"
    if status >= 500:
        return "server_error"
    return _REASONS_BY_STATUS.get(status, "client_error")


def register_metrics_routes(app: Flask, backend: ApiBackend) -> None:
    """Add the metrics routes and the refused-ingest counter to ``app``."""
    routes = Blueprint("metrics", __name__)

    @routes.before_app_request
    def record_pending_operational_metrics() -> None:
        # reports accepted since the last tick show up in this read; not on an OTLP export (POST /v1/metrics,
        # 64 a second at a 64-node job daemon), whose counts wait for the tick like the ingest counts do
        if request.method == "GET" and request.path in ("/metrics", "/v1/metrics"):
            backend.ops.flush()

    @routes.get("/metrics")
    def prometheus_metrics() -> Response | tuple[Response, int]:
        prometheus = backend.exports.prometheus
        if prometheus is None:
            return jsonify(error="Prometheus exposition is disabled (prometheus.enabled is false)", field=None), 404
        return Response(prometheus.render(), content_type=prometheus.content_type)

    @routes.get("/v1/metrics")
    def datadog_metrics() -> Response:
        return jsonify(backend.exports.datadog.render())

    @routes.after_app_request
    def count_refused_ingest(response: Response) -> Response:
        if request.method == "POST" and request.path in INGEST_PATHS and response.status_code >= 400:
            body = response.get_json(silent=True) if response.is_json else None
            backend.ops.rejected(rejection_reason(response.status_code, (body or {}).get("field")))
        return response

    app.register_blueprint(routes)
