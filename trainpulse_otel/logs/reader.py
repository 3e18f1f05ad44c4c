"""The log reader: console lines in, in order; training reports and failure events out.

Each source (a file, a node's stream) is read as its own stream: its framework's iteration parser
(:mod:`.frameworks`; named, or the first that recognises a line; else any format's, :mod:`.generic`, and last a
line that recurs with its counter climbing, :mod:`.counters`) turns iteration lines into training reports, every
stream is scanned for failure lines (:mod:`.failures`), and a line neither knows is counted, never an error. Time: a
line's arrival time when it has one (follow, OTLP), else its own time stamp, else its stream's last time advanced by
the step times its reports give. Several ranks printing the same iteration (every rank of a torchtitan job,
interleaved) give one report: a step already reported is not reported again. A launcher's label (:mod:`.labels`), a
rank prefix, a collector's stamp and glog's prefix are cut first (:mod:`.lines`). Pure: lines in, samples out.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from datetime import datetime, timezone
from typing import Any, Protocol

from ..samples import NEW_ATTEMPT, PROGRESS_GAP, WATCHDOG_TIMEOUT, LogEvent, SampleError, TrainingSample, parse_training
from .bars import BarClock, glued_bar, progress_report
from .counters import ProgressCounters
from .failures import Failure, FailureScanner
from .frameworks import FRAMEWORKS
from .generic import EPOCH_HEADER, EpochBatches, GenericLines, library_chatter, line_values
from .labels import prompt_host, without_label
from .lines import LogLine, rank_of_source, split_glog, split_prefixes, without_escapes, yearless_clock, yearless_time
from .progress import ProgressClock
from .statements import statement
from .stats import ReadStats
from .tables import Table, table_header
from .timing import advance_s, with_stamped_step_time
from .tracebacks import source_context

#: Another rank's copy of an iteration comes within this long of the first (s); the same step later is a rerun. Steps
#: remembered for that: the newest this many.
REPEAT_WINDOW_S, MAX_REMEMBERED_STEPS = 60.0, 4096
#: Streams kept (a node, file and rank each); beyond it the longest quiet are flushed and forgotten.
MAX_STREAMS = 4096
#: Fields a report may lose to bad values (each named by validation) before the whole line is dropped.
MAX_DROPPED_FIELDS = 3


class IterationParser(Protocol):
    """One framework's iteration lines, one stream at a time (a fresh instance per stream)."""

    name: str

    def feed(self, text: str, ts: float) -> list[dict[str, Any]] | None:
        """The contract training payloads completed by this line (``[]``: the line was this framework's, nothing
        completed yet), or None when the line is not this framework's. ``ts``: the line's time; a payload
        carries the time of the line that began it as ``timestamp``."""

    def flush(self) -> list[dict[str, Any]]:
        """What is still held (an iteration waiting for the timers after it), as payloads."""


