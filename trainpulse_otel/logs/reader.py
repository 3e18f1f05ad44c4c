"""The log reader: console lines in, in order; training reports and failure events out.

Each source (a file, a node's stream) is read as its own stream: its
framework's iteration parser (:mod:`.frameworks`; named, or the first that
recognises a line) turns iteration lines into training reports, every stream
is scanned for failure lines (:mod:`.failures`), and a line neither knows is
counted, never an error. Time: a line's arrival time when it has one (follow,
OTLP), else its own time stamp, else its stream's last time advanced by the
step times its reports give. Several ranks printing the same iteration
(every rank of a torchtitan job, interleaved) give one report: a step already
reported is not reported again. Pure: lines in, samples out.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..samples import LogEvent, SampleError, TrainingSample, parse_training
from .failures import Failure, FailureScanner
from .frameworks import FRAMEWORKS
from .generic import GenericLines, line_values
from .lines import LogLine, rank_of_source, split_prefixes
from .statements import statement

#: A report's time advances by its step time times the steps it stands for, at most this much (s): a bogus
#: step time cannot throw a log without time stamps hours ahead.
MAX_ADVANCE_S = 3600.0
#: Another rank's copy of an iteration comes within this long of the first (s); the same step later is a rerun.
REPEAT_WINDOW_S = 60.0
#: A report that says no time (no stamp, no step time) in a stream whose lines say none moves its clock this much
#: (s): the order of the lines is then the time axis, one report a tick at the default interval.
UNTIMED_REPORT_S = 1.0
#: Steps remembered for that (the newest).
MAX_REMEMBERED_STEPS = 4096
#: Streams kept (a node, file and rank each); beyond it the longest quiet are flushed and forgotten.
MAX_STREAMS = 4096
#: Fields a report may lose to bad values (each named by validation) before the whole line is dropped.
MAX_DROPPED_FIELDS = 3
#: Lines this long or longer are measured for signs of terminal wrapping (shorter ones end where they end).
LONG_LINE = 60
#: Lines of one length that say a terminal wrapped the log at it.
WRAPPED_LINES = 3


class IterationParser(Protocol):
    """One framework's iteration lines, one stream at a time (a fresh instance per stream)."""

    name: str

    def feed(self, text: str, ts: float) -> list[dict[str, Any]] | None:
        """The contract training payloads completed by this line (``[]``: the line was this framework's, nothing
        completed yet), or None when the line is not this framework's. ``ts``: the line's time; a payload
        carries the time of the line that began it as ``timestamp``."""

    def flush(self) -> list[dict[str, Any]]:
        """What is still held (an iteration waiting for the timers after it), as payloads."""


@dataclass
class ReadStats:
    """What a reader has read: lines, and what they became.

    Beyond the counts: reports by the parser that read them (``parsers``), events by kind (``kinds``), how
    each report's time was known (``timed_by``: ``stamp``, ``step_time``, ``line_order``), what the reports
    carried (finite and non-finite losses, step times, throughput), and the lengths of long lines (``widths``:
    a terminal that wrapped the log leaves many lines of one length)."""

    lines: int = 0
    reports: int = 0
    events: int = 0
    unknown: int = 0
    invalid: int = 0
    repeated: int = 0
    invalid_fields: int = 0
    parsers: Counter[str] = field(default_factory=Counter)
    kinds: Counter[str] = field(default_factory=Counter)
    timed_by: Counter[str] = field(default_factory=Counter)
    losses: int = 0
    nonfinite: int = 0
    step_times: int = 0
    throughput: int = 0
    ranks: set[int] = field(default_factory=set)
    widths: Counter[int] = field(default_factory=Counter)

    def copy(self) -> ReadStats:
        return ReadStats(self.lines, self.reports, self.events, self.unknown, self.invalid, self.repeated)

    def wrapped_at(self) -> int | None:
        """The width a terminal seems to have wrapped the log at: at least :data:`WRAPPED_LINES` lines, and a
        fifth of the long ones, of exactly one length (None: no sign of it)."""
        if not self.widths:
            return None
        width, count = self.widths.most_common(1)[0]
        return width if count >= WRAPPED_LINES and count * 5 >= sum(self.widths.values()) else None


