"""The engine: one tick of the data path, and the loop that repeats it.

collectors → latest samples → OTel instruments → frame (the in-process
reader's; read back from the samples for a job view of thousands of series,
see :class:`~.assemble.LiveFrames`) → window → diagnostic pipeline →
publisher (gauges + events), plus the optional trace recorder. Everything
after the inputs is :class:`Stepper.step`, the one step
function that live ticks and replay share: replay feeds the same
:class:`~trainpulse_otel.telemetry.latest.LatestSamples` from a trace and reads
frames without the OTel round trip (:mod:`.replay`).

The engine is put together in exactly one place,
:func:`trainpulse_otel.runtime.assemble.open_engine`; the clock is injectable,
so ``snapshot -mode sim`` can run a warm-up in virtual time.
"""

from __future__ import annotations

import logging
import math
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from ..collect.base import Collected, Collector
from ..collect.trace import TraceWriter, earlier_losses
from ..config import Settings
from ..diagnose import DiagnosticPipeline, PipelineResult
from ..logs import LogLine, LogReader
from ..publish.otel import DiagnosisPublisher
from ..publish.snapshot import Snapshot, build_snapshot
from ..receive import Decoded, DecodedLogs, OtlpReceiver, decode_logs
from ..samples import Frame, LogEvent, NodeReport, TrainingSample, with_stacks
from ..samples.builder import field_replacer
from ..telemetry.exporters import Exports
from ..telemetry.latest import LatestSamples
from ..telemetry.operational import OTLP, REST, OperationalMetrics
from ..telemetry.providers import Telemetry
from .window import Window

if TYPE_CHECKING:
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest

    from ..actions import ActionRunner
    from ..collect.sim.handover import RealReports
    from ..report.series import RunSeries

log = logging.getLogger(__name__)

Clock = Callable[[], float]

#: The shortest step of a virtual-time back-fill (seconds).
BACKFILL_STEP_S = 1.0
#: The run loop counts as stalled when its last tick is older than this many intervals (and ``STALL_MIN_S``).
STALL_INTERVALS = 5
STALL_MIN_S = 30.0
REJECTED_LOGS_SAID_EVERY_S = 60.0  # refused OTLP log records are logged at most this often (shippers send each s)
#: A tick's frame with the losses and failure events reported since the last one, and the ranks' latest stacks
#: (a slot copy: every tick makes one).
_WITH_STREAMS = field_replacer(Frame, "losses", "events", "stacks")


class FrameSource(Protocol):
    """Builds the frame of one tick from the latest samples."""

    def read(self, ts: float) -> Frame: ...


class Stepper:
    """One step after the inputs: expire stale samples, build the frame, keep it in the window, diagnose it."""

    def __init__(
        self, latest: LatestSamples, frames: FrameSource, window: Window, pipeline: DiagnosticPipeline
    ) -> None:
        self.latest = latest
        self.frames = frames
        self.window = window
        self.pipeline = pipeline
        self.series: RunSeries | None = None  # the report's per-tick record, when one is kept

    def step(self, now: float) -> PipelineResult:
        """The frame at ``now`` through window and pipeline."""
        return self.diagnose(self.frame(now))

    def diagnose(self, frame: Frame) -> PipelineResult:
        """A frame (this stepper's, the newest) into the window and through the pipeline."""
        self.window.append(frame)
        result = self.pipeline.update(frame)
        if self.series is not None:
            self.series.add(frame, result)
        return result

    def frame(self, now: float) -> Frame:
        """The frame at ``now``, after stale samples expire, with every loss and failure event reported since the
        last one, and the ranks' latest stacks."""
        self.latest.expire(now)
        latest = self.latest
        return _WITH_STREAMS(self.frames.read(now), latest.drain_losses(), latest.drain_events(), latest.stacks())


@dataclass
class Outputs:
    """Where a live engine's results go besides the window: OTel (gauges, events, exporters) and a trace."""

    telemetry: Telemetry
    exports: Exports
    ops: OperationalMetrics
    publisher: DiagnosisPublisher
    recorder: TraceWriter | None = None
    actions: ActionRunner | None = None  # the daemon's actions on a raised signal (docs/actions.md)


