"""The ``trainpulse`` command line: daemon | top | snapshot | replay | report | eval | thresholds.

Each command has its module in this package (its parser and its run); :func:`main` parses and dispatches.
Errors are one line on stderr and exit code 2 — no tracebacks for bad input.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from ..config import ConfigError
from ..diagnose.vocabulary import SpecError
from ..version import __version__
from .evaluation import add_eval_parser, cmd_eval
from .flags import COLLECT_FLAGS, COMMAND_FLAGS, HIDDEN_FLAGS, Parser, UsageError, add_setting_flags
from .replay import add_replay_parser, run_replay
from .report import add_report_parser, run_report
from .serve import cmd_daemon, cmd_snapshot, cmd_top
from .thresholds import add_thresholds_parser, cmd_thresholds

COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "daemon": cmd_daemon,
    "top": cmd_top,
    "snapshot": cmd_snapshot,
    "replay": run_replay,
    "report": run_report,
    "eval": cmd_eval,
    "thresholds": cmd_thresholds,
}


def build_parser() -> argparse.ArgumentParser:
    """The argparse tree for every command."""
    parser = Parser(
        prog="trainpulse",
        allow_abbrev=False,
        description="OpenTelemetry-native predictive diagnostics for AI training jobs.",
    )
    parser.add_argument("-version", "--version", action="version", version=f"trainpulse {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
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
    add_replay_parser(commands)
    add_report_parser(commands)
    add_thresholds_parser(commands)
    add_eval_parser(commands)
    return parser


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
