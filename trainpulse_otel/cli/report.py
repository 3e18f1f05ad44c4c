"""``trainpulse report FILE… -o report.html``: a trace or logs, read as ``replay`` reads them, made into the page.

Exit 0 with the page written; 1 when nothing in the files could be diagnosed (said as ``replay`` says it); 2 with
one line when the ``report`` extra is missing or the page cannot be written.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from ..report.series import RunSeries
from .flags import UsageError
from .replay import add_file_arguments, replay_files


def add_report_parser(commands: Any) -> None:
    """The ``report`` subcommand's parser."""
    rep = commands.add_parser(
        "report",
        help="write a post-mortem HTML page of a recorded trace or a training log",
        allow_abbrev=False,
        description="Replay a trace or a job's logs as 'replay' does and write one self-contained HTML page: health, "
        "throughput, step time, goodput, signals, ranks, GPUs and root causes over the run.",
    )
    rep.add_argument("-o", "--output", metavar="FILE", default="report.html", help="the page (default: report.html)")
    add_file_arguments(rep)


def run_report(args: argparse.Namespace) -> int:
    """``trainpulse report``: see the module docstring."""
    from ..report.charts import MissingExtra, require
    from ..report.page import render_run

    try:
        require()
    except MissingExtra as exc:
        raise UsageError(str(exc)) from None
    series = RunSeries()
    if replay_files(args, series) is None:
        return 1
    page = render_run(series, ", ".join(os.path.basename(f) for f in args.files))
    try:
        with open(args.output, "w", encoding="utf-8") as fh:
            fh.write(page)
    except OSError as exc:
        raise UsageError(f"cannot write {args.output}: {exc.strerror or exc}") from None
    print(f"trainpulse: wrote {args.output} ({len(page.encode()) // 1024} KiB)", file=sys.stderr)
    return 0
