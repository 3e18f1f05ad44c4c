"""Parsers of settings values: each takes what a config file, the environment or a flag gave and returns the
typed value, or raises ValueError saying what was expected (the caller names the key).

A leaf beside :mod:`.durations`: settings and :mod:`.server_limits` read it before any part exists.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
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


#: The key of ``detectors`` listing the built-in detectors turned off (by detector or signal name).
DISABLED = "disabled"


def thresholds(value: Any) -> dict[str, Any]:
    """``{"SIGNAL": {"KNOB": number}, "disabled": ["NAME", …]}``, its shape only: the signals, knobs, values and
    names are checked at start-up against the detectors found (an error naming ``detectors.SIGNAL.KNOB`` or
    ``detectors.disabled``)."""
    out: dict[str, Any] = {}
    for signal, knobs in mapping(value).items():
        if signal == DISABLED:
            if not isinstance(knobs, (list, tuple)) or not all(isinstance(n, str) and n for n in knobs):
                raise ValueError(f"{DISABLED}: must be a list of detector or signal names, got {knobs!r}")
            out[DISABLED] = tuple(knobs)
            continue
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


def urls(value: Any) -> tuple[str, ...]:
    """HTTP(S) URLs of Prometheus text expositions (``-scrape``): comma-separated, or a JSON list."""
    given = paths(value)
    bad = [u for u in given if not re.fullmatch(r"https?://[^/\s?#]+(?:[/?#]\S*)?", u)]
    if bad:
        raise ValueError(f"must be http:// or https:// URLs, comma-separated or a JSON list; got {bad[0]!r}")
    return given


# --------------------------------------------------------------------- actions

#: What an action's ``on.severity`` may say: ``warning`` is a threshold (warning and critical), ``critical`` only that.
ACTION_SEVERITIES = ("warning", "critical")
ACTION_KEYS = frozenset({"on", "run", "webhook", "cooldown", "timeout", "name"})
ACTION_ON_KEYS = frozenset({"signal", "severity", "cause"})
ACTION_NAME = r"[A-Za-z0-9_.:/@-]{1,64}"


@dataclass(frozen=True)
class Action:
    """One entry of the ``actions`` setting: what it waits for (``on``), and a command or a webhook.

    ``signal`` is a signal name or ``*``; ``cause``, when given, also asks the top cause explaining the signal to
    be that cause. ``name`` labels its log lines and its ``trainpulse_actions_total`` series.
    """

    name: str
    signal: str
    severity: str = "warning"
    cause: str | None = None
    run: tuple[str, ...] | None = None
    webhook: str | None = None
    cooldown: float = 600.0
    timeout: float = 30.0

    def matches(self, severity: str) -> bool:
        """Whether a signal raised at ``severity`` reaches this action's threshold."""
        return severity == "critical" or self.severity == severity


def actions(value: Any) -> tuple[Action, ...]:
    """A list of actions, each ``{"on": {"signal": …, "severity": …}, "run": [ARGV…]}`` or ``{"on": …,
    "webhook": URL}`` with optional ``cooldown``, ``timeout`` and ``name``; an error names the entry by its index
    (``[1] on.severity: …``). Whether the signals and causes exist is checked at start-up, against the vocabulary."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(f"must be a JSON list: {exc.msg}") from None
    if not isinstance(value, (list, tuple)):
        raise ValueError(f"must be a list of actions, got {type(value).__name__}")
    out = []
    for index, item in enumerate(value):
        try:
            out.append(_action(item))
        except ValueError as exc:
            raise ValueError(f"[{index}] {exc}") from None
    return tuple(out)


def _action(item: Any) -> Action:
    if not isinstance(item, Mapping):
        raise ValueError(f"must be an object, got {item!r}")
    unknown = sorted(set(item) - ACTION_KEYS)
    if unknown:
        raise ValueError(f"unknown key {unknown[0]!r}; known: {', '.join(sorted(ACTION_KEYS))}")
    if ("run" in item) == ("webhook" in item):
        raise ValueError("needs exactly one of 'run' (a command's argv) and 'webhook' (a URL)")
    on = item.get("on")
    if not isinstance(on, Mapping):
        raise ValueError(f'on: must be an object like {{"signal": "NAME", "severity": "warning"}}, got {on!r}')
    if set(on) - ACTION_ON_KEYS:
        raise ValueError(f"on: unknown key {min(set(on) - ACTION_ON_KEYS)!r}; known: signal, severity, cause")
    signal = _field("on.signal", text(r"\*|[a-z][a-z0-9_]*", "a signal name or *"), on.get("signal"))
    severity = _field("on.severity", choice(*ACTION_SEVERITIES), on.get("severity", "warning"))
    cause = _field("on.cause", optional(text(r"[a-z][a-z0-9_]*", "a root cause's name")), on.get("cause"))
    run = _field("run", _argv, item["run"]) if "run" in item else None
    webhook = _field("webhook", _url, item["webhook"]) if "webhook" in item else None
    name = _field("name", optional(text(ACTION_NAME, "a short name (letters, digits, _.:/@-)")), item.get("name"))
    return Action(
        name=name or _default_name(run, webhook),
        signal=signal,
        severity=severity,
        cause=cause,
        run=run,
        webhook=webhook,
        cooldown=_field("cooldown", duration(0.0), item.get("cooldown", 600.0)),
        timeout=_field("timeout", duration(0.1), item.get("timeout", 30.0)),
    )


def _field(name: str, parse: Callable[[Any], Any], value: Any) -> Any:
    try:
        return parse(value)
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None


def _argv(value: Any) -> tuple[str, ...]:
    if not isinstance(value, (list, tuple)) or not value or not all(isinstance(a, str) for a in value) or not value[0]:
        raise ValueError(
            f'must be a non-empty list of strings (argv, no shell: ["sh", "-c", "…"] for one), got {value!r}'
        )
    return tuple(value)


def _url(value: Any) -> str:
    url = text()(value)
    scheme, sep, rest = url.partition("://")
    if scheme not in ("http", "https") or not sep or not rest.split("/", 1)[0]:
        raise ValueError(f"must be an http:// or https:// URL, got {value!r}")
    return url


def _default_name(run: tuple[str, ...] | None, webhook: str | None) -> str:
    """``run:ARGV0`` (its base name) or ``webhook:HOST``, cut to fit a name."""
    if run is not None:
        base = re.sub(r"[^A-Za-z0-9_.@-]", "_", run[0].rstrip("/").rpartition("/")[2] or run[0])
        return f"run:{base}"[:64]
    host = (webhook or "").partition("://")[2].split("/", 1)[0].rpartition("@")[2]
    return f"webhook:{re.sub(r'[^A-Za-z0-9_.:-]', '_', host)}"[:64]
