"""Replay: run the diagnostic pipeline over a recorded trace, as fast as the CPU allows.

Trace lines are grouped into ticks the way the daemon produced them: lines with
the same timestamp (or within one ``interval`` of the tick's first line) form
one tick, and a second GPU or host reading (of the same node) always starts a new tick. Each
tick's samples go into the same :class:`LatestSamples` and through the same
step as a live tick (:class:`~.engine.Stepper`): the frame the live reader
would have built (:func:`~trainpulse_otel.telemetry.read_back.frame_from_samples`,
held equal to the reader's conversion by a property test), the window and the
pipeline. The clock is the trace's own timestamps: nothing sleeps. A job's console logs replay the same way
(:func:`replay_logs`): one log reader reads every file, and its reports and events are the records. Frames are
built a batch of ticks ahead of the pipeline (:data:`FRAMES_AHEAD`); a frame
depends only on the trace, so no result changes. A job daemon's trace has
lines of other nodes (``node``): each reaches the job view as that node's
report (:meth:`LatestSamples.put_node`), at its line's time, so a node whose
lines stop is judged silent as the live daemon judged it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from ..collect.base import Collected
from ..collect.logfile import is_trace, read_logs
from ..collect.trace import TraceError, TraceRecord, bounded_lines, read_trace
from ..config import Settings
from ..diagnose import Diagnosis, PipelineResult, Transition
from ..logs import LogReader
from ..logs.account import LogAccount, account
from ..report.series import RunSeries
from ..samples import NodeReport
from ..telemetry.latest import LatestSamples
from .assemble import open_replay
from .engine import Stepper
from .gc_pacing import rare_cycle_collection
from .plugins import Plugins, discover


@dataclass
class ReplayResult:
    """What a replay found: the timeline of transitions and the final diagnosis."""

    timeline: list[Transition] = field(default_factory=list)
    diagnosis: Diagnosis = field(default_factory=Diagnosis)
    ticks: int = 0
    errors: list[TraceError] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The contract's ``replay -json`` object."""
        return {"timeline": [t.to_dict() for t in self.timeline], "diagnosis": self.diagnosis.to_dict()}


#: Ticks whose frames are built before they are diagnosed. A frame depends only on the trace, never on a
#: diagnosis, so this changes no result; building 64 in a row, then diagnosing them, keeps each stage's code
#: and data in the CPU's caches: 12 % more ticks a second than one frame, one diagnosis (8 GPUs, 8 ranks).
FRAMES_AHEAD = 64


#: The kinds of line a collector reads once a tick: a second one of a node starts a new tick (reports and events
#: come any number of times a tick).
READINGS = ("gpus", "host", "ports")


def group_ticks(records: Iterable[TraceRecord], interval_s: float = 1.0) -> Iterator[list[TraceRecord]]:
    """Group time-ordered records into ticks (see the module docstring)."""
    group: list[TraceRecord] = []
    kinds: set[tuple[str, str | None]] = set()
    start = 0.0
    for record in records:
        new_tick = group and (
            record.ts - start >= interval_s or (record.kind in READINGS and (record.kind, record.node) in kinds)
        )
        if new_tick:
            yield group
            group, kinds = [], set()
        if not group:
            start = record.ts
        group.append(record)
        kinds.add((record.kind, record.node))
    if group:
        yield group


class TraceFeed:
    """Applies one tick's trace records to the latest samples, in order, as the collectors would have."""

    def __init__(self, latest: LatestSamples) -> None:
        self.latest = latest
        self.last_ts = 0.0

    def apply(self, group: list[TraceRecord]) -> float:
        """Put the group's records; returns the tick's time (its last record's)."""
        for record in group:
            ts = max(record.ts, self.last_ts)  # a line slightly out of order is applied in order
            self.last_ts = ts
            if record.kind == "event":
                self.latest.put_events((record.payload,))  # type: ignore[arg-type]
            elif record.node is None:
                self.latest.put(_collected(record), ts)
            else:  # another node's line: that node's report, its liveness from the line's time
                self.latest.put_node(NodeReport(record.node, **{record.kind: record.payload}), ts)  # type: ignore[arg-type]
        return self.last_ts


def _batched(items: Iterable[list[TraceRecord]], n: int) -> Iterator[list[list[TraceRecord]]]:
    """Successive lists of ``n`` items (the last may be shorter): :func:`itertools.batched` before Python 3.12."""
    it = iter(items)
    while batch := list(islice(it, n)):
        yield batch


