"""What every command shares: usage errors, the settings flags built from the table of keys, logging set up.

Go-style single-dash flags (``-mode sim -interval 1s``) and ``--mode`` both work. Every settings flag comes from
:data:`trainpulse_otel.config.OPTIONS`. A mistake is a :class:`UsageError`: one line on stderr, exit code 2.
"""

from __future__ import annotations

import argparse
import json
import signal
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from ..config import OPTIONS, Settings, load_settings
from ..config.durations import format_duration

#: What every collecting command (daemon, top, snapshot) takes; the rest of OPTIONS stay config/env only.
COLLECT_FLAGS = (
    "mode",
    "interval",
    "scenario",
    "onset",
    "sim_nodes",
    "sim_node_rank",
    "sim_fault_node",
    "record",
    "history_size",
    "log_level",
    "log_format",
    "metrics_namespace",
    "stale_after",
    "warmup",
    "smi_timeout",
    "detectors",
    "follow",
    "flight_recorder",
    "scrape",
    "sysfs_root",
)
#: Only the daemon serves an API (and keeps a job's life across its restarts): these flags are its own.
SERVER_FLAGS = (
    "addr",
    "auth_token",
    "auth_scope",
    "allow_insecure_bind",
    "otlp_grpc_addr",
    "max_body_bytes",
    "max_ranks",
    "server",
    "actions",
    "actions_dry_run",
    "state_dir",
    "job_id",
)
#: Flags each command takes beyond COLLECT_FLAGS. ``top`` reads a daemon with the token;
#: ``-addr`` is accepted by ``top`` and ``snapshot`` as the contract's "same flags", but has no effect there.
COMMAND_FLAGS: dict[str, tuple[str, ...]] = {
    "daemon": SERVER_FLAGS,
    "top": ("auth_token",),
    "snapshot": (),
}
HIDDEN_FLAGS: dict[str, tuple[str, ...]] = {"top": ("addr",), "snapshot": ("addr",)}


class UsageError(Exception):
    """A command-line mistake: printed as one line, exit code 2."""


class Parser(argparse.ArgumentParser):
    """argparse whose mistakes are :class:`UsageError` s."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see '{self.prog} -h')")


def add_setting_flags(parser: argparse.ArgumentParser, keys: Sequence[str], hidden: Sequence[str] = ()) -> None:
    """``-config`` and a flag for each settings key in ``keys`` (``hidden``: accepted, not shown)."""
    parser.add_argument("-config", "--config", metavar="FILE", help="JSON config file")
    for option in OPTIONS:
        if option.key not in keys and option.key not in hidden:
            continue
        flag = option.key.replace("_", "-")
        switch = {"nargs": "?", "const": "true"} if isinstance(option.default, bool) else {}  # -flag alone means true
        shown = f"{option.help} (default: {_show_default(option.default)})"
        parser.add_argument(
            f"-{flag}",
            f"--{flag}",
            dest=option.key,
            metavar=option.metavar,
            default=None,
            help=argparse.SUPPRESS if option.key in hidden else shown,
            **switch,
        )


def _show_default(value: Any) -> str:
    if isinstance(value, float):
        return format_duration(value)
    return json.dumps(value) if isinstance(value, (dict, list, tuple)) else str(value)


def settings_of(args: argparse.Namespace) -> Settings:
    """The settings the command's flags, its ``-config`` file and the environment give."""
    flags = {o.key: getattr(args, o.key, None) for o in OPTIONS}
    return load_settings(flags=flags, config_path=args.config)


def configure(settings: Settings, quiet: bool = False) -> None:
    """Logging as the settings say (``quiet``: warnings only, for commands that draw or print data)."""
    from ..runtime.logging_setup import configure_logging

    configure_logging("warning" if quiet and settings.log_level == "info" else settings.log_level, settings.log_format)


def on_signals(handler: Callable[[], None]) -> None:
    """``handler`` on SIGTERM and SIGINT."""
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda _signo, _frame: handler())
