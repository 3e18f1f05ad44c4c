"""JSON errors for every path: client errors name the field; anything unexpected is a logged 500.

Every answer the API gives on failure is ``{"error": str, "field": str|null, ...}``
with ``Content-Type: application/json`` — Flask's own 404/405/413, our 4xx, and
(as a last resort, which no client input should reach) a 500.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from flask import Flask, Response, jsonify, request
from werkzeug.exceptions import HTTPException

from ..samples import SampleError

log = logging.getLogger(__name__)


class ApiError(Exception):
    """A client error answered as JSON ``{"error", "field", **extra}`` with ``status``."""

    def __init__(self, status: int, message: str, field: str | None = None, **extra: Any) -> None:
        super().__init__(message)
        self.status, self.message, self.field, self.extra = status, message, field, extra

    @classmethod
    def from_sample_error(cls, exc: SampleError) -> ApiError:
        return cls(400, str(exc) if exc.field else exc.message, exc.field or None)


def too_large(max_body_bytes: int) -> ApiError:
    return ApiError(413, f"request body is larger than {max_body_bytes} bytes")


#: What a 401 answers besides its body: how to authenticate.
CHALLENGE = ("WWW-Authenticate", 'Bearer realm="trainpulse"')


def error_headers(status: int) -> list[tuple[str, str]]:
    """The headers of an error answer outside Flask (the OTLP ingest handler): JSON, and a 401's challenge."""
    return [("Content-Type", "application/json"), *([CHALLENGE] if status == 401 else [])]


def error_body(exc: ApiError) -> bytes:
    """An error's JSON body outside Flask, as the app's ``jsonify`` writes it."""
    return (json.dumps({"error": exc.message, "field": exc.field, **exc.extra}, separators=(",", ":")) + "\n").encode()


def error_response(status: int, message: str, field: str | None = None, **extra: Any) -> Response:
    response = jsonify(error=message, field=field, **extra)
    response.status_code = status
    return response


def register_error_handlers(app: Flask, max_body_bytes: int) -> None:
    """Install the JSON handlers on ``app``."""

    @app.errorhandler(ApiError)
    def api_error(exc: ApiError) -> Response:
        response = error_response(exc.status, exc.message, exc.field, **exc.extra)
        if exc.status == 401:
            response.headers[CHALLENGE[0]] = CHALLENGE[1]
        return response

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException) -> Response:
        if exc.code == 413:
            return error_response(413, too_large(max_body_bytes).message)
        response = error_response(exc.code or 500, exc.description or exc.name)
        if exc.code == 405 and getattr(exc, "valid_methods", None):
            response.headers["Allow"] = ", ".join(exc.valid_methods)  # type: ignore[attr-defined]
        return response

    @app.errorhandler(Exception)
    def unexpected(exc: Exception) -> Response:
        log.error("unexpected error serving %s %s", request.method, request.path, exc_info=exc)
        return error_response(500, "internal error; the daemon's log has the details")
