"""Settings: defaults < config file < ``TRAINPULSE_*`` environment < command-line flags.

Every key is declared once in :data:`OPTIONS` with its parser, default and
help; the CLI builds its flags from the same table. An unknown key or a bad
value raises :class:`ConfigError` naming the key, which the CLI prints as one
line and exits 2. Durations are Go-style (:mod:`.durations`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .limits import ServerLimits, parse_server_limits
from .values import (
    DISABLED,
    Action,
    actions,
    address,
    boolean,
    choice,
    duration,
    headers,
    integer,
    json_object,
    optional,
    paths,
    scenario_names,
    secret,
    text,
    thresholds,
    urls,
)

ENV_PREFIX = "TRAINPULSE_"
MODES = ("auto", "nvml", "nvidia-smi", "sim", "none")


class ConfigError(ValueError):
    """A configuration key with a bad value, or an unknown key."""

    def __init__(self, key: str, message: str, source: str = "") -> None:
        where = f" (from {source})" if source else ""
        super().__init__(f"{key}: {message}{where}")
        self.key = key


OTLP_KEYS: dict[str, Callable[[Any], Any]] = {
    "endpoint": text(),
    "protocol": choice("grpc", "http/protobuf"),
    "headers": headers,
    "insecure": boolean,
    "timeout": duration(0.001),
    "export_interval": duration(0.1),
    "temporality": choice("cumulative", "delta", "lowmemory"),
    "profile": choice("default", "datadog"),
    "logs": boolean,
    "compression": choice("none", "gzip"),
}
PROMETHEUS_KEYS: dict[str, Callable[[Any], Any]] = {"enabled": boolean}


# --------------------------------------------------------------------- table


@dataclass(frozen=True)
class Option:
    """One configuration key: how it parses, its default, and its help line."""

    key: str
    parse: Callable[[Any], Any]
    default: Any
    help: str
    metavar: str = "VALUE"


OPTIONS: tuple[Option, ...] = (
    Option("addr", address, "127.0.0.1:9876", "HTTP API listen address", "HOST:PORT"),
    Option("interval", duration(0.01), 1.0, "collection and diagnosis interval", "DURATION"),
    Option("mode", choice(*MODES), "auto", "collection mode: " + "|".join(MODES), "MODE"),
    Option(
        "scenario",
        scenario_names,
        "healthy",
        "simulation scenario: healthy or a signal name; several joined by commas run at once",
        "NAME",
    ),
    Option(
        "onset",
        optional(duration(0.0)),
        None,
        "simulation: when the -scenario fault begins, from the start of the simulated run; "
        "unset, the scenario's own (docs/simulation.md)",
        "DURATION",
    ),
    Option(
        "sim_nodes",
        integer(1, 4096 // 8),
        1,
        "simulation: the job spans N nodes of 8 GPUs (docs/simulation.md)",
        "N",
    ),
    Option(
        "sim_node_rank",
        integer(0, 4095),
        0,
        "simulation: this daemon is node I (0 … sim_nodes-1) of the job",
        "I",
    ),
    Option(
        "sim_fault_node",
        optional(integer(0, 4095)),
        None,
        "simulation: the node whose GPUs the -scenario fault hits, known to every node's simulation; "
        "unset, each node's own",
        "I",
    ),
    Option("history_size", integer(2, 1_000_000), 300, "frames kept in the diagnostic window", "N"),
    Option("log_level", choice("debug", "info", "warning", "error"), "info", "log level", "LEVEL"),
    Option("log_format", choice("text", "json"), "text", "log format: text|json", "FORMAT"),
    Option(
        "metrics_namespace",
        text(r"[a-zA-Z_][a-zA-Z0-9_]*", "an identifier"),
        "trainpulse",
        "prefix of every metric name",
        "NAME",
    ),
    Option("record", optional(text()), None, "write a JSONL trace of every tick to FILE", "FILE"),
    Option("otlp", optional(json_object(OTLP_KEYS)), None, "OTLP export settings (JSON object)", "JSON"),
    Option(
        "prometheus",
        json_object(PROMETHEUS_KEYS),
        {"enabled": True},
        "Prometheus /metrics settings (JSON object)",
        "JSON",
    ),
    Option(
        "auth_token",
        optional(secret),
        None,
        "Bearer token the API requires (prefer TRAINPULSE_AUTH_TOKEN: flags show in ps)",
        "TOKEN",
    ),
    Option("auth_scope", choice("ingest", "all"), "ingest", "what the token guards: ingest|all endpoints", "SCOPE"),
    Option(
        "allow_insecure_bind",
        boolean,
        False,
        "listen on a non-loopback address without auth_token (not recommended)",
        "BOOL",
    ),
    Option(
        "otlp_grpc_addr",
        optional(address),
        None,
        "also receive OTLP over gRPC on this address (off)",
        "HOST:PORT",
    ),
    Option("max_body_bytes", integer(1024, 1 << 30), 1 << 20, "largest request body accepted", "BYTES"),
    Option("max_ranks", integer(1, 1 << 20), 16384, "most ranks accepted in one payload, and held", "N"),
    Option(
        "node_series",
        choice("owner", "all"),
        "owner",
        "a job daemon exports the series it owns and each node's summary (owner), or every node's too (all)",
        "POLICY",
    ),
    Option("server", parse_server_limits, ServerLimits(), "API server limits (JSON object)", "JSON"),
    Option("stale_after", duration(0.1), 300.0, "forget training reports and ranks older than this", "DURATION"),
    Option(
        "warmup",
        duration(0.0),
        0.0,
        "collect this long before the first answer (snapshot, top); -mode sim back-fills it in virtual time, 3m at 0s",
        "DURATION",
    ),
    Option("smi_timeout", duration(0.1), 5.0, "timeout of one nvidia-smi call", "DURATION"),
    Option(
        "mtbf",
        optional(duration(1.0)),
        None,
        "the job's mean time between interruptions, a prior for the checkpoint interval until it has had one",
        "DURATION",
    ),
    Option(
        "job_id",
        optional(text(r"[^\x00-\x1f]{1,128}", "a name of 1-128 printable characters")),
        None,
        "the job's identity (else SLURM_JOB_ID or TORCHELASTIC_RUN_ID): a -state-dir ledger belongs to one job",
        "ID",
    ),
    Option(
        "state_dir",
        optional(text()),
        None,
        "keep the job's life (attempts, goodput, checkpoints) in DIR across the daemon's restarts",
        "DIR",
    ),
    Option(
        "detectors",
        optional(thresholds),
        None,
        'thresholds: {"SIGNAL": {"KNOB": value}}; "disabled": built-in detectors turned off, by detector or signal',
        "JSON",
    ),
    Option(
        "follow",
        optional(paths),
        None,
        "read these log files as they are written (paths or globs)",
        "PATHS",
    ),
    Option("flight_recorder", optional(text()), None, "read Flight Recorder dumps PREFIX<rank>", "PREFIX"),
    Option(
        "scrape",
        optional(urls),
        None,
        "read GPUs and InfiniBand ports from these dcgm-exporter / node-exporter /metrics URLs",
        "URLS",
    ),
    Option("sysfs_root", text(r"\S.*", "a directory"), "/sys", "where sysfs is (InfiniBand ports)", "DIR"),
    Option(
        "actions",
        actions,
        (),
        'run a command or POST a webhook when a signal is raised: [{"on": {"signal": …}, "run": [ARGV…]}] '
        "(docs/actions.md)",
        "JSON",
    ),
    Option("actions_dry_run", boolean, False, "log the actions a raised signal would run; run none", "BOOL"),
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
    max_ranks: int = 16384
    node_series: str = "owner"
    server: ServerLimits = field(default_factory=ServerLimits)
    stale_after: float = 300.0
    onset: float | None = None
    sim_nodes: int = 1
    sim_node_rank: int = 0
    sim_fault_node: int | None = None
    warmup: float = 0.0
    smi_timeout: float = 5.0
    mtbf: float | None = None
    job_id: str | None = None
    state_dir: str | None = None
    detectors: dict[str, Any] | None = None
    follow: tuple[str, ...] | None = None
    flight_recorder: str | None = None
    scrape: tuple[str, ...] | None = None
    sysfs_root: str = "/sys"
    actions: tuple[Action, ...] = ()
    actions_dry_run: bool = False

    @property
    def detector_knobs(self) -> dict[str, dict[str, float]] | None:
        """The ``detectors`` key's knob overrides, ``{"SIGNAL": {"KNOB": value}}``."""
        if self.detectors is None:
            return None
        return {signal: knobs for signal, knobs in self.detectors.items() if signal != DISABLED}

    @property
    def disabled_detectors(self) -> tuple[str, ...]:
        """The built-in detectors ``detectors.disabled`` turns off, by detector or signal name."""
        return tuple((self.detectors or {}).get(DISABLED, ()))

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
#: What an action's command is told (docs/actions.md): a ``trainpulse`` it runs must not read them as settings.
NON_SETTING_ENV |= {
    f"TRAINPULSE_{name}" for name in ("SIGNAL", "SEVERITY", "CAUSE", "HOSTNAME", "RANK", "GPU_INDEX", "PID")
}


#: The launcher's variables a job's identity is read from when no ``job_id`` is set, first found wins.
LAUNCHER_JOB_ENV = ("SLURM_JOB_ID", "TORCHELASTIC_RUN_ID")


def launcher_job_id(environ: Mapping[str, str]) -> str | None:
    """The job id the launcher's environment gives (:data:`LAUNCHER_JOB_ENV`; torchrun's default run id
    ``none`` is none), else None."""
    for name in LAUNCHER_JOB_ENV:
        value = environ.get(name, "").strip()
        if value and value != "none" and len(value) <= 128 and value.isprintable():
            return value
    return None


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
    if "job_id" not in values and (launched := launcher_job_id(environ)) is not None:
        values["job_id"] = launched
    if (settings := Settings(**values)).sim_node_rank >= settings.sim_nodes:  # two keys that hold only together
        raise ConfigError("sim_node_rank", f"must be below sim_nodes ({settings.sim_nodes})")
    if settings.sim_fault_node is not None and settings.sim_fault_node >= settings.sim_nodes:
        raise ConfigError("sim_fault_node", f"must be below sim_nodes ({settings.sim_nodes})")
    return settings
