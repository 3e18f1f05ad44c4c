"""A job's attempts across restarts, from what it reports: where each began and ended, and what each restart cost.

An attempt begins with its first step and ends with a failure, a kill or the job's end. A new one is seen from
the job's own words and numbers, never from a call: the launcher saying it restarts the workers
(:meth:`AttemptLedger.restarted`), the step going back to a checkpoint's (:meth:`AttemptLedger.progress`), a
rank's reports resuming from a new process after a gap. What each restart cost, booked in three parts:

- ``lost_progress``: the time the ended attempt spent on steps the new one does again — from when it passed the
  step the new one resumed from to its last progress;
- ``checkpoint_load``: the new attempt's load, where the job said how long it took;
- ``restart``: the rest of the gap from the ended attempt's last progress to the new one's first step (noticing
  the failure, rescheduling, starting the processes).

The ETTR of the life is then productive time over wall time; MTBF the attempts' running time per interruption.
Pure: times and steps in, the ledger out; bounded by :data:`MAX_POINTS` progress points per attempt.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Any

from ..saved import NUMBER, is_row

#: Progress points (step, time) an attempt keeps to find when it passed a step; beyond, every other one is
#: dropped (the resolution halves, the span stays whole).
MAX_POINTS = 4096
#: Why an attempt ended: a failure, a kill (the scheduler preempted or cancelled a sound job) — each an
#: interruption, the job going on in a new attempt — or the end.
FAILED, KILLED, ENDED = "failure", "kill", "end"
INTERRUPTED = frozenset((FAILED, KILLED))
#: Progress points the running attempt keeps in a saved state (:meth:`AttemptLedger.to_state`): enough to find
#: the step a restart resumes from to within 1/512 of the attempt's span; an ended attempt keeps none.
SAVED_POINTS = 512
#: An attempt's fields as saved, with their types (a state file is checked against them before it is trusted).
_SAVED_FIELDS: dict[str, tuple[type, ...]] = {
    "index": (int,),
    "start": (int, float),
    "first_step": (int, type(None)),
    "last_step": (int, type(None)),
    "end": (int, float, type(None)),
    "end_reason": (str, type(None)),
    "resumed_from_step": (int, type(None)),
    "pid": (int, type(None)),
    "lost_progress_s": (int, float),
    "restart_s": (int, float),
    "checkpoint_load_s": (int, float),
}


@dataclass
class Attempt:
    """One attempt: its span, its steps, why it ended, and what the restart into it cost."""

    index: int
    start: float
    first_step: int | None = None
    last_step: int | None = None
    end: float | None = None
    end_reason: str | None = None
    resumed_from_step: int | None = None
    pid: int | None = None
    lost_progress_s: float = 0.0
    restart_s: float = 0.0
    checkpoint_load_s: float = 0.0
    points: list[tuple[int, float]] = field(default_factory=list, repr=False)

    @property
    def last_progress(self) -> float:
        return self.points[-1][1] if self.points else self.start

    def add(self, step: int, ts: float) -> None:
        if self.first_step is None:
            self.first_step = step
        self.last_step = step
        self.points.append((step, ts))
        if len(self.points) > MAX_POINTS:
            self.points = self.points[::2] + ([self.points[-1]] if len(self.points) % 2 == 0 else [])

    def passed(self, step: int) -> float | None:
        """When this attempt had done ``step`` (the latest point at or before it), None if it never had."""
        at = bisect_right(self.points, (step, float("inf")))
        return self.points[at - 1][1] if at else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "start": self.start,
            "end": self.end,
            "first_step": self.first_step,
            "last_step": self.last_step,
            "end_reason": self.end_reason,
        }

    def to_state(self, keep_points: int) -> dict[str, Any]:
        """Every field, with at most ``keep_points`` progress points (evenly thinned, the last kept)."""
        out: dict[str, Any] = {name: getattr(self, name) for name in _SAVED_FIELDS}
        points = self.points
        if len(points) > keep_points:
            stride = -(-len(points) // max(1, keep_points))
            points = [*points[::stride][: max(0, keep_points - 1)], points[-1]] if keep_points else []
        out["points"] = [[step, ts] for step, ts in points]
        return out

    @classmethod
    def from_state(cls, state: Any) -> Attempt:
        """The attempt :meth:`to_state` saved; ValueError naming the field that is missing or of a wrong type."""
        if not isinstance(state, dict):
            raise ValueError("an attempt is not an object")
        for name, types in _SAVED_FIELDS.items():
            if not isinstance(state.get(name), types) or isinstance(state.get(name), bool):
                raise ValueError(f"attempt field {name!r} is missing or not {'/'.join(t.__name__ for t in types)}")
        points = state.get("points", [])
        if not isinstance(points, list) or not all(is_row(p, int, NUMBER) for p in points):
            raise ValueError("attempt field 'points' is not a list of [step, time]")
        attempt = cls(**{name: state[name] for name in _SAVED_FIELDS})
        attempt.points = sorted((int(step), float(ts)) for step, ts in points)
        return attempt


class AttemptLedger:
    """The attempts of one job, in order (see the module)."""

    def __init__(self) -> None:
        self.attempts: list[Attempt] = []
        self._restart_said: float | None = None  # a launcher said it restarts the workers, at this time
        self._ended_pids: set[int] = set()  # the processes of the ended attempts
        self._end_said: str | None = None  # why the scheduler said it ended the current attempt
        self._load_s = 0.0  # a checkpoint load told since the last attempt began

    @property
    def current(self) -> Attempt | None:
        return self.attempts[-1] if self.attempts else None

    def progress(self, ts: float, step: int, pid: int | None = None) -> Attempt | None:
        """A step reported at ``ts`` (``pid``: the reporting process's, where known): the current attempt's, or —
        after a restart was said, with the step gone back, or from a new process — the first of a new one, which
        is returned (a restart: the first attempt is no restart's)."""
        now = self.current
        if now is None:
            self._begin(ts, step, pid)
            return None
        if step == now.last_step:
            return None  # the same step again: a report repeated (or another rank's), no progress, no new attempt
        if ts < now.last_progress:
            return None  # a report older than the latest (another node's, late): neither progress nor a restart
        if pid in self._ended_pids:
            pid = None  # an ended attempt's process, still in a heartbeat not yet replaced: no news
        went_back = now.last_step is not None and step < now.last_step
        if went_back or self._restart_said is not None:  # a pid still the ended attempt's is not the new one's
            self._end(now, self._end_said or FAILED)
            return self._begin(ts, step, None if pid == now.pid else pid)
        if pid is not None and now.pid is not None and pid != now.pid:
            self._end(now, FAILED)
            return self._begin(ts, step, pid)
        now.pid = now.pid if pid is None else pid
        now.add(step, ts)
        return None

    def restarted(self, ts: float) -> None:
        """The launcher said it restarts the workers (torchrun's ``Worker group FAILED. 3/3 attempts left; will
        restart worker group``): the next step is a new attempt's."""
        self._restart_said = ts

    def cancelled(self, ts: float, end: str) -> None:
        """The scheduler ended the job at ``ts`` (Slurm's ``CANCELLED AT … DUE TO PREEMPTION``): the attempt ended
        so (``end``: :data:`KILLED` or :data:`FAILED`), and a step after it — a requeued job's — is a new one's."""
        self._restart_said = ts
        self._end_said = end if end in INTERRUPTED else FAILED

    def checkpoint_loaded(self, ts: float, duration_s: float) -> None:
        """A checkpoint was loaded at ``ts``, taking ``duration_s``: a resume, so — once the job has run — the next
        step is a new attempt's, and the load its cost."""
        if duration_s > 0:
            self._load_s += duration_s
        if self.attempts:
            self._restart_said = ts

    def finish(self, ts: float, reason: str = ENDED) -> None:
        """The job ended (or was killed) at ``ts``: the current attempt ends there."""
        now = self.current
        if now is not None and now.end is None:
            self._end(now, reason)

    def _begin(self, ts: float, step: int, pid: int | None = None) -> Attempt:
        previous = self.current
        attempt = Attempt(index=len(self.attempts), start=ts, pid=pid)
        attempt.add(step, ts)
        if previous is not None:
            attempt.resumed_from_step = resumed = step - 1
            if step <= (previous.last_step or 0):  # steps done again: the ended attempt's time past ``resumed``
                passed = previous.passed(resumed)
                attempt.lost_progress_s = previous.last_progress - (passed if passed is not None else previous.start)
            gap = max(0.0, ts - previous.last_progress)
            attempt.checkpoint_load_s = min(self._load_s, gap)
            attempt.restart_s = gap - attempt.checkpoint_load_s
        self.attempts.append(attempt)
        self._restart_said, self._load_s, self._end_said = None, 0.0, None
        return attempt

    def _end(self, attempt: Attempt, reason: str) -> None:
        attempt.end, attempt.end_reason = attempt.last_progress, reason
        if attempt.pid is not None:
            self._ended_pids.add(attempt.pid)

    # ------------------------------------------------------------------ the ledger's figures

    @property
    def interruptions(self) -> int:
        return sum(1 for a in self.attempts if a.end_reason in INTERRUPTED)

    def mtbf_s(self) -> float | None:
        """The attempts' running time per interruption; None before the first."""
        if not self.interruptions:
            return None
        running = sum(a.last_progress - a.start for a in self.attempts)
        return running / self.interruptions

    def lost(self) -> dict[str, float]:
        """Seconds lost to the restarts, by bucket: ``lost_progress``, ``restart``, ``checkpoint_load``."""
        return {
            "lost_progress": sum(a.lost_progress_s for a in self.attempts),
            "restart": sum(a.restart_s for a in self.attempts),
            "checkpoint_load": sum(a.checkpoint_load_s for a in self.attempts),
        }

    def ettr(self, productive_s: float, wall_s: float | None) -> float | None:
        """The life's ETTR: ``productive_s`` (the goodput's, the re-done steps already booked as lost progress)
        over ``wall_s``, the goodput ledger's wall time since the first attempt began — one clock for both, the
        ledger's (a job daemon's, not its nodes'); None before the first attempt or without wall time."""
        if not self.attempts or not wall_s or wall_s <= 0:
            return None
        return max(0.0, min(1.0, productive_s / wall_s))

    def to_dict(self) -> dict[str, Any]:
        return {
            "attempts": [a.to_dict() for a in self.attempts],
            "interruptions": self.interruptions,
            "mtbf_s": self.mtbf_s(),
        }

    # ------------------------------------------------------------------ saved and restored

    def to_state(self) -> dict[str, Any]:
        """The ledger as plain data (:meth:`restore` takes it back): the running attempt keeps
        :data:`SAVED_POINTS` progress points, the ended ones none."""
        last = len(self.attempts) - 1
        return {
            "attempts": [a.to_state(SAVED_POINTS if i == last else 0) for i, a in enumerate(self.attempts)],
            "restart_said": self._restart_said,
            "load_s": self._load_s,
            "end_said": self._end_said,
        }

    def restore(self, state: Any) -> None:
        """Continue the ledger :meth:`to_state` saved; ValueError (nothing changed) when it does not hold one."""
        if not isinstance(state, dict) or not isinstance(state.get("attempts"), list):
            raise ValueError("the attempts are missing")
        said, load = state.get("restart_said"), state.get("load_s", 0.0)
        if not isinstance(said, (int, float, type(None))) or not isinstance(load, (int, float)):
            raise ValueError("'restart_said' or 'load_s' is not a number")
        end_said = state.get("end_said")
        if end_said not in (None, *INTERRUPTED):
            raise ValueError("'end_said' is not why an attempt ends")
        attempts = [Attempt.from_state(a) for a in state["attempts"]]
        self.attempts, self._restart_said, self._load_s, self._end_said = attempts, said, float(load), end_said
        self._ended_pids = {a.pid for a in attempts if a.end is not None and a.pid is not None}
