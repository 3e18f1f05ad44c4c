"""The ``trainpulse`` command line: daemon | top | snapshot | replay | report | eval | thresholds.

Go-style single-dash flags (``-mode sim -interval 1s``) and ``--mode`` both
work. Every settings flag comes from :data:`trainpulse_otel.config.OPTIONS`.
Errors are one line on stderr and exit code 2 — no tracebacks for bad input.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, NoReturn

from . import __version__
from .config import OPTIONS, ConfigError, Settings, load_settings
from .diagnose.vocabulary import SpecError

if TYPE_CHECKING:
    pass

log = logging.getLogger("trainpulse_otel.cli")

#: What every collecting command (daemon, top, snapshot) takes; the rest of OPTIONS stay config/env only.
COLLECT_FLAGS = (
    "mode",
    "interval",
    "scenario",
    "onset",
    "sim_nodes",
    "sim_node_rank",
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
)
#: Only the daemon serves an API: these flags are its own.
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


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see '{self.prog} -h')")


def add_setting_flags(parser: argparse.ArgumentParser, keys: Sequence[str], hidden: Sequence[str] = ()) -> None:
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
        from .durations import format_duration

        return format_duration(value)
    return json.dumps(value) if isinstance(value, (dict, list, tuple)) else str(value)


def build_parser() -> argparse.ArgumentParser:
    """The argparse tree for every command."""
    parser = _Parser(
        prog="trainpulse",
        allow_abbrev=False,
        description="OpenTelemetry-native predictive diagnostics for AI training jobs.",
    )
    parser.add_argument("-version", "--version", action="version", version=f"trainpulse {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.required = True
    for name, help_text in (
        ("daemon", "collect continuously, diagnose, serve the HTTP API and export"),
        ("top", "live terminal view, collecting locally or following a daemon"),
        ("snapshot", "collect for the warm-up window and print the snapshot JSON"),
    ):
        sub = commands.add_parser(name, help=help_text, description=help_text, allow_abbrev=False)
        add_setting_flags(sub, COLLECT_FLAGS + COMMAND_FLAGS[name], HIDDEN_FLAGS.get(name, ()))
        if name == "top":
            sub.add_argument("-remote", "--remote", metavar="URL", help="follow a running daemon's API")
            sub.add_argument("-once", "--once", action="store_true", help="print one frame and exit")
    from .replay_command import add_replay_parser

    add_replay_parser(commands)
    from .report.command import add_report_parser

    add_report_parser(commands)
    thr = commands.add_parser(
        "thresholds",
        help="list every detector's thresholds: value, unit, basis, reason",
        allow_abbrev=False,
        description="List every knob the detectors decide by (SIGNAL.KNOB), with the overrides of the "
        "config's 'detectors' key applied and checked.",
    )
    thr.add_argument("-json", "--json", action="store_true", help="print a JSON list, one object per knob")
    add_setting_flags(thr, ("detectors", "log_level"))
    from .evaluation.command import add_eval_parser

    add_eval_parser(commands)
    return parser


# ------------------------------------------------------------------ commands


def settings_of(args: argparse.Namespace) -> Settings:
    flags = {o.key: getattr(args, o.key, None) for o in OPTIONS}
    return load_settings(flags=flags, config_path=args.config)


def cmd_daemon(args: argparse.Namespace) -> int:
    from .api import ApiServer
    from .runtime import PacedCollection, create_api, discover, open_engine, open_otlp_grpc, warm_up

    settings = settings_of(args)
    configure(settings)
    _check_exposure(settings)
    plugins = discover()
    engine = open_engine(settings, push=True, plugins=plugins, actions=True)
    try:
        server = ApiServer(create_api(engine, settings, plugins), settings.host, settings.port, settings.server)
    except OSError as exc:
        engine.close()
        raise UsageError(f"cannot listen on {settings.addr}: {exc.strerror or exc}") from None
    try:
        grpc_server = open_otlp_grpc(engine, settings)
    except RuntimeError as exc:
        engine.close()
        raise UsageError(f"cannot listen for OTLP/gRPC on {settings.otlp_grpc_addr}: {exc}") from None
    stop = threading.Event()
    _on_signals(lambda: stop.set())
    if engine.mode == "sim":
        warm_up(engine)  # in virtual time, as snapshot and top do: a baseline, and the fault from the first answer
    server.start()
    if grpc_server is not None:
        grpc_server.start()
    log.info("trainpulse daemon %s: mode %s, interval %gs", __version__, engine.mode, settings.interval)
    try:
        with PacedCollection() as collection:  # full collections between ticks, after start-up is frozen
            engine.run(stop, after_tick=collection.after_tick)
    finally:
        log.info("shutting down: flushing exporters")
        if grpc_server is not None:
            grpc_server.close()
        server.close()
        engine.close()
    return 0


def _check_exposure(settings: Settings) -> None:
    """Refuse an API (or an OTLP/gRPC receiver) reachable from the network that anyone could write to."""
    if settings.auth_token or settings.allow_insecure_bind:
        return
    for addr in (settings.addr, settings.otlp_grpc_addr):  # is_loopback reads ``addr``: ask it of each address
        if addr is not None and not replace(settings, addr=addr).is_loopback:
            raise UsageError(
                f"refusing to listen on {addr} without auth_token: anyone who can reach it could write "
                "training data; set TRAINPULSE_AUTH_TOKEN, or pass -allow-insecure-bind if the network is trusted"
            )


def cmd_snapshot(args: argparse.Namespace) -> int:
    from .runtime import open_engine, warm_up

    settings = settings_of(args)
    configure(settings)
    engine = open_engine(settings)
    try:
        warm_up(engine)
        print(json.dumps(engine.snapshot().to_dict(), indent=2))
    finally:
        engine.close()
    return 0


def cmd_top(args: argparse.Namespace) -> int:
    from .dashboard.app import run_top
    from .dashboard.sources import LocalSource, RemoteSource, Source

    settings = settings_of(args)
    configure(settings, quiet=True)
    source: Source
    if args.remote:
        source = RemoteSource(args.remote, settings.auth_token, timeout_s=max(1.0, settings.interval))
    else:
        from .runtime import LocalEngine, open_engine

        source = LocalSource(LocalEngine(open_engine(settings)))
    return run_top(source, settings.interval, once=args.once)


def cmd_replay(args: argparse.Namespace) -> int:
    from .replay_command import run_replay

    return run_replay(args)


def cmd_report(args: argparse.Namespace) -> int:
    from .report.command import run_report

    return run_report(args)


def cmd_eval(args: argparse.Namespace) -> int:
    from .evaluation.command import EvalUsageError, run_eval

    try:
        return run_eval(args)
    except EvalUsageError as exc:
        raise UsageError(str(exc)) from None


def cmd_thresholds(args: argparse.Namespace) -> int:
    from .publish.thresholds import format_thresholds, threshold_rows
    from .runtime import discover, knob_overrides

    settings = settings_of(args)
    configure(settings, quiet=True)
    plugins = discover()
    values = plugins.vocabulary.knob_values(knob_overrides(plugins, settings.detectors))
    rows = threshold_rows(plugins.vocabulary, values)
    print(json.dumps(rows, indent=2) if args.json else format_thresholds(rows))
    return 0


# ------------------------------------------------------------------ plumbing


def configure(settings: Settings, quiet: bool = False) -> None:
    from .runtime.logs import configure_logging

    configure_logging("warning" if quiet and settings.log_level == "info" else settings.log_level, settings.log_format)


def _on_signals(handler: Callable[[], None]) -> None:
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda _signo, _frame: handler())


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "daemon": cmd_daemon,
    "top": cmd_top,
    "snapshot": cmd_snapshot,
    "replay": cmd_replay,
    "report": cmd_report,
    "eval": cmd_eval,
    "thresholds": cmd_thresholds,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``trainpulse`` console script."""
    try:
        args = build_parser().parse_args(argv)
        return COMMANDS[args.command](args)
    except (UsageError, ConfigError, SpecError) as exc:
        prefix = "config error: " if isinstance(exc, ConfigError) else ""
        print(f"trainpulse: {prefix}{exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
