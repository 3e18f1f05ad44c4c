"""``trainpulse eval``'s flags and run: the scenarios, seeds, job shapes and pairs asked for, scored.

A flag that names nothing known is a :class:`~.flags.UsageError`: one line,
exit code 2.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..collect.sim.scenarios import SCENARIOS
from ..config.durations import parse_duration
from ..evaluation.pairs import fault_pairs, parse_pairs
from ..evaluation.report import evaluate, format_report
from ..evaluation.sim_replay import VARIANTS
from .flags import UsageError


def add_eval_parser(commands: Any) -> None:
    """The ``eval`` sub-command on ``commands`` (an argparse sub-parsers action)."""
    ev = commands.add_parser(
        "eval",
        help="score the diagnosis on every simulated fault",
        allow_abbrev=False,
        description="Replay every simulation scenario, score detection, latency and the "
        "top root cause, then a long healthy run for false alarms. Exit code 1 "
        "when a figure is missed.",
    )
    ev.add_argument("-json", "--json", action="store_true", help="print one JSON object")
    ev.add_argument("-seeds", "--seeds", type=int, default=1, metavar="N", help="seeds 0..N-1 (default 1)")
    ev.add_argument("-scenario", "--scenario", action="append", metavar="NAME", help="only this scenario (repeatable)")
    ev.add_argument(
        "-variants",
        "--variants",
        default="default",
        metavar="LIST",
        help=f"comma-separated job shapes: {', '.join(VARIANTS)}, or all (default: default)",
    )
    ev.add_argument(
        "-healthy",
        "--healthy",
        default="1h",
        metavar="DURATION",
        help="length of the healthy run, 0 to skip (default 1h)",
    )
    ev.add_argument(
        "-pairs",
        "--pairs",
        nargs="?",
        const="all",
        metavar="A+B,...",
        help="also run two faults at once on the default job: every pair (of the -scenario ones, when given), "
        "or the pairs listed",
    )
    ev.add_argument(
        "-logs",
        "--logs",
        metavar="DIR",
        help="instead, score the log reader on a labelled corpus of logs (DIR/index.json; see docs/logs.md)",
    )
    ev.add_argument(
        "-split",
        "--split",
        action="append",
        metavar="NAME",
        help="with -logs: only this split of the corpus (repeatable; default: every split, each scored apart)",
    )


def cmd_eval(args: argparse.Namespace) -> int:
    """Score what ``args`` ask for and print the report; 0 when every figure is met, else 1."""
    if args.logs is not None:
        return _run_logs(args)
    if args.split:
        raise UsageError("-split goes with -logs DIR")
    variants = list(VARIANTS) if args.variants == "all" else [v.strip() for v in args.variants.split(",")]
    unknown = [v for v in variants if v not in VARIANTS] + [s for s in args.scenario or () if s not in SCENARIOS]
    if unknown:
        raise UsageError(f"unknown variant or scenario: {', '.join(unknown)}")
    if args.seeds < 1:
        raise UsageError("-seeds must be at least 1")
    try:
        healthy_s = parse_duration(args.healthy)
    except ValueError as exc:
        raise UsageError(f"-healthy: {exc}") from None
    pairs: list[tuple[str, str]] = []  # no -pairs: none; bare -pairs: every pair of faults; else those listed
    if args.pairs == "all":
        pairs = fault_pairs(args.scenario)
    elif args.pairs is not None:
        try:
            pairs = parse_pairs(args.pairs)
        except ValueError as exc:
            raise UsageError(f"-pairs: {exc}") from None
    report = evaluate(args.scenario, seeds=args.seeds, variants=variants, healthy_s=healthy_s, pairs=pairs)
    print(json.dumps(report.to_dict(), indent=2) if args.json else format_report(report))
    return 0 if report.passed else 1


def _run_logs(args: argparse.Namespace) -> int:
    """``eval -logs DIR``: the corpus scored split by split; 0 when every split meets its figures."""
    from pathlib import Path

    from ..evaluation.log_corpus import CorpusError, evaluate_logs, format_logs_report

    root = Path(args.logs)
    try:
        reports = evaluate_logs(root, args.split)
    except CorpusError as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        print(json.dumps({"corpus": str(root), "splits": [r.to_dict() for r in reports]}, indent=2))
    else:
        print(format_logs_report(root, reports), end="")
    return 0 if all(not r.failures for r in reports) else 1
