"""Reading a request: size limits, content types, JSON, text, and query context.

Content types: ``application/json`` (or any ``+json`` type) is JSON; a request
without ``Content-Type`` is read as JSON too, because ``curl --data`` users
often send none (curl's own default, ``application/x-www-form-urlencoded``,
is refused with a hint). ``text/plain`` (UTF-8) is log text, accepted only by
the endpoints and adapters that read logs. Anything else is 415.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from flask import Request

from .errors import ApiError, too_large

JSON_HINT = "send application/json (curl: -H 'Content-Type: application/json')"
_NUMBER = re.compile(r"^-?\d+(\.\d+)?([eE][-+]?\d+)?$")


@dataclass(frozen=True, slots=True)
class Body:
    """A request body: parsed JSON (``kind == "json"``) or decoded text (``"text"``)."""

    kind: str
    value: Any


def read_body(request: Request, max_body_bytes: int, text_ok: bool = False, hint: str = JSON_HINT) -> Body:
    """The request's body, or an ApiError: 415 wrong type, 413 too big, 400 unreadable."""
    kind = _kind(request.mimetype, text_ok, hint)
    raw = raw_body(request, max_body_bytes)
    if kind == "text":
        try:
            return Body("text", raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise ApiError(400, f"body is not valid UTF-8 text: {exc.reason} at byte {exc.start}") from None
    return Body("json", parse_json(raw))


def parse_json(raw: bytes) -> Any:
    """JSON as Python's ``json`` writes it; malformed, non-UTF-8 or too deep is a 400.

    ``NaN``, ``Infinity`` and ``-Infinity`` are read as floats: a diverged loss
    is what ``json.dumps`` writes for it, and it is data. Validation then
    accepts them where the contract does (``loss``, ``grad_norm``) and answers
    a 400 naming any other field that holds one.
    """
    try:
        return json.loads(raw)
    except RecursionError:
        raise ApiError(400, "malformed JSON: nested too deeply") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise ApiError(400, f"malformed JSON: {exc}") from None


def query_context(request: Request, reserved: tuple[str, ...] = ("name",)) -> dict[str, Any]:
    """Query parameters other than ``reserved``, numbers parsed (``?world_size=64&model_name=x``)."""
    out: dict[str, Any] = {}
    for key, value in request.args.items():
        if key in reserved:
            continue
        out[key] = _number_or_text(value)
    return out


def _number_or_text(value: str) -> Any:
    if not _NUMBER.match(value):
        return value
    try:
        return int(value) if value.lstrip("-").isdigit() else float(value)
    except ValueError:  # more digits than Python converts; validation names it later
        return value


def _kind(mimetype: str, text_ok: bool, hint: str) -> str:
    if not mimetype or mimetype == "application/json" or mimetype.endswith("+json"):
        return "json"
    if mimetype == "text/plain" and text_ok:
        return "text"
    raise ApiError(415, f"unsupported content type {mimetype!r}; {hint}", "Content-Type")


def raw_body(request: Request, max_body_bytes: int) -> bytes:
    """The body's bytes, or a 413 when it is larger than ``max_body_bytes``."""
    if request.content_length is not None and request.content_length > max_body_bytes:
        raise too_large(max_body_bytes)
    raw = request.get_data(cache=False)
    if len(raw) > max_body_bytes:
        raise too_large(max_body_bytes)
    return raw
