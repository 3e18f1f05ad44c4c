"""Parsers of settings values: each takes what a config file, the environment or a flag gave and returns the
typed value, or raises ValueError saying what was expected (the caller names the key).

A leaf beside :mod:`.durations`: settings and :mod:`.server_limits` read it before any part exists.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from .durations import format_duration, parse_duration


def duration(minimum: float) -> Callable[[Any], float]:
    def parse(value: Any) -> float:
        if isinstance(value, bool):
            raise ValueError(f"must be a duration like 1s, got {value!r}")
        seconds = float(value) if isinstance(value, (int, float)) else parse_duration(str(value))
        if not math.isfinite(seconds) or seconds < minimum:
            raise ValueError(f"must be at least {format_duration(minimum)}, got {value!r}")
        return seconds

    return parse


def integer(minimum: int, maximum: int) -> Callable[[Any], int]:
    def parse(value: Any) -> int:
        if isinstance(value, bool):
            raise ValueError(f"must be an integer, got {value!r}")
        try:
            number = int(value) if not isinstance(value, float) or value.is_integer() else None
        except (TypeError, ValueError):
            number = None
        if number is None:
            raise ValueError(f"must be an integer, got {value!r}")
        if not minimum <= number <= maximum:
            raise ValueError(f"must be between {minimum} and {maximum}, got {number}")
        return number

    return parse


def choice(*choices: str) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        word = str(value).strip().lower()
        if word not in choices:
            raise ValueError(f"must be one of {', '.join(choices)}; got {value!r}")
        return word

    return parse


def text(pattern: str | None = None, what: str = "") -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        if not isinstance(value, str):
            raise ValueError(f"must be a string, got {value!r}")
        if pattern is not None and not re.fullmatch(pattern, value):
            raise ValueError(f"must be {what}, got {value!r}")
        return value

    return parse


def secret(value: Any) -> str:
    """A token: long enough to resist guessing; the error never repeats the value."""
    if not isinstance(value, str) or not re.fullmatch(r"\S{16,}", value):
        raise ValueError("must be at least 16 characters without spaces (value not shown)")
    return value


def optional(parse: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda value: None if value in (None, "") else parse(value)


def boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"must be true or false, got {value!r}")


def address(value: Any) -> str:
    given = text()(value)
    host, sep, port = given.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"must be HOST:PORT, got {value!r}")
    return given


def mapping(value: Any) -> Mapping[str, Any]:
    """An object, or a JSON string of one (env and flags)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(f"must be a JSON object: {exc.msg}") from None
    if not isinstance(value, Mapping):
        raise ValueError(f"must be an object, got {value!r}")
    return value


def json_object(keys: Mapping[str, Callable[[Any], Any]]) -> Callable[[Any], dict[str, Any]]:
    """An object with known keys, each parsed."""

    def parse(value: Any) -> dict[str, Any]:
        value = mapping(value)
        out = {}
        for key, item in value.items():
            if key not in keys:
                raise ValueError(f"unknown key {key!r}; known: {', '.join(sorted(keys))}")
            try:
                out[key] = keys[key](item)
            except ValueError as exc:
                raise ValueError(f"{key}: {exc}") from None
        return out

    return parse


def headers(value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping) or not all(isinstance(v, str) for v in value.values()):
        raise ValueError("must be an object of strings")
    return dict(value)


def thresholds(value: Any) -> dict[str, dict[str, Any]]:
    """``{"SIGNAL": {"KNOB": number}}``, its shape only: the signals, knobs and values are checked at start-up
    against the detectors found (an error naming ``detectors.SIGNAL.KNOB``)."""
    out = {}
    for signal, knobs in mapping(value).items():
        try:
            out[signal] = dict(mapping(knobs))
        except ValueError as exc:
            raise ValueError(f"{signal}: {exc}") from None
    return out


def scenario_names(value: Any) -> str:
    """A scenario name, or several joined by commas: the syntax only. Whether the simulator knows them and they
    can run at once is checked at start-up (``trainpulse_otel.collect.sim.combine.check_scenario``)."""
    return text(r"[a-z0-9_]+(,[a-z0-9_]+)*", "a scenario name (several joined by commas)")(value)


def paths(value: Any) -> tuple[str, ...]:
    """Paths or globs: a comma-separated string, or a JSON list (config file; a string starting with ``[``)."""
    if isinstance(value, str) and value.lstrip().startswith("["):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(f"must be a JSON list: {exc.msg}") from None
    elif isinstance(value, str):
        value = value.split(",")
    given = value if isinstance(value, (list, tuple)) else [None]
    if not all(isinstance(p, str) and p.strip() and "\0" not in p for p in given):
        raise ValueError(f"must be paths or globs, comma-separated or a JSON list, none empty; got {value!r}")
    return tuple(p.strip() for p in value)
