"""``POST /v1/metrics``: OTLP/HTTP ingest (protobuf or OTLP/JSON, gzip or deflate as the SDK exporters send it).

The route only does the HTTP part: the content type says the encoding
(``application/x-protobuf`` or ``application/json``; anything else is 415),
``Content-Encoding`` is undone within the same ``max_body_bytes`` limit as
every other POST — measured on the *decompressed* bytes, so a gzip bomb is a
413 after at most that many bytes, not a daemon out of memory —, and an
undecodable body is a 400 naming what failed. The decoding and the mapping are
the receive stage's; the answer is the ``ExportMetricsServiceResponse`` an
OTLP receiver gives, in the request's encoding, with ``partial_success`` when
some points were rejected. The token (:mod:`.auth`) and the refused-request
counter (:mod:`.metrics_routes`) cover this route like the other ingest POSTs.
"""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING

from flask import Flask, Request, Response, request

from ..receive import JSON, PROTOBUF, UndecodableRequest, encode_response, parse_request, response
from .body import raw_body
from .errors import ApiError, too_large

if TYPE_CHECKING:
    from .app import ApiBackend

#: Content types of OTLP/HTTP (``application/protobuf`` is what some senders write for the same thing).
ENCODING_BY_TYPE = {"application/x-protobuf": PROTOBUF, "application/protobuf": PROTOBUF, "application/json": JSON}
#: zlib window bits for each Content-Encoding OTLP exporters use (gzip; deflate is zlib-wrapped, as Python sends it).
WINDOW_BITS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


def register_otlp_routes(app: Flask, backend: ApiBackend, max_body_bytes: int) -> None:
    """Add ``POST /v1/metrics`` (``GET /v1/metrics`` stays the Datadog-style JSON of :mod:`.metrics_routes`)."""

    @app.post("/v1/metrics")
    def receive_otlp_metrics() -> Response:
        encoding = request_encoding(request)
        raw = decompressed(request, raw_body(request, max_body_bytes), max_body_bytes)
        try:
            otlp_request = parse_request(raw, encoding)
        except UndecodableRequest as exc:
            raise ApiError(400, str(exc)) from None
        decoded = backend.ingest_otlp(otlp_request)
        answer = response(decoded.rejected, decoded.error_message)
        return Response(encode_response(answer, encoding), status=200, content_type=encoding)


def request_encoding(req: Request) -> str:
    """The OTLP encoding the Content-Type names, or a 415 listing the two there are."""
    encoding = ENCODING_BY_TYPE.get(req.mimetype)
    if encoding is None:
        shown = repr(req.mimetype) if req.mimetype else "none"
        raise ApiError(
            415,
            f"unsupported content type {shown} for OTLP; send {PROTOBUF} (OTLP/HTTP protobuf) or {JSON} (OTLP/JSON)",
            "Content-Type",
        )
    return encoding


def decompressed(req: Request, raw: bytes, max_body_bytes: int) -> bytes:
    """The body with its Content-Encoding undone, never more than ``max_body_bytes`` of it (413 past that)."""
    name = (req.headers.get("Content-Encoding") or "identity").strip().lower()
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
