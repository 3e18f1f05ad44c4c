"""The daemon's garbage collection: full collections between ticks, not inside them.

A job daemon's window holds its last ``history_size`` frames of every node's
GPUs and ranks — ~1,000 new samples a second at 64 nodes, several hundred
thousand objects once the window is full — and CPython's automatic full
(generation-2) collection walks them all: 150-400 ms, started by whatever
allocation tips its rule, in a tick as likely as anywhere (it was the 64-node
bench's tick p99). The samples form no reference cycles; reference counting
frees them when their frame leaves the window, so only the rare cyclic garbage
(request objects, exceptions with tracebacks) needs a full collection at all.

So, for the daemon's process only (never the in-process monitor inside a
training job: it must not change its host's collector), :class:`PacedCollection`

- collects once and freezes (``gc.freeze``) what start-up built — modules,
  classes, the app, the OTel providers: alive for the whole run, so never
  walked again (Python's documentation names this use);
- takes the automatic full collection out of reach (its threshold), leaving the
  young generations' automatic collections as they were (a few milliseconds);
- runs the full collection itself right after a tick, at most every
  :data:`FULL_COLLECTION_S`, when the next tick is most of an interval away:
  cyclic garbage still goes within a minute, and no tick waits for it.

Both are undone on exit. On CPython 3.14's incremental collector, which already
splits the old generation's work into small steps, the same calls are harmless.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from types import TracebackType

#: How often, at most, the daemon runs a full collection between ticks.
FULL_COLLECTION_S = 60.0
#: A generation-2 threshold no run reaches (gen-1 collections between two automatic full ones).
OUT_OF_REACH = 1 << 30


class PacedCollection:
    """Full garbage collections between ticks (a context manager around the daemon's run loop)."""

    def __init__(self, every_s: float = FULL_COLLECTION_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.every_s = every_s
        self.clock = clock
        self._thresholds: tuple[int, int, int] | None = None
        self._last = 0.0

    def __enter__(self) -> PacedCollection:
        gc.collect()
        gc.freeze()  # start-up's objects: alive for the run, out of every later collection
        young, middle, _ = self._thresholds = gc.get_threshold()
        gc.set_threshold(young, middle, OUT_OF_REACH)
        self._last = self.clock()
        return self

    def after_tick(self) -> None:
        """Run the full collection if it is due (call it right after a tick)."""
        now = self.clock()
        if now - self._last >= self.every_s:
            gc.collect()
            self._last = self.clock()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        if self._thresholds is not None:
            gc.set_threshold(*self._thresholds)
            self._thresholds = None
        gc.unfreeze()
