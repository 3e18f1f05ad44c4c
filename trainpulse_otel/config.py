"""Settings: defaults < config file < ``TRAINPULSE_*`` environment < command-line flags.

Every key is declared once in :data:`OPTIONS` with its parser, default and
help; the CLI builds its flags from the same table. An unknown key or a bad
value raises :class:`ConfigError` naming the key, which the CLI prints as one
line and exits 2. Durations are Go-style (:mod:`.durations`).
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .durations import format_duration, parse_duration
from .server_limits import ServerLimits, parse_server_limits

ENV_PREFIX = "TRAINPULSE_"
MODES = ("auto", "nvml", "nvidia-smi", "sim", "none")


class ConfigError(ValueError):
    """A configuration key with a bad value, or an unknown key."""

    def __init__(self, key: str, message: str, source: str = "") -> None:
        where = f" (from {source})" if source else ""
        super().__init__(f"{key}: {message}{where}")
        self.key = key


# -------------------------------------------------------------------- parsers


def _duration(minimum: float) -> Callable[[Any], float]:
    def parse(value: Any) -> float:
        if isinstance(value, bool):
            raise ValueError(f"must be a duration like 1s, got {value!r}")
        seconds = float(value) if isinstance(value, (int, float)) else parse_duration(str(value))
        if not math.isfinite(seconds) or seconds < minimum:
            raise ValueError(f"must be at least {format_duration(minimum)}, got {value!r}")
        return seconds

    return parse


def _int(minimum: int, maximum: int) -> Callable[[Any], int]:
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


def _choice(*choices: str) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        text = str(value).strip().lower()
        if text not in choices:
            raise ValueError(f"must be one of {', '.join(choices)}; got {value!r}")
        return text

    return parse


def _text(pattern: str | None = None, what: str = "") -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        if not isinstance(value, str):
            raise ValueError(f"must be a string, got {value!r}")
        if pattern is not None and not re.fullmatch(pattern, value):
            raise ValueError(f"must be {what}, got {value!r}")
        return value

    return parse


def _secret(value: Any) -> str:
    """A token: long enough to resist guessing; the error never repeats the value."""
    if not isinstance(value, str) or not re.fullmatch(r"\S{16,}", value):
        raise ValueError("must be at least 16 characters without spaces (value not shown)")
    return value


def _optional(parse: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda value: None if value in (None, "") else parse(value)


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"must be true or false, got {value!r}")


def _addr(value: Any) -> str:
    text = _text()(value)
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"must be HOST:PORT, got {value!r}")
    return text


def _mapping(value: Any) -> Mapping[str, Any]:
    """An object, or a JSON string of one (env and flags)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(f"must be a JSON object: {exc.msg}") from None
    if not isinstance(value, Mapping):
        raise ValueError(f"must be an object, got {value!r}")
    return value


def _object(keys: Mapping[str, Callable[[Any], Any]]) -> Callable[[Any], dict[str, Any]]:
    """An object with known keys, each parsed."""

    def parse(value: Any) -> dict[str, Any]:
        value = _mapping(value)
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


def _headers(value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping) or not all(isinstance(v, str) for v in value.values()):
        raise ValueError("must be an object of strings")
    return dict(value)


def _thresholds(value: Any) -> dict[str, dict[str, Any]]:
    """``{"SIGNAL": {"KNOB": number}}``, its shape only: the signals, knobs and values are checked at start-up
    against the detectors found (an error naming ``detectors.SIGNAL.KNOB``)."""
    out = {}
    for signal, knobs in _mapping(value).items():
        try:
            out[signal] = dict(_mapping(knobs))
        except ValueError as exc:
            raise ValueError(f"{signal}: {exc}") from None
    return out


OTLP_KEYS: dict[str, Callable[[Any], Any]] = {
    "endpoint": _text(),
    "protocol": _choice("grpc", "http/protobuf"),
    "headers": _headers,
    "insecure": _bool,
    "timeout": _duration(0.001),
    "export_interval": _duration(0.1),
    "temporality": _choice("cumulative", "delta", "lowmemory"),
    "profile": _choice("default", "datadog"),
    "logs": _bool,
    "compression": _choice("none", "gzip"),
}
PROMETHEUS_KEYS: dict[str, Callable[[Any], Any]] = {"enabled": _bool}


# --------------------------------------------------------------------- table


@dataclass(frozen=True)
class Option:
    """One configuration key: how it parses, its default, and its help line."""

    key: str
    parse: Callable[[Any], Any]
    default: Any
    help: str
    metavar: str = "VALUE"


