"""The hot path: what a training loop pays per step, and nothing more.

A step costs two ``perf_counter()`` calls, one ``time()`` and one tuple
appended to a bounded deque; a phase adds one float to a list. What the rank
is doing now — its heartbeat's phase — is one ``(name, perf_counter)`` tuple
stored on entering a step, a phase or a data-loader wait (and on leaving a
phase, the step's again); the heartbeat thread reads it, nothing here sends. Nothing here
validates, converts, locks or touches OpenTelemetry: the drain (on a
background thread, at collection time) does all of that. ``deque.append`` and
``popleft`` are atomic under the GIL, so the training thread and the drain
need no lock. Any fault inside TrainPulse is counted and logged once, never
raised into the loop.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from time import perf_counter, time
from typing import Any

from .aggregate import CHECKPOINT_LOAD, DATA, PHASE_INDEX, PHASES, StepRecord

log = logging.getLogger(__name__)

DEFAULT_BUFFER_STEPS = 100_000

#: Called with (step_s, phases_s, tokens) on the training thread after each step.
StepHook = Callable[[float, list, Any], None]


class _NoPhase:
    """The context an unknown phase name gets: times nothing, raises nothing."""

    def __enter__(self) -> _NoPhase:
        return self

    def __exit__(self, *exc: object) -> bool:
        return False


_NO_PHASE = _NoPhase()


class StepTimer:
    """``with recorder.step(...) as s:`` — ``s.tokens``, ``s.loss`` etc. may be set inside the block.

    ``loss`` (a float or a 0-d tensor, NaN included) is recorded as
    ``record(loss=...)`` is when the step ends: read off the training thread.
    """

    __slots__ = ("_recorder", "_t0", "loss", "padded_len", "samples", "seq_lens", "tokens")

    def __init__(
        self, recorder: StepRecorder, tokens: Any, samples: Any, seq_lens: Any, padded_len: Any, loss: Any = None
    ) -> None:
        self._recorder = recorder
        self.tokens = tokens
        self.samples = samples
        self.seq_lens = seq_lens
        self.padded_len = padded_len
        self.loss = loss

    def __enter__(self) -> StepTimer:
        recorder = self._recorder
        recorder.in_step = True
        self._t0 = t0 = perf_counter()
        recorder.now = recorder.back = ("compute", t0)
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> bool:
        end = perf_counter()
        if exc_type is None:
            self._recorder.end_step(end, end - self._t0, self.tokens, self.samples, self.seq_lens, self.padded_len)
            if self.loss is not None:
                self._recorder.record({"loss": self.loss})
        else:  # a failed step (OOM, interrupt) is not a step: forget it, let the error through
            self._recorder.in_step = False
        return False


class PhaseTimer:
    """``with recorder.phase("sync"):`` — adds its time to the current (or next) step.

    One timer per phase name, reused: a stack of start times lets the same
    phase nest (its time is then counted once per level).
    """

    __slots__ = ("_index", "_name", "_recorder", "_starts")

    def __init__(self, recorder: StepRecorder, index: int) -> None:
        self._recorder = recorder
        self._index = index
        self._name = PHASES[index]
        self._starts: list[float] = []

    def __enter__(self) -> PhaseTimer:
        t0 = perf_counter()
        self._starts.append(t0)
        self._recorder.now = (self._name, t0)
        return self

    def __exit__(self, *exc: object) -> bool:
        seconds = perf_counter() - self._starts.pop()
        recorder = self._recorder
        recorder.now = recorder.back
        recorder.phases_s[self._index] += seconds
        if not recorder.in_step and self._index != CHECKPOINT_LOAD:  # a load is the restart's time, no step's
            recorder.outside_s += seconds
        recorder.used_phases[self._index] = True
        return False


class TimedIterable:
    """An iterable whose iterator times each ``next()`` as data wait; ``len()`` passes through."""

    def __init__(self, recorder: StepRecorder, iterable: Iterable[Any]) -> None:
        self._recorder = recorder
        self._iterable = iterable

    def __len__(self) -> int:
        return len(self._iterable)  # type: ignore[arg-type]

    def __getattr__(self, name: str) -> Any:  # batch_size, dataset, sampler … of a DataLoader
        return getattr(self._iterable, name)

    def __iter__(self) -> Iterator[Any]:
        recorder = self._recorder
        add_phase = recorder.add_phase
        t0 = perf_counter()
        recorder.now = ("data", t0)
        iterator = iter(self._iterable)  # starting loader workers is waiting for data too
        while True:
            try:
                batch = next(iterator)
            except StopIteration:
                return
            t1 = perf_counter()
            add_phase(DATA, t1 - t0)
            recorder.now = recorder.back = ("compute", t1)
            yield batch
            t0 = perf_counter()
            recorder.now = ("data", t0)


class StepRecorder:
    """Buffers steps, phase times and ``record()`` fields for the drain."""

    def __init__(self, buffer_steps: int = DEFAULT_BUFFER_STEPS, keep: bool = True) -> None:
        self.keep = keep  # False on ranks that do not report: count and hook, buffer nothing
        self.steps = 0
        self.step_base = 0  # the job's global_step minus the steps counted here (from record(global_step=...))
        self.in_step = False
        self.used_phases = [False] * len(PHASES)  # a list, so the drain can read it while it changes
        self.faults = 0
        self.step_hook: StepHook | None = None
        self._buffer: deque[tuple] = deque(maxlen=buffer_steps)
        self.phase_timers = {name: PhaseTimer(self, index) for name, index in PHASE_INDEX.items()}
        self._given: deque[dict[str, Any]] = deque(maxlen=buffer_steps)
        self.phases_s = [0.0] * len(PHASES)  # of the open (or next) step, per PHASES
        self.outside_s = 0.0  # phase time outside any step since the last one
        #: What the rank is doing now (a contract phase name, since when in perf_counter time), and what it goes
        #: back to when a phase ends (the open step's compute, or the work between steps): read by the heartbeat.
        self.now: tuple[str, float] = ("idle", perf_counter())
        self.back = self.now
        self._taken = 0
        self._logged: set[str] = set()

    # --------------------------------------------------------------- hot path

    def phase(self, name: str) -> PhaseTimer | _NoPhase:
        timer = self.phase_timers.get(name)
        if timer is None:
            self._unknown_phase(name)
            return _NO_PHASE
        return timer

    def wrap(self, iterable: Iterable[Any]) -> TimedIterable:
        return TimedIterable(self, iterable)

    def add_phase_time(self, name: str, seconds: float) -> None:
        """``add_phase`` by name, for time measured outside a ``with`` block."""
        index = PHASE_INDEX.get(name)
        if index is None:
            self._unknown_phase(name)
        elif seconds >= 0:
            self.add_phase(index, seconds)

    def resumed(self, step: Any, seconds: float | None) -> bool:
        """The job resumed from the checkpoint of ``step`` (the next step is ``step + 1``), its load taking
        ``seconds`` where given; False (logged once) when ``step`` is not an int >= 0."""
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            self.log_once("checkpoint_loaded", "checkpoint_loaded(): step must be an int >= 0, got %r; ignored", step)
            return False
        self.step_base = step - self.steps
        if seconds is not None:
            self.add_phase_time("checkpoint_load", seconds)
        return True

    def _unknown_phase(self, name: str) -> None:
        self.log_once(f"phase:{name}", "unknown phase %r ignored; known: %s", name, ", ".join(PHASES))

    def add_phase(self, index: int, seconds: float) -> None:
        """Attribute ``seconds`` to a phase of the open step, or of the next one to close."""
        self.phases_s[index] += seconds
        if not self.in_step and index != CHECKPOINT_LOAD:
            self.outside_s += seconds
        self.used_phases[index] = True

    def end_step(self, end: float, step_s: float, tokens: Any, samples: Any, seq_lens: Any, padded_len: Any) -> None:
        """Close the open step that ended at ``end`` (perf_counter) and lasted ``step_s``."""
        try:
            phases, outside = self.phases_s, self.outside_s
            self.phases_s, self.outside_s = [0.0] * len(PHASES), 0.0
            self.in_step = False
            self.steps += 1
            if self.keep:  # a plain tuple, stamped in perf_counter time: the drain makes the StepRecord
                self._buffer.append((end, step_s, outside, phases, tokens, samples, seq_lens, padded_len))
            if self.step_hook is not None:
                self.step_hook(step_s, phases, tokens)
        except Exception:  # noqa: BLE001 - telemetry never raises into the training loop
            self.fault("step")

    def record(self, fields: dict[str, Any]) -> None:
        """Keep ``record(**fields)`` as given; the drain validates. A rank that keeps nothing still notes a given
        ``global_step``: its heartbeat counts from the job's step, as rank 0's does (its drain sets ``step_base``)."""
        if self.keep:
            self._given.append(fields)
            return
        step = fields.get("global_step")
        if type(step) is int:
            self.step_base = step - self.steps

    # ------------------------------------------------------------------ drain

    def take(self) -> tuple[list[StepRecord], list[dict[str, Any]]]:
        """Everything buffered since the last take (called off the training thread)."""
        to_unix = time() - perf_counter()
        records = [StepRecord(r[0] + to_unix, *r[1:]) for r in _pop_all(self._buffer)]
        self._taken += len(records)
        return records, _pop_all(self._given)

    @property
    def dropped_steps(self) -> int:
        """Steps pushed out of the full buffer before a drain took them."""
        return max(0, self.steps - self._taken - len(self._buffer)) if self.keep else 0

    # ----------------------------------------------------------------- faults

    def fault(self, where: str) -> None:
        self.faults += 1
        self.log_once(
            f"fault:{where}", "TrainPulse failed while recording a %s; training goes on", where, exc_info=True
        )

    def log_once(self, key: str, msg: str, *args: Any, exc_info: bool = False) -> None:
        if key not in self._logged:
            self._logged.add(key)
            log.warning(msg, *args, exc_info=exc_info)


def _pop_all(queue: deque) -> list:
    out = []
    try:
        while True:
            out.append(queue.popleft())
    except IndexError:
        return out
