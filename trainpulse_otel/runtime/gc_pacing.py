"""Garbage collection for the daemon and for replay: rarely, and never inside a tick.

A job daemon's detectors, receiver and window hold tens of thousands of objects, and CPython's
automatic full collection walks them all (150-400 ms at 64 nodes) inside whatever allocation tips
its rule, a tick as likely as anywhere. The samples form no reference cycles, so only rare cyclic
garbage needs a collection at all. For the daemon's process only (never the in-process monitor's
host), :class:`PacedCollection` freezes what start-up built, takes the automatic full collection
out of reach and runs the youngest pass every :data:`YOUNG_THRESHOLD` allocations, and runs the
full collection itself right after a tick, at most every :data:`FULL_COLLECTION_S`::

    with PacedCollection() as collection:  # undone on exit
        engine.run(stop, after_tick=collection.after_tick)

A replay (:func:`rare_cycle_collection`) only runs the youngest pass as rarely, and gives its
caller's thresholds back. Why, and what it measured: docs/performance.md ("Garbage collection").
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import TracebackType

#: How often, at most, the daemon runs a full collection between ticks.
FULL_COLLECTION_S = 60.0
#: A generation-2 threshold no run reaches (gen-1 collections between two automatic full ones).
OUT_OF_REACH = 1 << 30
#: Allocations between two of the youngest generation's passes (Python's default: 700): at the default, a
#: 32-node job replay's passes found nothing to collect and cost ~5 % of its CPU.
YOUNG_THRESHOLD = 10_000


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
        gc.set_threshold(max(young, YOUNG_THRESHOLD), middle, OUT_OF_REACH)
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


@contextmanager
def rare_cycle_collection(threshold: int = YOUNG_THRESHOLD) -> Iterator[None]:
    """The youngest generation's pass every ``threshold`` allocations for the duration of the block (a replay:
    hundreds of samples a tick, no reference cycles); the caller's thresholds are restored on the way out."""
    before = gc.get_threshold()
    gc.set_threshold(max(threshold, before[0]), *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)
