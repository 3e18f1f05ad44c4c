"""The daemon's paced garbage collection: no automatic full collection while it runs, one after a tick when due."""

from __future__ import annotations

import gc

from trainpulse_otel.runtime import PacedCollection
from trainpulse_otel.runtime.gc_pacing import YOUNG_THRESHOLD


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def full_collections_during(action) -> int:
    seen: list[int] = []

    def note(phase: str, info: dict) -> None:
        if phase == "start" and info["generation"] == 2:
            seen.append(1)

    gc.callbacks.append(note)
    try:
        action()
    finally:
        gc.callbacks.remove(note)
    return len(seen)


def churn() -> None:
    """Enough long-lived-looking allocation to set off automatic full collections under the default thresholds."""
    kept = []
    for i in range(400_000):
        kept.append([i])
        if len(kept) > 200_000:
            kept = kept[100_000:]


def test_full_collections_run_after_a_tick_when_due_and_never_on_their_own():
    before = gc.get_threshold()
    clock = Clock()
    with PacedCollection(every_s=60.0, clock=clock) as collection:
        assert gc.get_freeze_count() > 0  # start-up's objects are out of later collections
        assert gc.get_threshold()[0] == max(before[0], YOUNG_THRESHOLD)  # the youngest pass, rarely
        assert full_collections_during(churn) == 0
        clock.now += 59.0
        assert full_collections_during(collection.after_tick) == 0  # not due yet
        clock.now += 1.0
        assert full_collections_during(collection.after_tick) == 1
        assert full_collections_during(collection.after_tick) == 0  # the next one is a minute away again
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
