"""The Flask app factory for the TrainPulse JSON API.

The app depends on the :class:`ApiBackend` protocol (the engine fits it),
never on collectors or detectors. Every error is JSON (see :mod:`.errors`);
input is read by :mod:`.body`; framework payloads go through the adapters it
is handed (the composition root passes the installed ones).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from flask import Flask, Response, jsonify, request
from werkzeug.routing import Rule as UrlRule

from ..adapters import Adapter, Translation
from ..publish.snapshot import Snapshot, history_to_dict
from ..samples import (
    DEFAULT_MAX_RANKS,
    Frame,
    NodeReport,
    Rule,
    SampleError,
    TrainingSample,
    check_value,
    parse_training,
    to_dict,
    type_name,
)
from ..telemetry.exporters import Exports
from ..telemetry.operational import OperationalMetrics
from ..version import __version__
from .auth import require_bearer_token
from .body import JSON_HINT, Body, query_context, read_body
from .errors import ApiError, register_error_handlers
from .metrics_routes import register_metrics_routes
from .otlp_ingest import PATHS, OtlpIngest
from .report_route import register_report_route

if TYPE_CHECKING:
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest

    from ..receive import Decoded, DecodedLogs

log = logging.getLogger(__name__)

#: ``/v1/history`` query parameters: ``since`` (unix seconds) and ``limit`` (how many of the newest frames).
UNIX_SECONDS = Rule("float", 0)
FRAME_COUNT = Rule("int", 0)


class ApiBackend(Protocol):
    """Everything the API's routes use from the engine.

    ``exports``: the pull endpoints' readers (``/metrics``, ``/v1/metrics``);
    ``ops``: the daemon's own counters (accepted and refused ingest).
    """

    mode: str
    exports: Exports
    ops: OperationalMetrics

    def snapshot(self) -> Snapshot: ...

    def history(self, since: float | None = None, limit: int | None = None) -> Sequence[Frame]: ...

    def liveness(self) -> dict[str, Any]: ...

    def run_series(self) -> Any: ...

    def ingest(self, sample: TrainingSample, source: str = "rest") -> None: ...

    def ingest_nodes(self, reports: Sequence[NodeReport]) -> None: ...

    def ingest_otlp(self, request: ExportMetricsServiceRequest) -> Decoded: ...

    def ingest_otlp_logs(self, request: ExportLogsServiceRequest) -> DecodedLogs: ...


def create_app(
    backend: ApiBackend,
    adapters: Mapping[str, Adapter],
    max_body_bytes: int = 1 << 20,
    max_ranks: int = DEFAULT_MAX_RANKS,
    auth_token: str | None = None,
    auth_scope: str = "ingest",
) -> Flask:
    """Build the app serving ``backend``, translating framework payloads with ``adapters``.

    With ``auth_token``, ingest (or, with ``auth_scope="all"``, every endpoint)
    requires ``Authorization: Bearer <auth_token>``.
    """
    app = Flask("trainpulse_otel.api")
    app.json.sort_keys = False  # type: ignore[attr-defined]
    app.config["MAX_CONTENT_LENGTH"] = max_body_bytes
    known = dict(adapters)
    register_error_handlers(app, max_body_bytes)
    if auth_token:
        require_bearer_token(app, auth_token, auth_scope)

    @app.get("/healthz")
    def healthz() -> tuple[Response, int]:
        live = backend.liveness()
        stalled = live.pop("stalled", False)
        body = jsonify(status="stalled" if stalled else "ok", mode=backend.mode, version=__version__, **live)
        return body, 503 if stalled else 200

    @app.get("/v1/snapshot")
    def snapshot() -> Response:
        return jsonify(backend.snapshot().to_dict())

    @app.get("/v1/history")
    def history() -> Response:
        since = _query_number("since", UNIX_SECONDS)
        limit = _query_number("limit", FRAME_COUNT)
        return jsonify(history_to_dict(backend.history(since, limit)))

    @app.post("/v1/training")
    def ingest_training() -> tuple[Response, int]:
        data = read_body(request, max_body_bytes).value
        backend.ingest(_validated(lambda: parse_training(data, max_ranks=max_ranks)))
        return jsonify(status="accepted"), 202

    @app.post("/v1/framework")
    def ingest_framework() -> tuple[Response, int]:
        adapter = _adapter(known, request.args.get("name"))
        hint = JSON_HINT + (", or text/plain log text" if adapter.translate_text else "")
        body = read_body(request, max_body_bytes, text_ok=adapter.translate_text is not None, hint=hint)
        translation = _translate(adapter, body, query_context(request))
        sample = _validated(lambda: translation.sample(max_ranks))
        backend.ingest(sample, source="framework")
        return jsonify(_accepted(adapter, translation, sample)), 202

    register_metrics_routes(app, backend)
    register_report_route(app, backend)
    # POST /v1/metrics and /v1/logs are answered in front of Flask (see .otlp_ingest); their rules stay in the map,
    # with no view (never dispatched), so that a 405 or an OPTIONS there lists POST among the methods it takes.
    for path in PATHS:
        app.url_map.add(UrlRule(path, methods=["POST"], endpoint=f"otlp_ingest{path}"))
    app.wsgi_app = OtlpIngest(app.wsgi_app, backend, max_body_bytes, auth_token)  # type: ignore[method-assign]
    return app


def _query_number(name: str, rule: Rule) -> Any:
    """The query parameter ``name`` checked against ``rule``; None when absent; a 400 naming it when bad."""
    text = request.args.get(name)
    if text is None:
        return None
    try:
        value: float = int(text) if rule.kind == "int" else float(text)
    except ValueError:
        kind = "an integer" if rule.kind == "int" else "a number"
        raise ApiError(400, f"{name}: must be {kind}, got {text!r}", name) from None
    try:
        return check_value(name, value, rule)
    except SampleError as exc:
        raise ApiError.from_sample_error(exc) from None


def _adapter(known: Mapping[str, Adapter], name: str | None) -> Adapter:
    names = sorted(known)
    if not name:
        raise ApiError(
            400, f"query parameter 'name' is required; known adapters: {', '.join(names)}", "name", known=names
        )
    if name not in known:
        raise ApiError(400, f"unknown adapter {name!r}; known adapters: {', '.join(names)}", "name", known=names)
    return known[name]


def _translate(adapter: Adapter, body: Body, context: dict[str, Any]) -> Translation:
    """Run the adapter; its own errors are the client's 400, and so is a plugin's bug."""
    try:
        if body.kind == "text":
            result = adapter.translate_text(body.value, context)  # type: ignore[misc]
        else:
            result = adapter.translate({**context, **_json_object(body.value)})
    except SampleError as exc:
        raise ApiError.from_sample_error(exc) from None
    except Exception as exc:  # a plugin bug must not become a 500
        log.exception("adapter %r failed on a %s payload", adapter.name, body.kind)
        detail = f"{type(exc).__name__}: {exc}"[:300]
        raise ApiError(400, f"adapter {adapter.name!r} could not read this payload ({detail})") from None
    if isinstance(result, Translation):
        return result
    if isinstance(result, Mapping):
        return Translation(dict(result))
    log.error("adapter %r returned %s, not a Translation", adapter.name, type(result).__name__)
    raise ApiError(400, f"adapter {adapter.name!r} returned no training payload")


def _json_object(value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise SampleError("", f"body must be a JSON object, got {type_name(value)}")
    return value


def _validated(parse: Callable[[], TrainingSample]) -> TrainingSample:
    try:
        return parse()
    except SampleError as exc:
        raise ApiError.from_sample_error(exc) from None


def _accepted(adapter: Adapter, translation: Translation, sample: TrainingSample) -> dict[str, Any]:
    values = to_dict(sample)
    return {
        "status": "accepted",
        "adapter": adapter.name,
        "fields": [k for k, v in values.items() if v != []],
        "sample": values,
        "mapped": dict(translation.mapped),
        "ignored": list(translation.ignored),
        "notes": list(translation.notes),
    }
