"""How entry points drive an engine: the warm-up before a first answer, and ticking in the background.

``snapshot`` and local ``top`` warm up before they show anything; local
``top`` and the in-process monitor tick on a background thread while their
own thread does something else (draw, train). Both are written once, here.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

from ..diagnose import PipelineResult
from ..publish.snapshot import Snapshot
from .engine import Engine

#: How much history ``snapshot`` and ``top`` fill in before their first frame in sim (virtual time).
SIM_WARMUP_S = 180.0


def warm_up(engine: Engine, on_tick: Callable[[PipelineResult], None] | None = None) -> None:
    """Fill the engine before its first answer.

    The simulator can be asked about the past, so in ``-mode sim`` the warm-up
    (``-warmup``, else :data:`SIM_WARMUP_S`) runs in virtual time, ending now:
    the scenario's fault and the sparklines are there from the first frame.
    Real collectors tick in real time for ``-warmup``, at least twice, so host
    rates and CPU% have an interval. No action runs on what is raised meanwhile (``engine.warming``).
    """
    engine.warming = True  # what is raised while warming up runs no action
    try:
        _warm_up(engine, on_tick)
    finally:
        engine.warming = False


def _warm_up(engine: Engine, on_tick: Callable[[PipelineResult], None] | None) -> None:
    settings = engine.settings
    if engine.mode == "sim":
        engine.backfill(settings.warmup or SIM_WARMUP_S, on_tick)
        return
    ticks = max(2, math.ceil(settings.warmup / settings.interval) + 1)
    for i in range(ticks):
        if i:
            time.sleep(settings.interval if settings.warmup else min(settings.interval, 1.0))
        result = engine.tick()
        if on_tick is not None:
            on_tick(result)


class BackgroundTicks:
    """The engine's run loop on a daemon thread, until :meth:`stop`."""

    def __init__(self, engine: Engine, name: str) -> None:
        self.engine = engine
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._delay_s = 0.0

    def start(self, delay_s: float = 0.0) -> None:
        """Start ticking after ``delay_s`` (one interval after a warm-up's last tick keeps the cadence)."""
        self._delay_s = delay_s
        self._thread.start()

    def _run(self) -> None:
        if not self._stop.wait(self._delay_s):
            self.engine.run(self._stop)

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the loop and wait (up to ``timeout_s``) for the tick in flight."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=timeout_s)


class LocalEngine:
    """An engine for local ``trainpulse top``: warmed up, then ticking in the background.

    The dashboard sees it through its ``LocalSource`` only as something that
    starts, answers snapshots and closes: it never builds or reaches into the engine.
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        scenario = f" · {engine.settings.scenario}" if engine.mode == "sim" else ""
        self.label = f"local · {engine.mode}{scenario}"
        self._ticks = BackgroundTicks(engine, "trainpulse-top-engine")

    def start(self, on_tick: Callable[[PipelineResult], None] | None, live: bool) -> None:
        """Warm up (``on_tick`` after each warm-up tick), then keep ticking if ``live``."""
        warm_up(self.engine, on_tick)
        if live:
            self._ticks.start(delay_s=self.engine.settings.interval)

    def snapshot(self) -> Snapshot:
        return self.engine.snapshot()

    def close(self) -> None:
        """Stop ticking, then flush and close the engine."""
        settings = self.engine.settings
        self._ticks.stop(timeout_s=settings.interval + settings.smi_timeout + 1.0)
        self.engine.close()
