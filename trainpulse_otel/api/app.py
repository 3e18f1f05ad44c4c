"""The Flask app factory for the TrainPulse JSON API.

The app depends on a small :class:`ApiBackend` protocol (the engine fits it),
never on collectors or detectors.
"""

from __future__ import annotations

from typing import Any, Protocol

import json
from typing import Callable

from flask import Flask, jsonify, request
from werkzeug.exceptions import HTTPException

from .. import __version__
from ..samples import DEFAULT_MAX_RANKS, SampleError, TrainingSample, parse_training
from .metrics_routes import register_metrics_routes


class ApiBackend(Protocol):
    """What the API needs from the engine."""

    mode: str

    def snapshot(self) -> dict[str, Any]: ...

    def ingest(self, sample: TrainingSample) -> TrainingSample: ...


class BadRequest(Exception):
    """A client error answered as JSON ``{"error", "field"}`` with ``status``."""

    def __init__(self, status: int, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.field = status, message, field


def create_app(
    backend: ApiBackend,
    max_body_bytes: int = 1 << 20,
    max_ranks: int = DEFAULT_MAX_RANKS,
) -> Flask:
    """Build the app serving ``backend``."""
    app = Flask("trainpulse_otel.api")
    app.json.sort_keys = False  # type: ignore[attr-defined]
    app.config["MAX_CONTENT_LENGTH"] = max_body_bytes

    @app.post("/v1/training")
    def ingest_training():  # noqa: ANN202
        sample = _validated(lambda data: parse_training(data, max_ranks=max_ranks), _json_body(max_body_bytes))
        backend.ingest(sample)
        return jsonify(status="accepted"), 202

    @app.errorhandler(BadRequest)
    def bad_request(exc: BadRequest):  # noqa: ANN202
        return jsonify(error=exc.message, field=exc.field), exc.status

    @app.get("/healthz")
    def healthz():  # noqa: ANN202
        return jsonify(status="ok", mode=backend.mode, version=__version__)

    @app.get("/v1/snapshot")
    def snapshot():  # noqa: ANN202
        return jsonify(backend.snapshot())

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException):  # noqa: ANN202
        if exc.code == 413:
            return jsonify(error=f"request body is larger than {max_body_bytes} bytes", field=None), 413
        return jsonify(error=exc.description or exc.name, field=None), exc.code

    register_metrics_routes(app, backend)
    return app


def _json_body(max_body_bytes: int) -> object:
    """The request's JSON body, or a BadRequest (415 wrong type, 413 too big, 400 malformed)."""
    mimetype = request.mimetype
    if mimetype and mimetype != "application/json" and not mimetype.endswith("+json"):
        raise BadRequest(415, f"unsupported content type {mimetype!r}; send application/json")
    if request.content_length is not None and request.content_length > max_body_bytes:
        raise BadRequest(413, f"request body is larger than {max_body_bytes} bytes")
    raw = request.get_data(cache=False)
    if len(raw) > max_body_bytes:
        raise BadRequest(413, f"request body is larger than {max_body_bytes} bytes")
    try:
        return json.loads(raw, parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError) as exc:
        raise BadRequest(400, f"malformed JSON: {exc}") from None
    except RecursionError:
        raise BadRequest(400, "malformed JSON: nested too deeply") from None


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not a valid number")


def _validated(parse: Callable[[object], TrainingSample], data: object) -> TrainingSample:
    try:
        return parse(data)
    except SampleError as exc:
        raise BadRequest(400, str(exc) if exc.field else exc.message, exc.field or None) from None