def _collected(record: TraceRecord) -> Collected:
    return Collected(**{record.kind: record.payload})  # type: ignore[arg-type]


def replay(
    records: Iterable[TraceRecord],
    stepper: Stepper,
    interval_s: float = 1.0,
    errors: list[TraceError] | None = None,
    on_result: Callable[[PipelineResult], None] | None = None,
) -> ReplayResult:
    """Run every tick of a trace through the engine's step (built by
    :func:`~.assemble.open_replay`); collect the timeline."""
    result = ReplayResult(errors=errors if errors is not None else [])
    feed = TraceFeed(stepper.latest)
    with rare_cycle_collection():
        for ticks in _batched(group_ticks(records, interval_s), FRAMES_AHEAD):
            for frame in [stepper.frame(feed.apply(group)) for group in ticks]:
                step = stepper.diagnose(frame)
                if on_result is not None:
                    on_result(step)
                result.timeline.extend(step.transitions)
                result.diagnosis = step.diagnosis
                result.ticks += 1
    return result


@dataclass
class LogReplay:
    """A replayed log: the pipeline's result, the reader that read it, and its account in words."""

    result: ReplayResult
    reader: LogReader
    account: LogAccount


def replay_logs(
    paths: Sequence[str],
    settings: Settings,
    framework: str | None = None,
    plugins: Plugins | None = None,
    on_result: Callable[[PipelineResult], None] | None = None,
    series: RunSeries | None = None,
) -> LogReplay:
    """Replay the logs at ``paths`` (``framework``: read them as that framework's; None: detect), every file a
    log whatever its first line. A stream with no time of its own starts at its file's modification time.
    ValueError: an unknown framework; OSError: a file that cannot be read. ``series``: fed every tick."""
    done = replay_files(paths, settings, framework, plugins, on_result, series, logs_only=True)
    if done.reader is None or done.account is None:
        raise ValueError("no log file to replay")
    return LogReplay(done.result, done.reader, done.account)


@dataclass
class FilesReplay:
    """Replayed files: the pipeline's result, each trace's bad lines by its path, and the logs' account (None
    when no file was a log)."""

    result: ReplayResult
    errors: dict[str, list[TraceError]]
    reader: LogReader | None
    account: LogAccount | None


def replay_files(
    paths: Sequence[str],
    settings: Settings,
    framework: str | None = None,
    plugins: Plugins | None = None,
    on_result: Callable[[PipelineResult], None] | None = None,
    series: RunSeries | None = None,
    logs_only: bool = False,
) -> FilesReplay:
    """Replay traces and logs together, as ``replay`` and ``report`` do: a file is a trace by its first line
    (every file is a log when ``framework`` names one); the logs, read by one reader and merged in time, come
    before the traces' records. Logs alone cap what a log cannot support (``words_only``). ValueError: an unknown
    framework; OSError: a file that cannot be read. ``logs_only``: every file is a log, whatever its first line."""
    plugins = plugins or discover(disabled=settings.disabled_detectors)
    logs = [path for path in paths if logs_only or framework or not is_trace_file(path)]
    reader = LogReader(framework, start=min(os.path.getmtime(p) for p in logs)) if logs else None
    errors: dict[str, list[TraceError]] = {}
    stepper = open_replay(settings, plugins, words_only=len(logs) == len(paths))
    stepper.series = series
    records = _file_records(paths, logs, reader, errors)
    result = replay(records, stepper, interval_s=settings.interval, on_result=on_result)
    account = None if reader is None else log_account(reader, settings, plugins)
    return FilesReplay(result, errors, reader, account)


def _file_records(
    paths: Sequence[str], logs: list[str], reader: LogReader | None, errors: dict[str, list[TraceError]]
) -> Iterator[TraceRecord]:
    if reader is not None:
        yield from read_logs(logs, reader)
    for path in paths:
        if path not in logs:
            with open(path, "rb") as fh:
                yield from read_trace(bounded_lines(fh), errors.setdefault(path, []))


def is_trace_file(path: str) -> bool:
    """Whether the file at ``path`` is a recorded trace (by its first line), not a log. OSError: unreadable."""
    with open(path, "rb") as fh:
        return is_trace(fh)


def log_account(reader: LogReader, settings: Settings, plugins: Plugins | None = None) -> LogAccount:
    """What ``reader`` read, in words, quoting the knob values ``settings`` give."""
    vocabulary = (plugins or discover(disabled=settings.disabled_detectors)).vocabulary
    return account(reader.stats, vocabulary.knob_values(vocabulary.resolve(settings.detector_knobs)))
