"""The Flask app factory for the TrainPulse JSON API.

The app depends on a small :class:`ApiBackend` protocol (the engine fits it),
never on collectors or detectors.
"""

from __future__ import annotations

from typing import Any, Protocol

from flask import Flask, jsonify
from werkzeug.exceptions import HTTPException

from .. import __version__
from ..samples import TrainingSample


class ApiBackend(Protocol):
    """What the API needs from the engine."""

    mode: str

    def snapshot(self) -> dict[str, Any]: ...

    def ingest(self, sample: TrainingSample) -> TrainingSample: ...


def create_app(backend: ApiBackend) -> Flask:
    """Build the app serving ``backend``."""
    app = Flask("trainpulse_otel.api")
    app.json.sort_keys = False  # type: ignore[attr-defined]

    @app.get("/healthz")
    def healthz():  # noqa: ANN202
        return jsonify(status="ok", mode=backend.mode, version=__version__)

    @app.get("/v1/snapshot")
    def snapshot():  # noqa: ANN202
        return jsonify(backend.snapshot())

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException):  # noqa: ANN202
        return jsonify(error=exc.description or exc.name, field=None), exc.code

    return app
