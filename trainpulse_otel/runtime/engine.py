"""The engine: one tick of the data path, and the loop that repeats it.

collectors → latest samples → OTel instruments → frame reader → window →
diagnostic pipeline → publisher (gauges + events), plus the optional trace
recorder. The daemon serves it over HTTP; the in-process TrainingMonitor runs
one without collectors. The clock is injectable, so `snapshot -mode sim` can
run a warm-up in virtual time.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from typing import Callable, Sequence

from ..collect.base import Collected, Collector
from ..collect.trace import TraceWriter
from ..config import Settings
from ..diagnose.pipeline import DiagnosticPipeline, PipelineResult
from ..diagnose.window import Window
from ..publish.otel import DiagnosisPublisher
from ..samples import Frame, TrainingSample
from ..publish.snapshot import build_snapshot
from ..telemetry.exporters import Exports, build_exports
from ..telemetry.instruments import register_measurements
from ..telemetry.latest import LatestSamples
from ..telemetry.operational import REST, OperationalMetrics
from ..telemetry.providers import Telemetry, build_telemetry

log = logging.getLogger(__name__)

Clock = Callable[[], float]

#: How much history ``snapshot`` and ``top`` fill in before their first frame in sim (virtual time).
SIM_WARMUP_S = 180.0

#: The run loop counts as stalled when its last tick is older than this many intervals (and ``STALL_MIN_S``).
STALL_INTERVALS = 5
STALL_MIN_S = 30.0


class Engine:
    """Owns the stages of one TrainPulse pipeline and ticks them."""

    def __init__(
        self,
        settings: Settings,
        collectors: Sequence[Collector] = (),
        mode: str = "none",
        clock: Clock = time.time,
        telemetry: Telemetry | None = None,
        exports: Exports | None = None,
    ) -> None:
        self.settings = settings
        self.mode = mode
        self.collectors = tuple(collectors)
        self.clock = clock
        self.latest = LatestSamples(stale_after_s=settings.stale_after, max_ranks=settings.max_ranks)
        self.window = Window(settings.history_size)
        self.pipeline = DiagnosticPipeline()
        # Pull endpoints (/metrics, /v1/metrics) by default; the daemon passes exports that also push OTLP.
        self.exports = exports or (None if telemetry else build_exports(settings, push=False))
        self.telemetry = telemetry or build_telemetry(
            self.window.append, settings.metrics_namespace,
            readers=self.exports.readers, log_processors=self.exports.log_processors)
        register_measurements(self.telemetry.meter, self.latest, settings.metrics_namespace)
        self.ops = OperationalMetrics(self.telemetry.meter, settings.metrics_namespace)
        self.publisher = DiagnosisPublisher(self.telemetry.meter, self.telemetry.logger, settings.metrics_namespace)
        self.recorder = TraceWriter(settings.record) if settings.record else None
        self.started_at = clock()
        self.ticks = 0
        self._last_progress: float | None = None  # monotonic; set while the run loop is live
        self._tick_lock = threading.Lock()
        self._recorded_training: TrainingSample | None = None

    # ------------------------------------------------------------------ inputs

    def ingest(self, sample: TrainingSample, source: str = REST) -> None:
        """Take one validated training report; ``source`` is ``rest``, ``framework`` or ``sdk``."""
        self.latest.put_training(sample, self.clock())
        self.ops.ingested(sample, source)

    # ------------------------------------------------------------------- ticks

    def tick(self, now: float | None = None) -> PipelineResult:
        """Collect, read one frame, diagnose it and publish the result."""
        with self._tick_lock:
            started = time.perf_counter()
            now = self.clock() if now is None else now
            for collector in self.collectors:
                self.latest.put(self._collect(collector, now), now)
            self.latest.expire(now)
            self.ops.flush()
            self.telemetry.frame_reader.read(now)
            result = self.pipeline.update(self.window)
            self.publisher.publish(result)
            self._record(now)
            self.ticks += 1
            if self._last_progress is not None:
                self._last_progress = time.monotonic()
            self.ops.ticked(time.perf_counter() - started)
            return result

    def _collect(self, collector: Collector, now: float) -> Collected:
        try:
            return collector.collect(now)
        except Exception:  # noqa: BLE001 - one broken collector must not stop the others
            log.exception("collector %s failed; skipping it this tick", collector.name)
            self.ops.collector_failed(collector.name)
            return Collected()

    def _record(self, now: float) -> None:
        if self.recorder is None:
            return
        current = self.latest.current()
        training = current.training if current.training is not self._recorded_training else None
        self._recorded_training = current.training
        self.recorder.write_tick(now, current.gpus, current.host, training)

    def backfill(self, seconds: float, on_tick: Callable[[PipelineResult], None] | None = None) -> None:
        """Tick over the last ``seconds`` at the interval, ending now, without sleeping.

        For collectors that can be asked about the past — the simulator — this
        fills the window at once, so a scenario's fault is on screen from the
        first frame.
        """
        interval = self.settings.interval
        ticks = max(1, math.ceil(seconds / interval))
        start = self.clock() - (ticks - 1) * interval
        for i in range(ticks):
            result = self.tick(start + i * interval)
            if on_tick is not None:
                on_tick(result)

    def run(self, stop: threading.Event) -> None:
        """Tick every ``interval`` until ``stop`` is set; a slow tick skips, never bunches."""
        interval = self.settings.interval
        next_at = self._last_progress = time.monotonic()
        while not stop.is_set():
            try:
                self.tick()
            except Exception:  # noqa: BLE001 - the loop must outlive a bad tick
                log.exception("tick failed")
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

    def liveness(self) -> dict:
        """For ``/healthz``: ticks so far, and whether the run loop has stopped making progress.

        A tick stuck in a collector (a hung driver call) or a dead loop thread
        shows as ``stalled`` once the last tick is older than
        ``STALL_INTERVALS`` intervals (at least ``STALL_MIN_S``), so a
        liveness probe can restart the daemon. Outside the run loop (tests,
        the in-process monitor) nothing can stall.
        """
        last = self._last_progress
        age = None if last is None else time.monotonic() - last
        limit = max(STALL_INTERVALS * self.settings.interval, STALL_MIN_S)
        return {"ticks": self.ticks, "last_tick_age_s": None if age is None else round(age, 3),
                "stalled": age is not None and age > limit}

    def snapshot(self) -> dict:
        """The contract's snapshot of the newest frame and diagnosis."""
        return build_snapshot(self.window.latest, self.publisher.diagnosis, self.mode,
                              collectors=[c.name for c in self.collectors],
                              uptime_s=self.clock() - self.started_at)

    def flush(self) -> bool:
        """Record what ingest noted since the last tick, then push what exporters hold; True if all flushed."""
        self.ops.flush()
        return self.telemetry.flush()

    def close(self) -> None:
        """Release collectors, close the trace, flush and shut down exporters."""
        for collector in self.collectors:
            try:
                collector.close()
            except Exception:  # noqa: BLE001
                log.warning("closing collector %s failed", collector.name, exc_info=True)
        if self.recorder is not None:
            self.recorder.close()
        self.ops.flush()
        self.telemetry.shutdown()