def _scenario(value: Any) -> str:
    """A scenario name, or several joined by commas: the syntax only. Whether the simulator knows them and they
    can run at once is checked at start-up (``trainpulse_otel.collect.sim.combine.check_scenario``)."""
    return _text(r"[a-z0-9_]+(,[a-z0-9_]+)*", "a scenario name (several joined by commas)")(value)


def _paths(value: Any) -> tuple[str, ...]:
    """Paths or globs: a comma-separated string, or a JSON list (config file; a string starting with ``[``)."""
    if isinstance(value, str) and value.lstrip().startswith("["):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(f"must be a JSON list: {exc.msg}") from None
    elif isinstance(value, str):
        value = value.split(",")
    paths = value if isinstance(value, (list, tuple)) else [None]
    if not all(isinstance(p, str) and p.strip() and "\0" not in p for p in paths):
        raise ValueError(f"must be paths or globs, comma-separated or a JSON list, none empty; got {value!r}")
    return tuple(p.strip() for p in value)


OPTIONS: tuple[Option, ...] = (
    Option("addr", _addr, "127.0.0.1:9876", "HTTP API listen address", "HOST:PORT"),
    Option("interval", _duration(0.01), 1.0, "collection and diagnosis interval", "DURATION"),
    Option("mode", _choice(*MODES), "auto", "collection mode: " + "|".join(MODES), "MODE"),
    Option(
        "scenario",
        _scenario,
        "healthy",
        "simulation scenario: healthy or a signal name; several joined by commas run at once",
        "NAME",
    ),
    Option(
        "onset",
        _optional(_duration(0.0)),
        None,
        "simulation: when the -scenario fault begins, from the start of the simulated run; "
        "unset, the scenario's own (docs/simulation.md)",
        "DURATION",
    ),
    Option("sim_nodes", _int(1, 4096 // 8), 1, "simulation: the job spans N nodes of 8 GPUs (docs/simulation.md)", "N"),
    Option("sim_node_rank", _int(0, 4095), 0, "simulation: this daemon is node I (0 … sim_nodes-1) of the job", "I"),
    Option("history_size", _int(2, 1_000_000), 300, "frames kept in the diagnostic window", "N"),
    Option("log_level", _choice("debug", "info", "warning", "error"), "info", "log level", "LEVEL"),
    Option("log_format", _choice("text", "json"), "text", "log format: text|json", "FORMAT"),
    Option(
        "metrics_namespace",
        _text(r"[a-zA-Z_][a-zA-Z0-9_]*", "an identifier"),
        "trainpulse",
        "prefix of every metric name",
        "NAME",
    ),
    Option("record", _optional(_text()), None, "write a JSONL trace of every tick to FILE", "FILE"),
    Option("otlp", _optional(_object(OTLP_KEYS)), None, "OTLP export settings (JSON object)", "JSON"),
    Option(
        "prometheus", _object(PROMETHEUS_KEYS), {"enabled": True}, "Prometheus /metrics settings (JSON object)", "JSON"
    ),
    Option(
        "auth_token",
        _optional(_secret),
        None,
        "Bearer token the API requires (prefer TRAINPULSE_AUTH_TOKEN: flags show in ps)",
        "TOKEN",
    ),
    Option("auth_scope", _choice("ingest", "all"), "ingest", "what the token guards: ingest|all endpoints", "SCOPE"),
    Option(
        "allow_insecure_bind",
        _bool,
        False,
        "listen on a non-loopback address without auth_token (not recommended)",
        "BOOL",
    ),
    Option("otlp_grpc_addr", _optional(_addr), None, "also receive OTLP over gRPC on this address (off)", "HOST:PORT"),
    Option("max_body_bytes", _int(1024, 1 << 30), 1 << 20, "largest request body accepted", "BYTES"),
    Option("max_ranks", _int(1, 1 << 20), 8192, "most ranks accepted in one payload", "N"),
    Option("server", parse_server_limits, ServerLimits(), "API server limits (JSON object)", "JSON"),
    Option("stale_after", _duration(0.1), 300.0, "forget training reports and ranks older than this", "DURATION"),
    Option(
        "warmup",
        _duration(0.0),
        0.0,
        "collect this long before the first answer (snapshot, top); -mode sim back-fills it in virtual time, 3m at 0s",
        "DURATION",
    ),
    Option("smi_timeout", _duration(0.1), 5.0, "timeout of one nvidia-smi call", "DURATION"),
    Option("detectors", _optional(_thresholds), None, 'thresholds: {"SIGNAL": {"KNOB": value}}', "JSON"),
    Option("follow", _optional(_paths), None, "read these log files as they are written (paths or globs)", "PATHS"),
    Option("flight_recorder", _optional(_text()), None, "read Flight Recorder dumps PREFIX<rank>", "PREFIX"),
)
OPTIONS_BY_KEY: dict[str, Option] = {o.key: o for o in OPTIONS}


@dataclass(frozen=True)
class Settings:
    """Resolved configuration. Build with :func:`load_settings`."""

    addr: str = "127.0.0.1:9876"
    interval: float = 1.0
    mode: str = "auto"
    scenario: str = "healthy"
    history_size: int = 300
    log_level: str = "info"
    log_format: str = "text"
    metrics_namespace: str = "trainpulse"
    record: str | None = None
    otlp: dict[str, Any] | None = None
    prometheus: dict[str, Any] = field(default_factory=lambda: {"enabled": True})
    auth_token: str | None = None
    auth_scope: str = "ingest"
    allow_insecure_bind: bool = False
    otlp_grpc_addr: str | None = None
    max_body_bytes: int = 1 << 20
    max_ranks: int = 8192
    server: ServerLimits = field(default_factory=ServerLimits)
    stale_after: float = 300.0
    onset: float | None = None
    sim_nodes: int = 1
    sim_node_rank: int = 0
    warmup: float = 0.0
    smi_timeout: float = 5.0
    detectors: dict[str, dict[str, float]] | None = None
    follow: tuple[str, ...] | None = None
    flight_recorder: str | None = None

    @property
    def host(self) -> str:
        """The listen host of ``addr``."""
        return self.addr.rpartition(":")[0].strip("[]")

    @property
    def is_loopback(self) -> bool:
        """Whether ``addr`` listens on the loopback interface only."""
        import ipaddress

        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False

    @property
    def port(self) -> int:
        """The listen port of ``addr``."""
        return int(self.addr.rpartition(":")[2])


# -------------------------------------------------------------------- loading


def read_config_file(path: str) -> dict[str, Any]:
    """Read a JSON config file; errors name the file."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except OSError as exc:
        raise ConfigError("config", f"cannot read {path}: {exc.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError("config", f"{path} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError("config", f"{path} must hold a JSON object")
    return data


def env_values(environ: Mapping[str, str]) -> dict[str, str]:
    """The ``TRAINPULSE_*`` variables, keyed by config key (``TRAINPULSE_LOG_LEVEL`` → ``log_level``)."""
    out = {}
    for name, value in environ.items():
        if name.startswith(ENV_PREFIX) and name not in NON_SETTING_ENV:
            out[name[len(ENV_PREFIX) :].lower()] = value
    return out


#: TRAINPULSE_* variables that are not settings keys: read by other parts, or by the Collector configs in
#: collector_config/otelcol/ (a node may start one from the same environment as its daemon).
NON_SETTING_ENV = frozenset({"TRAINPULSE_CONFIG", "TRAINPULSE_ENDPOINT", "TRAINPULSE_DISABLE_PLUGIN_AUTOLOAD"})
NON_SETTING_ENV |= {"TRAINPULSE_JOB_DAEMON", "TRAINPULSE_LOG_GLOB", "TRAINPULSE_NODE_NAME"}


def load_settings(
    flags: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
    config_path: str | None = None,
) -> Settings:
    """Resolve settings: defaults < file < environment < flags (None flags are unset)."""
    environ = os.environ if environ is None else environ
    config_path = config_path or environ.get("TRAINPULSE_CONFIG")
    layers: list[tuple[str, Mapping[str, Any]]] = []
    if config_path:
        layers.append((config_path, read_config_file(config_path)))
    layers.append(("environment", env_values(environ)))
    layers.append(("command line", {k: v for k, v in (flags or {}).items() if v is not None}))
    values: dict[str, Any] = {}
    for source, layer in layers:
        for key, raw in layer.items():
            option = OPTIONS_BY_KEY.get(key)
            if option is None:
                name = ENV_PREFIX + key.upper() if source == "environment" else key
                raise ConfigError(name, "unknown configuration key", source)
            try:
                values[key] = option.parse(raw)
            except ValueError as exc:
                raise ConfigError(key, str(exc), source) from None
    if (settings := Settings(**values)).sim_node_rank >= settings.sim_nodes:  # two keys that hold only together
        raise ConfigError("sim_node_rank", f"must be below sim_nodes ({settings.sim_nodes})")
    return settings