class _Stream:
    """One source's state: its framework parser, its failure scanner, its time."""

    __slots__ = (
        "failures",
        "fed",
        "last",
        "last_stamped",
        "last_step",
        "parser",
        "quiet",
        "rank",
        "stamped",
        "timed",
        "ts",
    )

    def __init__(self, parser: IterationParser | None, rank: int | None, ts: float) -> None:
        self.parser, self.failures, self.rank, self.ts = parser, FailureScanner(), rank, ts
        self.last_step: int | None = None
        self.timed = False  # whether any of its lines said its time (else reports advance it by their step times)
        self.last: LogLine | None = None  # its latest line: where what a flush completes was written
        self.fed = False  # a line came since the last quiet flush
        self.stamped = False  # its latest time was written in the line itself (not when it was read)
        self.last_stamped: tuple[int, float] | None = None  # the step and own time of its latest stamped report
        self.quiet = 0  # quiet flushes in a row that found no line since the one before


class LogReader:
    """Reads lines of any number of streams into training reports and failure events (see the module docstring).

    ``framework``: read iteration lines as that framework's only (None: detect per stream); ``start``: the time
    of a stream's first line when nothing gives one.
    """

    def __init__(self, framework: str | None = None, start: float = 0.0) -> None:
        if framework is not None and framework not in FRAMEWORKS:
            raise ValueError(f"unknown framework {framework!r}; known: {', '.join(sorted(FRAMEWORKS))}")
        self.framework = framework
        self.start = start
        self.stats = ReadStats()
        self._streams: dict[tuple[str | None, str | None, int | None], _Stream] = {}
        self._reported: dict[int, float] = {}  # step -> when it was first reported, the newest steps

    @property
    def sources(self) -> set[str | None]:
        """The sources (files) whose streams it holds."""
        return {source for _, source, _ in self._streams}

    def feed(self, line: LogLine) -> list[TrainingSample | LogEvent]:
        """What ``line`` completes, in order: training reports (stamped with their time) and failure events."""
        self.stats.lines += 1
        if len(line.text) >= LONG_LINE and len(self.stats.widths) < 512:
            self.stats.widths[len(line.text)] += 1
        prefixed, own_ts, text = split_prefixes(line.text)
        stream = self._stream(line, prefixed)
        rank = stream.rank
        given = line.ts if line.ts is not None else own_ts
        if given is not None:  # the first time said replaces the start; later ones never go back
            stream.ts, stream.timed = (max(stream.ts, given) if stream.timed else given), True
            stream.stamped = line.ts is None
        stream.last, stream.fed = line, True
        failures = stream.failures.feed(text)
        out: list[TrainingSample | LogEvent] = [self._event(f, line, rank, stream.ts) for f in failures or ()]
        payloads = self._iterations(stream, text)
        if payloads is None and failures is None:
            self.stats.unknown += 1
        for payload in payloads or ():
            out.extend(self._report(payload, stream))
        return out

    def flush(self, sources: Collection[str | None] | None = None) -> list[TrainingSample | LogEvent]:
        """What the streams of ``sources`` (every stream when None) still hold: call at the end of a file, or when
        a followed file goes quiet."""
        out: list[TrainingSample | LogEvent] = []
        for (_, source, _), stream in self._streams.items():
            if sources is None or source in sources:
                out.extend(self._flush_stream(stream))
        return out

    def flush_quiet(self) -> list[TrainingSample | LogEvent]:
        """What the streams that no line reached since the previous call still hold (call once a period: a stream
        is flushed after one to two periods of quiet). Beyond :data:`MAX_STREAMS`, the longest quiet are
        forgotten."""
        out: list[TrainingSample | LogEvent] = []
        for stream in self._streams.values():
            if stream.fed:
                stream.fed, stream.quiet = False, 0
            else:
                stream.quiet += 1
                if stream.quiet == 1:
                    out.extend(self._flush_stream(stream))
        excess = len(self._streams) - MAX_STREAMS
        if excess > 0:
            for key in sorted(self._streams, key=lambda k: self._streams[k].quiet, reverse=True)[:excess]:
                out.extend(self._flush_stream(self._streams.pop(key)))
        return out

    def _flush_stream(self, stream: _Stream) -> list[TrainingSample | LogEvent]:
        out: list[TrainingSample | LogEvent] = []
        for payload in stream.parser.flush() if stream.parser is not None else ():
            out.extend(self._report(payload, stream))
        if stream.last is not None:  # a traceback's exception at the end of a stream, say
            out.extend(self._event(f, stream.last, stream.rank, stream.ts) for f in stream.failures.flush())
        return out

    def _stream(self, line: LogLine, prefixed: int | None) -> _Stream:
        """A source's stream; a file whose lines carry ``[rankN]:`` prefixes holds one stream per rank."""
        key = (line.node, line.source, prefixed)
        stream = self._streams.get(key)
        if stream is None:
            rank = prefixed if prefixed is not None else line.rank
            if rank is None:
                rank = rank_of_source(line.source)
            parser = FRAMEWORKS[self.framework]() if self.framework is not None else None
            stream = self._streams[key] = _Stream(parser, rank, self._file_time(line))
        return stream

    def _file_time(self, line: LogLine) -> float:
        """Where a new stream's clock starts: its file's latest time (another rank's lines of the same file have
        moved it), else the reader's start."""
        times = [s.ts for (node, source, _), s in self._streams.items() if node == line.node and source == line.source]
        return max(times, default=self.start)

    def _iterations(self, stream: _Stream, text: str) -> list[dict[str, Any]] | None:
        """What a line completes as iterations: its stream's framework's (detected on the first line one claims);
        detecting, a line the framework does not claim is offered to any format's reader (:mod:`.generic`), then
        to the numbers said in words (:mod:`.statements`)."""
        parser = stream.parser
        if parser is not None and (self.framework is not None or parser.name != GenericLines.name):
            found = parser.feed(text, stream.ts)
        else:
            found = None
            for make in FRAMEWORKS.values():  # detection: the first framework that claims a line keeps the stream
                if make is GenericLines:
                    continue
                candidate = make()
                found = candidate.feed(text, stream.ts)
                if found is not None:
                    stream.parser = candidate
                    break
        if found is not None or self.framework is not None:
            return found
        return self._any_format(stream, text)

    def _any_format(self, stream: _Stream, text: str) -> list[dict[str, Any]] | None:
        values = line_values(text)
        if values is not None:
            if stream.parser is None:
                stream.parser = GenericLines()
            return [{**values, "timestamp": stream.ts}]
        said = statement(text)
        return None if said is None else [{**said, "timestamp": stream.ts}]

    def _report(self, payload: dict[str, Any], stream: _Stream) -> list[TrainingSample]:
        """A payload as a validated report: its own line's time, or — in a stream whose lines say no time — its
        stream's time advanced by its steps."""
        step = payload.get("global_step")
        if not stream.timed and (step is None or step != stream.last_step):  # another rank's copy: no time passes
            stream.ts += _advance_s(payload, step, stream.last_step)
        if isinstance(step, int):
            stream.last_step = step
        ts = stream.ts if not stream.timed else payload.get("timestamp", stream.ts)
        if isinstance(step, int) and stream.stamped:
            payload = _with_stamped_step_time(payload, step, ts, stream.last_stamped)
            stream.last_stamped = (step, ts)
        if isinstance(step, int) and self._repeats(step, ts):
            self.stats.repeated += 1  # another rank's copy of an iteration already reported
            return []
        sample = self._valid({**payload, "timestamp": ts})
        if sample is None:
            return []
        self._count(sample, stream, "step_time_ms" in payload)
        return [sample]

    def _valid(self, payload: dict[str, Any]) -> TrainingSample | None:
        """The report, less the fields a line got wrong: a value out of range (Megatron-DeepSpeed's loss scale
        of -1, a negative rate) costs that field, not the line (``invalid_fields`` counts them); a report left
        with nothing is ``invalid``."""
        for _ in range(MAX_DROPPED_FIELDS + 1):
            try:
                return parse_training(payload)
            except SampleError as exc:
                name = exc.field.split("[", 1)[0].split(".", 1)[0] if exc.field else ""
                if name not in payload or name in ("timestamp", "global_step"):
                    break
                payload = {k: v for k, v in payload.items() if k != name}
                self.stats.invalid_fields += 1
        self.stats.invalid += 1
        return None

    def _count(self, sample: TrainingSample, stream: _Stream, step_timed: bool) -> None:
        s = self.stats
        s.reports += 1
        s.parsers[stream.parser.name if stream.parser is not None else "?"] += 1
        s.timed_by["stamp" if stream.timed else "step_time" if step_timed else "line_order"] += 1
        for value in (sample.loss, sample.grad_norm):
            if value is not None and not math.isfinite(value):
                s.nonfinite += 1
                break
        else:
            s.losses += sample.loss is not None
        s.step_times += sample.step_time_ms is not None
        s.throughput += any(v is not None for v in (sample.tokens_per_sec, sample.samples_per_sec, sample.tflops))
        if stream.rank is not None:
            s.ranks.add(stream.rank)

    def _repeats(self, step: int, ts: float) -> bool:
        """Whether ``step`` was reported already, within :data:`REPEAT_WINDOW_S` (a job restarted from a checkpoint
        reports its steps again, later: those are new)."""
        first = self._reported.get(step)
        if first is not None and abs(ts - first) <= REPEAT_WINDOW_S:
            return True
        self._reported[step] = ts
        if len(self._reported) > MAX_REMEMBERED_STEPS:
            del self._reported[next(iter(self._reported))]
        return False

    def _event(self, failure: Failure, line: LogLine, rank: int | None, ts: float) -> LogEvent:
        self.stats.events += 1
        self.stats.kinds[failure.kind] += 1
        return LogEvent(
            ts=ts,
            kind=failure.kind,
            message=(failure.text or line.text).strip()[:2048],
            rank=failure.rank if failure.rank is not None else rank,
            hostname=line.node,
            gpu_index=failure.gpu_index,
            source=line.source,
            line=line.number,
            details=dict(failure.details),
        )


def _with_stamped_step_time(
    payload: dict[str, Any], step: int, ts: float, last: tuple[int, float] | None
) -> dict[str, Any]:
    """A report that gives no step time, with the one its lines' own time stamps give: the time since the
    previous stamped report over the steps since (torchtitan, the Trainer's dicts print none)."""
    if "step_time_ms" in payload or last is None or step <= last[0] or ts <= last[1]:
        return payload
    step_ms = (ts - last[1]) / (step - last[0]) * 1000.0
    return {**payload, "step_time_ms": step_ms} if step_ms <= MAX_ADVANCE_S * 1000.0 else payload


def _advance_s(payload: Mapping[str, Any], step: Any, last: int | None) -> float:
    """How far a report without a time of its own moves its stream's clock: its step time, times the steps
    since the last report (one when unknown); :data:`UNTIMED_REPORT_S` when it gives no step time."""
    step_ms = payload.get("step_time_ms")
    if not isinstance(step_ms, (int, float)) or not step_ms > 0:
        return UNTIMED_REPORT_S
    steps = step - last if isinstance(step, int) and last is not None and step > last else 1
    return min(MAX_ADVANCE_S, steps * step_ms / 1000.0)
