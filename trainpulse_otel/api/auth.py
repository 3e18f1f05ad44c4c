"""Bearer-token authentication for the API.

With ``auth_token`` set, ingest (``POST /v1/training``, ``POST /v1/framework``,
OTLP's ``POST /v1/metrics`` and ``POST /v1/logs``, and the gRPC receiver's ``authorization`` metadata)
requires ``Authorization: Bearer <token>``; with ``auth_scope`` ``all``, every
endpoint does (``OPTIONS`` never: it answers only what a path allows). Tokens are compared in constant time and never logged.
"""

from __future__ import annotations

import hmac

from flask import Flask, request

from .errors import ApiError

#: POST only: GET /v1/metrics is a read.
INGEST_PATHS = frozenset({"/v1/training", "/v1/framework", "/v1/metrics", "/v1/logs"})
SCOPES = ("ingest", "all")


def require_bearer_token(app: Flask, token: str, scope: str = "ingest") -> None:
    """Refuse requests in ``scope`` that lack the token, with a JSON 401."""
    expected = token.encode("utf-8")

    @app.before_request
    def check_token() -> None:
        if request.method == "OPTIONS":  # what a path allows is no secret; browsers ask it without credentials
            return
        if scope != "all" and not (request.method == "POST" and request.path in INGEST_PATHS):
            return
        if not token_matches(request.headers.get("Authorization", ""), expected):
            raise ApiError(401, "missing or invalid bearer token", "Authorization")


def token_matches(header: str, expected: bytes) -> bool:
    """Whether an ``Authorization`` header (or gRPC metadata value) presents the token, in constant time."""
    scheme, _, presented = header.partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(presented.strip().encode("utf-8", "surrogateescape"), expected)