class Engine:
    """Owns the stages of one running TrainPulse pipeline and ticks them."""

    def __init__(
        self,
        settings: Settings,
        mode: str,
        collectors: Sequence[Collector],
        stepper: Stepper,
        outputs: Outputs,
        clock: Clock = time.time,
        reports: RealReports | None = None,
    ) -> None:
        self.settings = settings
        self.mode = mode
        self.collectors = tuple(collectors)
        self.stepper = stepper
        self.latest = stepper.latest
        self.window = stepper.window
        self.pipeline = stepper.pipeline
        self.telemetry = outputs.telemetry
        self.exports = outputs.exports
        self.ops = outputs.ops
        self.publisher = outputs.publisher
        self.recorder = outputs.recorder
        self.actions = outputs.actions
        self.warming = False  # set through a warm-up (runtime/session.py): no action runs
        self.clock = clock
        self.reports = reports
        self.otlp = OtlpReceiver(settings.metrics_namespace)  # delta totals between OTLP requests
        self.log_reader = LogReader()  # every OTLP log stream's, keyed by node and file
        self.hostnames = _own_hostnames(outputs.telemetry)  # a log record from one of these is this node's
        self._unreadable_logged = False
        self._rejected_unsaid, self._rejected_said_at = 0, -math.inf
        self.started_at = clock()
        self.ticks = 0
        self._last_progress: float | None = None  # monotonic; set while the run loop is live
        self._last_tick_s: float | None = None  # how long the newest tick took (perf counter)
        self._tick_lock = threading.Lock()
        self._recorded_training: TrainingSample | None = None

    # ------------------------------------------------------------------ inputs

    def ingest(self, sample: TrainingSample, source: str = REST) -> None:
        """Take one validated training report; ``source`` is ``rest``, ``framework`` or ``sdk``.

        ``reports`` (from the composition root) notes its arrival, so a simulator stands its own training loop down.
        """
        now = self.clock()
        if self.reports is not None and self.reports.arrived(now):
            self.latest.forget_training()  # the simulator's view (its ranks too) must not linger beside the real one
        self.latest.put_training(sample, now)
        self.ops.ingested(sample, source)

    def ingest_nodes(self, reports: Sequence[NodeReport]) -> None:
        """Take what other nodes of the job sent (OTLP ingest): each node's GPUs, host, XID totals and ranks.

        Ranks from other nodes are real reports too: the simulator's own job view stands down as for REST ingest.
        """
        now = self.clock()
        if any(r.training is not None for r in reports) and self.reports is not None and self.reports.arrived(now):
            self.latest.forget_training()
        for report in reports:
            self.latest.put_node(report, now)

    def ingest_otlp(self, request: ExportMetricsServiceRequest) -> Decoded:
        """Take one OTLP export (HTTP or gRPC): each node it names, and the count of its points by outcome.

        An export is decoded between ticks, never during one (the tick lock): a
        tick does not share the interpreter with the decoding of the exports a
        64-node job sends every second (~2 ms each, a GIL-bound thread each),
        and an export waits at most one tick.
        """
        with self._tick_lock:
            decoded = self.otlp.decode(request)
            if decoded.reports:
                self.ingest_nodes(decoded.reports)
        self.ops.otlp_received(decoded.accepted, decoded.rejected, decoded.ignored)
        return decoded

    def ingest_otlp_logs(self, request: ExportLogsServiceRequest) -> DecodedLogs:
        """Take one OTLP logs export (HTTP or gRPC): its records as console lines, and the count of them."""
        decoded = decode_logs(request, self.clock(), self.hostnames)
        if decoded.lines:
            self.ingest_log_lines(decoded.lines)
        self.ops.otlp_logs_received(decoded.accepted, decoded.rejected, decoded.ignored)
        if decoded.rejected:
            self._say_rejected(decoded)
        return decoded

    def _say_rejected(self, decoded: DecodedLogs) -> None:
        """Refused records said in the daemon's log too (a shipper rarely logs the answer), once a minute at most."""
        self._rejected_unsaid += decoded.rejected
        now = time.monotonic()
        if now - self._rejected_said_at >= REJECTED_LOGS_SAID_EVERY_S:
            log.warning("OTLP logs: %d record(s) rejected: %s", self._rejected_unsaid, decoded.error_message)
            self._rejected_unsaid, self._rejected_said_at = 0, now

    def ingest_log_lines(self, lines: Sequence[LogLine]) -> None:
        """Read console lines (in order) and put the training reports and failure events they tell, as a
        collector's collection is put. Between ticks (the tick lock); what a stream still holds (an iteration
        waiting for its timer lines, a traceback's end) is put once the stream is quiet for a tick."""
        with self._tick_lock:
            unknown = self.log_reader.stats.unknown
            reports, events = self._put_log_items([item for line in lines for item in self._read_line(line)])
            unknown = self.log_reader.stats.unknown - unknown
        self.ops.logs_read(len(lines), unknown, reports, events, source=OTLP)

    def _put_log_items(self, told: Sequence[TrainingSample | LogEvent]) -> tuple[int, int]:
        """Put what log lines told as one collection; the count of reports and of events."""
        reports = tuple(item for item in told if isinstance(item, TrainingSample))
        events = tuple(item for item in told if isinstance(item, LogEvent))
        if reports or events:
            self.latest.put(Collected(reports=reports, events=events), self.clock())
        return len(reports), len(events)

    def _read_line(self, line: LogLine) -> list[TrainingSample | LogEvent]:
        """What one line tells; a parser's bug costs that line (logged in full the first time), never the request."""
        try:
            return self.log_reader.feed(line)
        except Exception:
            level = logging.DEBUG if self._unreadable_logged else logging.ERROR
            log.log(level, "a log line of %s could not be read; going on", line.source, exc_info=True)
            self._unreadable_logged = True
            return []

    # ------------------------------------------------------------------- ticks

    def tick(self, now: float | None = None) -> PipelineResult:
        """Collect, read one frame, diagnose it and publish the result."""
        with self._tick_lock:
            started = time.perf_counter()
            now = self.clock() if now is None else now
            reports, events = self._put_log_items(self.log_reader.flush_quiet())
            if reports or events:
                self.ops.logs_read(0, 0, reports, events, source=OTLP)
            for collector in self.collectors:
                self.latest.put(self._collect(collector, now), now)
            self.ops.flush()
            result = self.stepper.step(now)
            self.publisher.publish(result)
            if self.actions is not None:  # decides and queues only: the actions run on their own thread
                self.actions.offer(result, now, self.warming)
            self._record(now)
            self.ticks += 1
            if self._last_progress is not None:
                self._last_progress = time.monotonic()
            self._last_tick_s = took = time.perf_counter() - started
            self.ops.ticked(took)
            return result

    def _collect(self, collector: Collector, now: float) -> Collected:
        try:
            return collector.collect(now)
        except Exception:  # one broken collector must not stop the others
            log.exception("collector %s failed; skipping it this tick", collector.name)
            self.ops.collector_failed(collector.name)
            return Collected()

    def _record(self, now: float) -> None:
        if self.recorder is None:
            return
        current = self.latest.current()
        training = current.training if current.training is not self._recorded_training else None
        self._recorded_training = current.training
        training = with_stacks(training, self.latest.stacks())  # kept beside the ranks: the trace keeps them on
        frame = self.window.latest
        losses = earlier_losses(frame.losses or (), current.training) if frame is not None else ()
        events = frame.events if frame is not None else ()
        nodes, xids = self.latest.nodes(), self.latest.xid_counts()
        write = self.recorder.write_tick
        write(now, current.gpus, current.host, training, losses, nodes, xids, events, ports=current.ports or ())

    def backfill(self, seconds: float, on_tick: Callable[[PipelineResult], None] | None = None) -> None:
        """Tick over the last ``seconds`` at the interval (at least ``BACKFILL_STEP_S``), ending now, without sleeping.

        For collectors that can be asked about the past — the simulator — this
        fills the window at once, so a scenario's fault is on screen from the
        first frame. Virtual ticks are at least a second apart: a 100 ms
        ``-interval`` would otherwise cost ten ticks per virtual second at start-up.
        """
        interval = max(self.settings.interval, BACKFILL_STEP_S)
        ticks = max(1, math.ceil(seconds / interval))
        start = self.clock() - (ticks - 1) * interval
        for i in range(ticks):
            result = self.tick(start + i * interval)
            if on_tick is not None:
                on_tick(result)

    def run(self, stop: threading.Event, after_tick: Callable[[], None] | None = None) -> None:
        """Tick every ``interval`` until ``stop`` is set; a slow tick skips, never bunches.

        ``after_tick`` runs right after each tick, in the gap before the next
        (the daemon's paced garbage collection: :mod:`.collection`).
        """
        interval = self.settings.interval
        next_at = self._last_progress = time.monotonic()
        while not stop.is_set():
            try:
                self.tick()
            except Exception:  # the loop must outlive a bad tick
                log.exception("tick failed")
            if after_tick is not None:
                after_tick()
            next_at += interval
            delay = next_at - time.monotonic()
            if delay < 0:
                next_at = time.monotonic()
                delay = 0.0
            stop.wait(delay)
        self._last_progress = None

    # ----------------------------------------------------------------- outputs

    @property
    def frame(self) -> Frame | None:
        """The newest frame in the window."""
        return self.window.latest

    def history(self, since: float | None = None, limit: int | None = None) -> tuple[Frame, ...]:
        """The window's frames, oldest first (see :meth:`.window.Window.frames`)."""
        return self.window.frames(since, limit)

    def run_series(self) -> RunSeries | None:
        """The run's per-tick record the report draws (``GET /v1/report``); None when none is kept."""
        return self.stepper.series

    def liveness(self) -> dict:
        """For ``/healthz``: ticks so far, how long the newest took, and whether the run loop has stopped making
        progress (a tick's duration is also the ``trainpulse.tick.duration`` histogram; this one costs nothing
        to read, where a ``/metrics`` scrape of a 64-node job daemon takes a second of its CPU).

        A tick stuck in a collector (a hung driver call) or a dead loop thread
        shows as ``stalled`` once the last tick is older than
        ``STALL_INTERVALS`` intervals (at least ``STALL_MIN_S``), so a
        liveness probe can restart the daemon. Outside the run loop (tests,
        the in-process monitor) nothing can stall.
        """
        last = self._last_progress
        age = None if last is None else time.monotonic() - last
        limit = max(STALL_INTERVALS * self.settings.interval, STALL_MIN_S)
        return {
            "ticks": self.ticks,
            "last_tick_age_s": None if age is None else round(age, 3),
            "last_tick_duration_ms": None if self._last_tick_s is None else round(self._last_tick_s * 1e3, 3),
            "stalled": age is not None and age > limit,
        }

    def snapshot(self) -> Snapshot:
        """The contract's snapshot of the newest frame and diagnosis."""
        return build_snapshot(
            self.window.latest,
            self.pipeline.diagnosis,
            self.mode,
            collectors=[c.name for c in self.collectors],
            uptime_s=self.clock() - self.started_at,
        )

    def flush(self) -> bool:
        """Record what ingest noted since the last tick, then push what exporters hold; True if all flushed."""
        self.ops.flush()
        return self.telemetry.flush()

    def close(self) -> None:
        """Release collectors, close the trace, flush and shut down exporters."""
        for collector in self.collectors:
            try:
                collector.close()
            except Exception:
                log.warning("closing collector %s failed", collector.name, exc_info=True)
        if self.recorder is not None:
            self.recorder.close()
        if self.actions is not None:
            self.actions.close()
        self.ops.flush()
        self.telemetry.shutdown()


def _own_hostnames(telemetry: Telemetry) -> frozenset[str]:
    """This daemon's names: the machine's, and the ``host.name`` it publishes (``OTEL_RESOURCE_ATTRIBUTES`` may
    set another; a simulated node of a job has its own)."""
    published = telemetry.logger_provider.resource.attributes.get("host.name")
    return frozenset(name for name in (socket.gethostname(), published) if isinstance(name, str) and name)
