"""``POST /v1/metrics`` and ``POST /v1/logs``: OTLP/HTTP ingest (protobuf or OTLP/JSON, gzip or deflate as the SDK
exporters and the Collector send it).

The handler does the HTTP part only: the content type says the encoding
(``application/x-protobuf`` or ``application/json``; anything else is 415),
``Content-Encoding`` is undone within the same ``max_body_bytes`` limit as
every other POST — measured on the *decompressed* bytes, so a gzip bomb is a
413 after at most that many bytes —, and an undecodable body is a 400 naming
what failed — the same for both paths. Decoding and mapping are the receive
stage's; the answer is the ``ExportMetricsServiceResponse`` (or
``ExportLogsServiceResponse``) an OTLP receiver gives, in the request's
encoding, with ``partial_success`` when some points (records) were rejected.

It is a plain WSGI handler in front of the Flask app (:class:`OtlpIngest`
wraps ``app.wsgi_app``), not Flask routes, because Flask's request machinery
costs a job daemon taking one export per node a second a large share of each
(docs/performance.md). It keeps the API's contract with the parts the Flask
routes use — the token check (:mod:`.auth`), the JSON error shape
(:mod:`.errors`), the refused-request counter (:mod:`.metrics_routes`) — and
hands every other method and path on to Flask.
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Callable, Iterable
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from ..receive import (
    JSON,
    PROTOBUF,
    UndecodableRequest,
    encode_response,
    logs_response,
    parse_logs_request,
    parse_request,
    response,
)
from .auth import token_matches
from .errors import ApiError, error_body, error_headers, too_large
from .metrics_routes import rejection_reason

if TYPE_CHECKING:
    from .app import ApiBackend

log = logging.getLogger(__name__)

PATH, LOGS_PATH = "/v1/metrics", "/v1/logs"
#: The paths answered here (the API's others are Flask's).
PATHS = (PATH, LOGS_PATH)
#: Content types of OTLP/HTTP (``application/protobuf`` is what some senders write for the same thing).
ENCODING_BY_TYPE = {"application/x-protobuf": PROTOBUF, "application/protobuf": PROTOBUF, "application/json": JSON}
#: zlib window bits for each Content-Encoding OTLP exporters use (gzip; deflate is zlib-wrapped, as Python sends it).
WINDOW_BITS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}

Environ = dict[str, Any]
StartResponse = Callable[..., Any]
WsgiApp = Callable[[Environ, StartResponse], Iterable[bytes]]


class OtlpIngest:
    """WSGI middleware answering ``POST /v1/metrics`` and ``POST /v1/logs`` itself, handing everything else to
    ``app``."""

    def __init__(self, app: WsgiApp, backend: ApiBackend, max_body_bytes: int, auth_token: str | None) -> None:
        self.app = app
        self.backend = backend
        self.max_body_bytes = max_body_bytes
        self.expected = auth_token.encode("utf-8") if auth_token else None  # OTLP ingest is ingest: any scope
        self.routes: dict[str, Callable[[bytes, str], bytes]] = {PATH: self.metrics, LOGS_PATH: self.logs}

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO")
        if environ.get("REQUEST_METHOD") != "POST" or path not in self.routes:
            return self.app(environ, start_response)
        try:
            encoding, body = self.receive(environ, self.routes[path])
            status, headers = 200, [("Content-Type", encoding)]
        except ApiError as exc:
            self.backend.ops.rejected(rejection_reason(exc.status, exc.field))
            status, headers, body = exc.status, error_headers(exc.status), error_body(exc)
        except Exception:  # no client input should reach this: a logged 500 in the API's error shape
            log.exception("unexpected error serving POST %s", path)
            self.backend.ops.rejected(rejection_reason(500, None))
            failure = ApiError(500, "internal error; the daemon's log has the details")
            status, headers, body = 500, error_headers(500), error_body(failure)
        headers.append(("Content-Length", str(len(body))))
        start_response(f"{status} {HTTPStatus(status).phrase}", headers)
        return [body]

    def receive(self, environ: Environ, take: Callable[[bytes, str], bytes]) -> tuple[str, bytes]:
        """Take one export with ``take``: its encoding and the answer, or an ApiError saying what is wrong."""
        if self.expected is not None and not token_matches(environ.get("HTTP_AUTHORIZATION", ""), self.expected):
            raise ApiError(401, "missing or invalid bearer token", "Authorization")
        encoding = request_encoding(environ.get("CONTENT_TYPE", ""))
        raw = decompressed(environ.get("HTTP_CONTENT_ENCODING"), self._body(environ), self.max_body_bytes)
        try:
            return encoding, take(raw, encoding)
        except UndecodableRequest as exc:
            raise ApiError(400, str(exc)) from None

    def metrics(self, raw: bytes, encoding: str) -> bytes:
        """An ``ExportMetricsServiceRequest`` into the job view; its answer, encoded."""
        decoded = self.backend.ingest_otlp(parse_request(raw, encoding))
        return encode_response(response(decoded.rejected, decoded.error_message), encoding)

    def logs(self, raw: bytes, encoding: str) -> bytes:
        """An ``ExportLogsServiceRequest`` into the log reader; its answer, encoded."""
        decoded = self.backend.ingest_otlp_logs(parse_logs_request(raw, encoding))
        return encode_response(logs_response(decoded.rejected, decoded.error_message), encoding)

    def _body(self, environ: Environ) -> bytes:
        """The body's bytes, or a 413 when it is larger than the limit (waitress hands a terminated input)."""
        try:
            length = int(environ.get("CONTENT_LENGTH") or -1)
        except ValueError:
            raise ApiError(400, "Content-Length is not a number of bytes", "Content-Length") from None
        if length > self.max_body_bytes:
            raise too_large(self.max_body_bytes)
        raw = environ["wsgi.input"].read(length if length >= 0 else self.max_body_bytes + 1)
        if len(raw) > self.max_body_bytes:
            raise too_large(self.max_body_bytes)
        return raw


def request_encoding(content_type: str) -> str:
    """The OTLP encoding a Content-Type names, or a 415 listing the two there are."""
    mimetype = content_type.partition(";")[0].strip().lower()
    encoding = ENCODING_BY_TYPE.get(mimetype)
    if encoding is None:
        shown = repr(mimetype) if mimetype else "none"
        raise ApiError(
            415,
            f"unsupported content type {shown} for OTLP; send {PROTOBUF} (OTLP/HTTP protobuf) or {JSON} (OTLP/JSON)",
            "Content-Type",
        )
    return encoding


def decompressed(content_encoding: str | None, raw: bytes, max_body_bytes: int) -> bytes:
    """The body with its Content-Encoding undone, never more than ``max_body_bytes`` of it (413 past that)."""
    name = (content_encoding or "identity").strip().lower()
    if name == "identity":
        return raw
    bits = WINDOW_BITS.get(name)
    if bits is None:
        raise ApiError(415, f"unsupported Content-Encoding {name!r}; send gzip, deflate or none", "Content-Encoding")
    inflater = zlib.decompressobj(bits)
    try:
        body = inflater.decompress(raw, max_body_bytes + 1)
    except zlib.error as exc:
        raise ApiError(400, f"body is not valid {name} data: {exc}", "Content-Encoding") from None
    if len(body) > max_body_bytes:
        raise ApiError(413, f"{too_large(max_body_bytes).message} once decompressed ({name})")
    if not inflater.eof:
        raise ApiError(400, f"{name} body is truncated", "Content-Encoding")
    return body
