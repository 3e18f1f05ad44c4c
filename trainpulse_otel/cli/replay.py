"""``trainpulse replay FILE…``: a recorded trace or a job's console logs run through the pipeline, no sleeping.

The reading and the replay are the composition root's (:func:`trainpulse_otel.runtime.replay_files`); this
prints what they found: the timeline and diagnosis, the trace lines skipped, what the logs were read as, and on a
terminal how far a long replay got. :func:`replay_files` is shared by every command that reads such files.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import TYPE_CHECKING, Any

from .flags import UsageError, add_setting_flags, configure, settings_of

if TYPE_CHECKING:
    from ..report.series import RunSeries
    from ..runtime.replay import ReplayResult


def add_replay_parser(commands: Any) -> None:
    """The ``replay`` subcommand's parser."""
    rep = commands.add_parser(
        "replay",
        help="diagnose a recorded trace or a training log",
        allow_abbrev=False,
        description="Run the diagnostic pipeline over a JSONL trace or a job's console log, without sleeping.",
    )
    rep.add_argument("-json", "--json", action="store_true", help="print one JSON object")
    add_file_arguments(rep)


def add_file_arguments(parser: argparse.ArgumentParser) -> None:
    """What every command reading traces or logs as ``replay`` does takes: the files, ``-framework`` and the
    settings the replay runs under (:func:`replay_files` reads them)."""
    parser.add_argument(
        "files",
        nargs="+",
        metavar="FILE",
        help="a trace recorded with -record (JSON Lines; rotated pieces oldest first, as one trace), or training "
        "logs (several: several ranks' or nodes' logs, merged in time order)",
    )
    parser.add_argument(
        "-framework", "--framework", metavar="NAME", help="read the files as this framework's logs (default: detect)"
    )
    add_setting_flags(parser, ("interval", "log_level", "log_format", "stale_after", "detectors"))


def run_replay(args: argparse.Namespace) -> int:
    """``trainpulse replay``: the timeline and the diagnosis of a trace or logs."""
    result = replay_files(args)
    if result is None:
        return 1
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        print_timeline(result)
    return 0


def replay_files(args: argparse.Namespace, series: RunSeries | None = None) -> ReplayResult | None:
    """``args.files`` (``args.framework``: how to read logs) through the pipeline, the bad lines and the logs'
    account said on stderr; None, said on stderr, when nothing in them could be diagnosed. ``series``: fed every
    tick (the report's)."""
    from ..logs import LogReader
    from ..runtime import replay_files as replay

    settings = settings_of(args)
    configure(settings)
    try:
        LogReader(args.framework)  # an unknown framework is said before any file is read
    except ValueError as exc:
        raise UsageError(f"-framework: {exc}") from None
    progress = Progress() if sys.stderr.isatty() else None
    try:
        done = replay(args.files, settings, args.framework, on_result=progress, series=series)
    except OSError as exc:
        raise UsageError(f"cannot read {exc.filename or ' '.join(args.files)}: {exc.strerror or exc}") from None
    finally:
        if progress is not None:
            progress.done()
    if done.account is not None:
        if series is not None:
            series.log_account = done.account
        for line in (f"read {done.account.summary()}", *done.account.notes):
            say(line)
    for path, found in done.errors.items():
        for error in found:
            say(f"{path}: {error}; skipped")
    if done.result.ticks == 0:  # every line bad, or no line any reader understood: nothing was diagnosed
        say(f"no valid trace line or known log line in {' '.join(args.files)}")
        return None
    return done.result


class Progress:
    """On a terminal, a long replay says how far it got: one line, rewritten each second after the first two."""

    AFTER_S, EVERY_S = 2.0, 1.0

    def __init__(self) -> None:
        self.started = self.said = time.monotonic()
        self.ticks, self.shown = 0, False

    def __call__(self, step: Any) -> None:
        self.ticks += 1
        now = time.monotonic()
        if now - self.started >= self.AFTER_S and now - self.said >= self.EVERY_S:
            at = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(step.diagnosis.ts))
            sys.stderr.write(f"\rtrainpulse: replaying: {self.ticks:,} ticks, at {at}Z  ")
            sys.stderr.flush()
            self.said, self.shown = now, True

    def done(self) -> None:
        if self.shown:
            sys.stderr.write("\r\033[K")  # the line cleared: what follows is the result
            sys.stderr.flush()


def say(line: str) -> None:
    """One line on stderr; on a terminal, over the progress line a long replay may be showing."""
    print(("\r\033[K" if sys.stderr.isatty() else "") + f"trainpulse: {line}", file=sys.stderr)


def print_timeline(result: ReplayResult) -> None:
    for t in result.timeline:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t.ts))
        subject = " ".join(f"{k}={v}" for k, v in t.subject.items())
        print(f"{stamp}Z  {t.event:<7}  {t.signal:<22} {t.severity:<8} {subject}".rstrip())
    d = result.diagnosis
    print(f"\n{result.ticks} ticks; health {d.health.score:.0f} ({d.health.status}); {len(d.signals)} active signal(s)")
    for cause in d.root_causes:
        print(f"  {cause.cause} ({cause.share()}): {cause.summary}")
        if cause.remediation:
            print(f"    → {cause.remediation}")
    if d.goodput is not None:
        g = d.goodput
        lost = ", ".join(
            f"{cause} {s:.0f} s" for cause, s in sorted(g.badput_s.items(), key=lambda x: -x[1]) if s >= 0.5
        )
        print(
            f"goodput {g.ratio:.1%} (last 10 min {g.window_ratio:.1%}), ideal step {g.ideal_step_time_ms:.0f} ms"
            + (f"; lost: {lost}" if lost else "")
        )
        for r in g.ranks:
            where = f" on {r.hostname}" if r.hostname else ""
            parts = ", ".join(f"{component} {ms:.0f} ms" for component, ms in r.lost_ms.items())
            print(f"  rank {r.rank}{where} costs {r.lost_ms_per_step:.0f} ms a step ({parts})")