class _Stream:
    """One source's state: its framework parser, its failure scanner, its time."""

    __slots__ = ("advanced", "bars", "batches", "clock", "counters", "epoch", "failures", "fed", "last", "last_stamped",
                 "last_step", "parser", "quiet", "rank", "said", "stamped", "table", "timed", "ts")  # fmt: skip

    def __init__(self, parser: IterationParser | None, rank: int | None, ts: float) -> None:
        self.parser, self.failures, self.rank, self.ts = parser, FailureScanner(), rank, ts
        self.clock = ProgressClock()  # progress by the lines' own stamps: a silence is a gap
        self.bars = BarClock()  # progress by its bar's own elapsed time: a bar drawn again later is a gap
        self.advanced = False  # reports moved its clock before any line said a time
        self.epoch: int | None = None  # the epoch its last header line named (Keras's ``Epoch 2/20``)
        self.batches = EpochBatches()
        self.counters = ProgressCounters()  # the last resort: a line that recurs with a counter climbing
        self.table: Table | None = None  # the iteration table its last header line opened (:mod:`.tables`)
        self.last_step: int | None = None
        self.timed = False  # whether any of its lines said its time
        self.said = False  # whether its latest line said its time (else a report advances it by its step time)
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
        #: Where a file's clock starts when its first lines say no time: its first stamped line's time, where a
        #: replay found one ahead (:func:`first_stamp`), so the unstamped lines before it sit just before it.
        self.starts: dict[str | None, float] = {}
        self.stats = ReadStats()
        self._streams: dict[tuple[str | None, str | None, int | None], _Stream] = {}
        self._reported: dict[int, tuple[float, bool]] = {}  # step -> when first reported, and if measured
        #: Per file (node, source): the stream holding a line a terminal's wrap cut, for the file's next line.
        self._holders: dict[tuple[str | None, str | None], _Stream] = {}
        self._glog_offsets: dict[tuple[str | None, str | None], float] = {}  # per file with no dated line
        self._clocks: dict[tuple[str | None, str | None], float] = {}  # per file: the latest time of its lines
        self._prompts: dict[tuple[str | None, str | None], str] = {}  # per file: the host its last shell prompt named

    @property
    def sources(self) -> set[str | None]:
        """The sources (files) whose streams it holds."""
        return {source for _, source, _ in self._streams}

    def feed(self, line: LogLine) -> list[TrainingSample | LogEvent]:
        """What ``line`` completes, in order: training reports (stamped with their time) and failure events."""
        self.stats.lines += 1
        task, line = without_label(without_escapes(line))
        if (prompted := prompt_host(line.text)) is not None:  # the host the output after a shell's prompt came from
            self._prompts[(line.node, line.source)] = prompted
        prefixed, own_ts, text = split_prefixes(line.text)
        prefixed = task if prefixed is None else prefixed
        level, text = split_glog(text)
        if own_ts is None and line.text[:1] in "[IWEF JFMASOND0123456789":  # (what a yearless clock begins with)
            own_ts = self._glog(line)
        file = (line.node, line.source)
        holder = self._holders.pop(file, None)
        if holder is not None and prefixed is None and own_ts is None:  # a wrapped line's end: its own stream's
            stream, self.stats.joined = holder, self.stats.joined + 1
        else:
            stream = self._stream(line, prefixed)
        rank = stream.rank
        given = line.ts if line.ts is not None else own_ts
        stream.said = given is not None
        if given is not None:  # the first time said replaces the start (if nothing was placed by it); never back
            stream.ts, stream.timed = (max(stream.ts, given) if stream.timed or stream.advanced else given), True
            stream.stamped = line.ts is None
        elif not stream.timed:  # a line saying no time is no earlier than its file's latest (another rank's)
            stream.ts = max(stream.ts, self._file_time(line))
        stream.last, stream.fed = line, True
        failures = stream.failures.feed(text, level)
        out: list[TrainingSample | LogEvent] = [self._event(f, line, rank, stream.ts) for f in failures or ()]
        if failures and any(f.kind == WATCHDOG_TIMEOUT for f in failures):  # the file's silence was this collective's
            for other in (each for key, each in self._streams.items() if key[:2] == file):
                other.clock.caught(stream.ts)
        payloads = self._iterations(stream, text)
        if payloads and not stream.counters.quiet and stream.counters.give_way():
            stream.clock = ProgressClock()  # the counters' steps were a stand-in: the pace is the reader's own
        elif payloads is None and failures is None and not stream.counters.quiet and self.framework is None:
            payloads = None if (counted := stream.counters.step(text)) is None else [{"global_step": counted}]
        if payloads is None and failures is None:
            self.stats.unknown += 1
        if stream.failures.holding or getattr(stream.parser, "holding", False):
            self._holders[file] = stream
        reports = [r for payload in payloads or () for r in self._report(payload, stream)]
        if own_ts is not None:
            out.extend(self._clock(stream, line, own_ts, text, reports))  # a silence these reports end comes first
        else:
            stream.bars.feed(text, stream.ts)
        out.extend(reports)
        if stream.ts > self._clocks.get(file, float("-inf")):
            self._clocks[file] = stream.ts
        return out

    def _clock(
        self, stream: _Stream, line: LogLine, own_ts: float, text: str, reports: list[TrainingSample]
    ) -> list[LogEvent]:
        """A stamped line moves its stream's progress clock; a silence it ends, not crossed by steps, is told. A
        value said in words with no step (``loss (=nan) is not correct``) is no step completing: a plain line."""
        if not reports or (stream.parser is None and reports[-1].global_step is None):
            stream.clock.line(own_ts, text)
            return []
        gap = stream.clock.progress(own_ts, reports[-1].global_step)
        return [] if gap is None else [self._gap(gap, line, stream)]

    def _gap(self, gap: dict[str, Any], line: LogLine, stream: _Stream) -> LogEvent:
        """A silence as a ``progress_gap`` event, at the time of its last stamped line."""
        quoted = gap.pop("line", None)
        at = gap["since"] + gap["gap_s"]
        return self._event(Failure(PROGRESS_GAP, gap, text=quoted), line, stream.rank, at)

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
        if stream.last is not None:  # a traceback's exception at the end of a stream, say: told at its file's time
            ts = max(stream.ts, self._file_time(stream.last))
            out.extend(self._event(f, stream.last, stream.rank, ts) for f in stream.failures.flush())
            if (gap := stream.clock.flush()) is None and (gap := stream.bars.flush()) is not None:
                gap["last_step"] = max(gap["last_step"], stream.last_step or 0)  # (a bar's count, the step reported)
            if gap is not None:  # the log ends in a silence
                out.append(self._gap(gap, stream.last, stream))
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

    def _glog(self, line: LogLine) -> float | None:
        """A line's glog clock as its time. glog writes no year: in a file whose other lines carry full stamps,
        theirs; else the clock keeps only its intervals, laid from where the file's clock stands at its first."""
        if (clock := yearless_clock(line.text)) is None:  # (most lines hold none: looked for before the year)
            return None
        file = (line.node, line.source)
        dated = line.source in self.starts
        when = yearless_time(clock, datetime.fromtimestamp(self._file_time(line), tz=timezone.utc).year)
        if when is None or dated:
            return when
        if file not in self._glog_offsets:
            self._glog_offsets[file] = self._file_time(line) - when
        return when + self._glog_offsets[file]

    def _file_time(self, line: LogLine) -> float:
        """A file's latest time (any of its streams' lines may have moved it), else where it starts."""
        return self._clocks.get((line.node, line.source), self.starts.get(line.source, self.start))

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
        if found is not None and stream.parser is not None and stream.parser.name == "deepspeed" and glued_bar(text):
            return found + (self._any_format(stream, text) or [])  # a bar's loss under DeepSpeed's glued message
        if found is None and self.framework is not None and (bar := progress_report(text)) is not None:
            return [{**bar, "timestamp": stream.ts}]  # a bar its framework leaves unread, as any format's reader
        if found is not None or self.framework is not None:
            return found
        return self._any_format(stream, text)

    def _any_format(self, stream: _Stream, text: str) -> list[dict[str, Any]] | None:
        if library_chatter(text) or (text[:1] in " -" and source_context(text)):
            return None  # code a traceback quotes (``# if loss is nan or inf …``) says nothing of this run
        if ("poch" in text or "tep" in text or "TEP" in text or not text.isascii()) and (
            header := EPOCH_HEADER.match(text)
        ) is not None:
            stream.epoch = int(next(number for number in header.groups() if number))  # what follows names none
            return []
        values = stream.table.row(text) if stream.table is not None else None
        if values is None:
            values = line_values(text, stream.epoch, stream.last_step is None)
            if (values is None or "global_step" not in values) and (bar := progress_report(text)) is not None:
                said = values if values is not None else line_values(text, stream.epoch)
                values = {**bar, **(said or {})}  # a bar's count numbers its postfix's loss
            values = values and stream.batches.counted(text, values, stream.parser, stream.epoch)
        if values is not None:
            if stream.parser is None:
                stream.parser = GenericLines()
            return [{**values, "timestamp": stream.ts}]
        if (said := statement(text)) is not None:
            return [{**said, "timestamp": stream.ts}]
        if ("  " in text or "\t" in text or "|" in text or "│" in text or "┃" in text or "," in text) and (
            table := table_header(text, stream.table)
        ) is not None:
            stream.table = table if table.columns or table.names else None
            return []
        return None

    def _report(self, payload: dict[str, Any], stream: _Stream) -> list[TrainingSample]:
        """A payload as a validated report: its own line's time, or — where its line says none — its stream's time
        advanced by its steps (in a stamped file, by the step time the line gives, else not)."""
        step, measured = payload.get("global_step"), not _progress_only(payload)
        advances = not stream.timed or "step_time_ms" in payload  # (in a stamped file, a step time its line says)
        if not stream.said and advances and (step is None or step != stream.last_step):  # another rank's copy: no time
            stream.ts += advance_s(payload, step, stream.last_step)
            stream.advanced = True
        if isinstance(step, int):
            stream.last_step = step
        ts = stream.ts if not stream.timed else payload.get("timestamp", stream.ts)
        if isinstance(step, int) and stream.stamped:
            payload = with_stamped_step_time(payload, step, ts, stream.last_stamped)
            stream.last_stamped = (step, ts)
        if isinstance(step, int) and not _nonfinite(payload) and self._repeats(step, ts, measured):
            self.stats.repeated += 1  # another rank's copy of an iteration already reported
            return []
        sample = self._valid({**payload, "timestamp": ts})
        if sample is None:
            return []
        self._count(sample, stream, "step_time_ms" in payload)
        return [sample]

    def _valid(self, payload: dict[str, Any]) -> TrainingSample | None:
        """The report, less the fields a line got wrong: a value out of range (Megatron-DeepSpeed's loss scale
        of -1, a negative rate) costs that field, not the line (``invalid_fields`` counts them); a step alone is the
        run's progress; a report left with nothing is ``invalid``."""
        for _ in range(MAX_DROPPED_FIELDS + 1):
            try:
                return parse_training(payload)
            except SampleError as exc:
                name = exc.field.split("[", 1)[0].split(".", 1)[0] if exc.field else ""
                if not name and _progress_only(payload):  # a line numbering its step is progress, measured
                    return TrainingSample(**payload)
                if name not in payload or name in ("timestamp", "global_step"):
                    break
                payload = {k: v for k, v in payload.items() if k != name}
                self.stats.invalid_fields += 1
        self.stats.invalid += 1
        return None

    def _count(self, sample: TrainingSample, stream: _Stream, step_timed: bool) -> None:
        s = self.stats
        s.reports += 1
        s.parsers[stream.parser.name if stream.parser is not None else "statements"] += 1  # said in words alone
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

    def _repeats(self, step: int, ts: float, measured: bool) -> bool:
        """Whether ``step`` was reported already, within :data:`REPEAT_WINDOW_S` (a job restarted from a checkpoint
        reports its steps again, later: those are new). A step alone (an epoch's end) keeps out no measured report."""
        first = self._reported.get(step)
        if first is not None and abs(ts - first[0]) <= REPEAT_WINDOW_S and (first[1] or not measured):
            return True
        self._reported[step] = (ts, measured)
        if len(self._reported) > MAX_REMEMBERED_STEPS:
            del self._reported[next(iter(self._reported))]
        return False

    def _event(self, failure: Failure, line: LogLine, rank: int | None, ts: float) -> LogEvent:
        if failure.kind in NEW_ATTEMPT:
            self._reported.clear()  # a new attempt: the steps it does again are new reports, not copies
        self.stats.events += 1
        self.stats.kinds[failure.kind] += 1
        return LogEvent(
            ts=ts,
            kind=failure.kind,
            message=(failure.text or line.text).strip()[:2048],
            rank=failure.rank if failure.rank is not None else rank,
            hostname=line.node or line.host or self._prompts.get((line.node, line.source)),
            gpu_index=failure.gpu_index,
            source=line.source,
            line=line.number,
            details=dict(failure.details),
        )


def _progress_only(payload: dict[str, Any]) -> bool:
    """Whether a payload is a step and its time alone (a boosting round's validation metric, an RL loop's reward)."""
    step = payload.get("global_step")
    return isinstance(step, int) and step >= 0 and payload.keys() <= {"global_step", "timestamp", "framework"}


def _nonfinite(payload: dict[str, Any]) -> bool:
    """Whether a payload's loss or gradient norm is not finite."""
    return any(isinstance(v, float) and not math.isfinite(v) for v in (payload.get("loss"), payload.get("grad_norm")))
