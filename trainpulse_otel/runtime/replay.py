"""Replay: run the diagnostic pipeline over a recorded trace, as fast as the CPU allows.

Trace lines are grouped into ticks the way the daemon produced them: lines with
the same timestamp (or within one ``interval`` of the tick's first line) form
one tick, and a second GPU or host reading always starts a new tick. Each
tick's samples go into the same :class:`LatestSamples`, become the frame the
live reader would have built (:func:`frame_from_samples`, held equal to the
reader's samples → points → frame conversion by a property test), and go into
the same window and pipeline. The clock is the trace's own timestamps: nothing
sleeps.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

from ..collect.base import Collected
from ..collect.trace import TraceError, TraceRecord
from ..diagnose.pipeline import DiagnosticPipeline
from ..diagnose.types import Diagnosis, Transition
from ..diagnose.window import Window
from ..samples import Frame
from ..telemetry.conversion import frame_from_samples
from ..telemetry.latest import DEFAULT_STALE_AFTER_S, LatestSamples


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


def group_ticks(records: Iterable[TraceRecord], interval_s: float = 1.0) -> Iterator[list[TraceRecord]]:
    """Group time-ordered records into ticks (see the module docstring)."""
    group: list[TraceRecord] = []
    kinds: set[str] = set()
    start = 0.0
    for record in records:
        new_tick = group and (
            record.ts - start >= interval_s or (record.kind != "training" and record.kind in kinds)
        )
        if new_tick:
            yield group
            group, kinds = [], set()
        if not group:
            start = record.ts
        group.append(record)
        kinds.add(record.kind)
    if group:
        yield group


class FrameReplayer:
    """Turns groups of trace records into frames, exactly as the live reader would."""

    def __init__(self, stale_after_s: float = DEFAULT_STALE_AFTER_S) -> None:
        self.latest = LatestSamples(stale_after_s=stale_after_s)
        self._last_ts = 0.0

    def frame(self, group: list[TraceRecord]) -> Frame:
        """Apply one tick's records and return the tick's frame."""
        for record in group:
            ts = max(record.ts, self._last_ts)  # a line slightly out of order is applied in order
            self._last_ts = ts
            self.latest.put(_collected(record), ts)
        self.latest.expire(self._last_ts)
        current = self.latest.current()
        return frame_from_samples(self._last_ts, current.gpus or (), current.host, current.training)


def _collected(record: TraceRecord) -> Collected:
    return Collected(**{record.kind: record.payload})  # type: ignore[arg-type]


def replay(
    records: Iterable[TraceRecord],
    errors: list[TraceError] | None = None,
    interval_s: float = 1.0,
    history_size: int = 300,
    stale_after_s: float = DEFAULT_STALE_AFTER_S,
    pipeline: DiagnosticPipeline | None = None,
    on_frame: Callable[[Frame], None] | None = None,
) -> ReplayResult:
    """Run every tick of a trace through window and pipeline; collect the timeline."""
    result = ReplayResult(errors=errors if errors is not None else [])
    replayer = FrameReplayer(stale_after_s)
    window = Window(history_size)
    pipeline = pipeline or DiagnosticPipeline()
    for group in group_ticks(records, interval_s):
        frame = replayer.frame(group)
        window.append(frame)
        if on_frame is not None:
            on_frame(frame)
        step = pipeline.update(window)
        result.timeline.extend(step.transitions)
        result.diagnosis = step.diagnosis
        result.ticks += 1
    return result
