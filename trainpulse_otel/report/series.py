"""The run as the report draws it: a compact, bounded record of every tick's frame and diagnosis.

:class:`RunSeries` is fed each diagnosed tick (the engine's step calls :meth:`RunSeries.add`, in a replay and in a
daemon) and keeps plain numbers: health, throughput, MFU, step time and its parts, goodput, each rank's lateness
and each GPU's temperature, clock and power. It holds at most ``max_points`` points: past that it keeps every
other point and samples half as often from then on, so a week-long run costs what an hour does. Every
transition (up to ``MAX_TRANSITIONS``) and each root cause the run was given (with its signals' evidence) are kept
whole. Every loss the job reported (the frame's ``losses``: each report's, not only the tick's newest) is kept
with its step and grad norm, bounded the same way: past ``2 * max_points`` pairs are merged, each into its worse
point (a non-finite loss or grad norm, else the higher loss), and from then on each kept point stands for twice
as many reports, again its worst, so a spike or a NaN is never thinned away. :meth:`RunSeries.to_dict` is the
plain data :mod:`.model` reads; nothing here draws.
"""

from __future__ import annotations

import math
import statistics
import threading
from array import array
from collections import deque
from typing import TYPE_CHECKING, Any

from ..diagnose import Diagnosis, PipelineResult
from ..samples import Frame, LossPoint, TrainingSample, loss_points

if TYPE_CHECKING:
    from ..logs.account import LogAccount

DEFAULT_MAX_POINTS = 1200
#: Ranks and GPUs a point keeps (the lowest-numbered): a heat map row each; more would not be read.
MAX_RANKS = 128
MAX_GPUS = 64
MAX_TRANSITIONS = 5000
MAX_CAUSES = 24
#: The phases that are a rank's own work: a rank stuck in one is late; one in a collective or idle waits for others.
OWN_PHASES = frozenset(("data", "tokenizer", "compute", "checkpoint", "checkpoint_load", "optimizer", "eval"))
#: The parts of a step a training report may carry (ms), as the step-time chart stacks them.
STEP_PARTS = ("data_wait_ms", "tokenizer_wait_ms", "sync_wait_ms", "all_reduce_wait_ms", "checkpoint_ms")
#: What a point keeps of the job's throughput (the report shows the first the run has, else steps/s).
THROUGHPUT = ("tokens_per_sec", "samples_per_sec", "tflops")
#: The signals whose raise is a moment of the loss: the step their evidence names is kept with the transition.
LOSS_SIGNALS = frozenset(("loss_spike", "nonfinite_loss"))

#: A kept loss: (its report's ordinal since the run began, global step or None, ts, loss, grad norm).
LossRow = tuple[int, "int | None", float, "float | None", "float | None"]


class RunSeries:
    """Per-tick series of one run, bounded (see the module docstring). Thread-safe: a daemon's API reads it."""

    def __init__(self, max_points: int = DEFAULT_MAX_POINTS) -> None:
        if max_points < 2:
            raise ValueError("max_points must be at least 2")
        self.max_points = max_points
        self.points: list[dict[str, Any]] = []
        self.transitions: deque[dict[str, Any]] = deque(maxlen=MAX_TRANSITIONS)
        self.causes: dict[str, dict[str, Any]] = {}
        self.rank_gpus: dict[int, tuple[str | None, int | None]] = {}
        self.diagnosis: Diagnosis = Diagnosis()
        self.first_ts: float | None = None
        self.ticks = 0
        #: What the logs the run was read from amounted to (a replay of logs sets it; a daemon's run has none).
        self.log_account: LogAccount | None = None
        self.losses: list[LossRow] = []
        self.loss_reports = 0
        self._loss_stride = 1
        self._loss_pending: LossRow | None = None
        self._loss_pending_n = 0
        self._last_loss_key: tuple | None = None
        self._stride = 1
        self._last_keys: dict[str, tuple] = {}
        self._lock = threading.Lock()

    def add(self, frame: Frame, result: PipelineResult) -> None:
        """Note one diagnosed tick."""
        with self._lock:
            self.ticks += 1
            if self.first_ts is None:
                self.first_ts = frame.ts
            self.diagnosis = result.diagnosis
            self.transitions.extend(_transition(t, result.diagnosis) for t in result.transitions)
            for p in job_losses(frame, self._last_loss_key):
                self._note_loss(p)
            self._note_causes(result.diagnosis)
            if (self.ticks - 1) % self._stride == 0:
                self._note_rank_gpus(frame.training)
                self.points.append(self._packed(point(frame, result.diagnosis)))
                if len(self.points) >= 2 * self.max_points:
                    self.points = self.points[::2]
                    self._stride *= 2

    def _note_loss(self, p: LossPoint) -> None:
        """Keep one reported loss: into the pending point (its worst), kept once it stands for a stride's reports."""
        self.loss_reports += 1
        self._last_loss_key = (p.ts, p.global_step)
        row: LossRow = (self.loss_reports, p.global_step, p.ts, p.loss, p.grad_norm)
        self._loss_pending = row if self._loss_pending is None else worse_loss(self._loss_pending, row)
        self._loss_pending_n += 1
        if self._loss_pending_n < self._loss_stride:
            return
        self.losses.append(self._loss_pending)
        self._loss_pending, self._loss_pending_n = None, 0
        if len(self.losses) >= 2 * self.max_points:
            kept = self.losses
            self.losses = [worse_loss(a, b) for a, b in zip(kept[::2], kept[1::2], strict=False)]
            self._loss_stride *= 2

    def _packed(self, p: dict[str, Any]) -> dict[str, Any]:
        """The point with its ranks and GPUs as float arrays beside key tuples shared with the point before
        (a few bytes a value, not a dict entry and a float object each)."""
        if "ranks" in p:
            p["ranks"] = (self._keys("ranks", tuple(p["ranks"])), array("f", p["ranks"].values()))
        if "gpus" in p:
            flat = [math.nan if v is None else v for reading in p["gpus"].values() for v in reading]
            p["gpus"] = (self._keys("gpus", tuple(p["gpus"])), array("f", flat))
        return p

    def _keys(self, kind: str, keys: tuple) -> tuple:
        last = self._last_keys.get(kind)
        if last != keys:
            self._last_keys[kind] = last = keys
        return last

    def _note_causes(self, diagnosis: Diagnosis) -> None:
        signals = {s.name: s for s in diagnosis.signals}
        for i, cause in enumerate(diagnosis.root_causes):
            key = cause.cause + repr(sorted(cause.subject.items()))
            seen = self.causes.get(key)
            if seen is None:
                if len(self.causes) >= MAX_CAUSES:
                    continue
                seen = self.causes[key] = {"first_ts": diagnosis.ts, "top_ticks": 0}
            seen.update(cause.to_dict(), last_ts=diagnosis.ts)
            seen["top_ticks"] += i == 0
            seen["signal_evidence"] = [signals[n].to_dict() for n in cause.signals if n in signals]

    def _note_rank_gpus(self, training: TrainingSample | None) -> None:
        for r in training.ranks if training is not None else ():
            if r.rank not in self.rank_gpus or r.gpu_index is not None:
                self.rank_gpus[r.rank] = (r.hostname, r.gpu_index)

    def to_dict(self) -> dict[str, Any]:
        """A copy of everything kept, as plain data (the report model's input)."""
        with self._lock:
            return {
                "points": [unpacked(p) for p in self.points],
                "transitions": list(self.transitions),
                "causes": [dict(c) for c in self.causes.values()],
                "rank_gpus": {rank: list(where) for rank, where in self.rank_gpus.items()},
                "diagnosis": self.diagnosis.to_dict(),
                "first_ts": self.first_ts,
                "ticks": self.ticks,
                "losses": self.losses + ([self._loss_pending] if self._loss_pending is not None else []),
                "loss_reports": self.loss_reports,
                "log_account": _account(self.log_account),
            }


def _account(account: LogAccount | None) -> dict[str, Any] | None:
    return None if account is None else {**account.to_dict(), "summary": account.summary()}


def _transition(t: Any, diagnosis: Diagnosis) -> dict[str, Any]:
    """A transition as kept: with its message and, for a raise of a loss signal, the step its evidence names."""
    out = {**t.to_dict(), "message": t.message}
    if t.event == "raised" and t.signal in LOSS_SIGNALS:
        for s in diagnosis.signals:
            if s.name == t.signal and dict(s.subject) == out["subject"]:
                step = s.evidence.get("first_step", s.evidence.get("step"))
                if isinstance(step, int):
                    out["step"] = step
                break
    return out


def job_losses(frame: Frame, last_key: tuple | None = None) -> list[LossPoint]:
    """The job's losses this tick: the frame's job-level points; where only ranks gave one, each step's worst
    rank's. A frame with no loss stream (``losses`` None) gives its report's loss once (``last_key``: the
    (ts, step) of the last one kept, so a report held over several ticks counts once)."""
    if frame.losses is None:
        t = frame.training
        points = loss_points(t, frame.ts)[:1] if t is not None and t.loss is not None else ()
        return [p for p in points if p.rank is None and (p.ts, p.global_step) != last_key]
    job = [p for p in frame.losses if p.rank is None and (p.loss is not None or p.grad_norm is not None)]
    if job or not frame.losses:
        return job
    by_step: dict[Any, LossPoint] = {}
    for p in frame.losses:
        if p.loss is None and p.grad_norm is None:
            continue
        key = p.global_step if p.global_step is not None else p.ts
        seen = by_step.get(key)
        by_step[key] = p if seen is None or _badness(p) > _badness(seen) else seen
    return [p._replace(rank=None) for p in by_step.values()]


def _finite(value: float | None) -> bool:
    return value is None or math.isfinite(value)


def _badness(p: Any) -> tuple[bool, float]:
    """How bad a loss point (a :class:`LossPoint` or a kept row) is: non-finite first, then by its loss."""
    loss, grad = (p.loss, p.grad_norm) if isinstance(p, LossPoint) else (p[3], p[4])
    bad = not (_finite(loss) and _finite(grad))
    return bad, (loss if loss is not None and math.isfinite(loss) else -math.inf)


def worse_loss(a: LossRow, b: LossRow) -> LossRow:
    """Of two kept losses the one to keep: a non-finite one (the earlier of two), else the higher loss."""
    return b if _badness(b) > _badness(a) else a


def unpacked(p: dict[str, Any]) -> dict[str, Any]:
    """A kept point as :func:`point` made it (ranks and GPUs as dicts; a missing GPU reading None)."""
    out = dict(p)
    if "ranks" in p:
        keys, values = p["ranks"]
        out["ranks"] = {rank: round(v, 1) for rank, v in zip(keys, values, strict=True)}
    if "gpus" in p:
        keys, flat = p["gpus"]
        values = [None if math.isnan(v) else round(v, 2) for v in flat]
        out["gpus"] = {key: tuple(values[3 * i : 3 * i + 3]) for i, key in enumerate(keys)}
    return out


def point(frame: Frame, diagnosis: Diagnosis) -> dict[str, Any]:
    """One tick's numbers (only those the frame has)."""
    out: dict[str, Any] = {"ts": frame.ts, "health": diagnosis.health.score}
    t = frame.training
    if t is not None:
        for name in (*THROUGHPUT, "mfu", "step_time_ms", *STEP_PARTS):
            value = getattr(t, name)
            if value is not None:
                out[name] = value
        lateness = rank_lateness(frame.ts, t)
        if lateness:
            out["ranks"] = lateness
    g = diagnosis.goodput
    if g is not None:
        out["goodput"] = g.ratio
        out["badput_s"] = dict(g.badput_s)
    gpus = {
        f"{gpu.node or ''}:{gpu.index}": (gpu.temperature_celsius, gpu.sm_clock_mhz, gpu.power_watts)
        for gpu in frame.gpus[:MAX_GPUS]
    }
    if gpus:
        out["gpus"] = gpus
    return out


def rank_lateness(ts: float, training: TrainingSample) -> dict[int, float]:
    """Each rank's lateness (ms) against the ranks' median step: its step past the median, or, for a rank
    stuck in a phase of its own work, the time in it past the median (a hung rank grows late while it reports no
    step; the ranks waiting for it in the collective do not)."""
    ranks = sorted(training.ranks, key=lambda r: r.rank)[:MAX_RANKS]
    steps = [r.step_time_ms for r in ranks if r.step_time_ms is not None]
    if not ranks:
        return {}
    median = statistics.median(steps) if steps else 0.0
    out = {}
    for r in ranks:
        late = (r.step_time_ms or median) - median
        if r.phase_since is not None and r.phase in OWN_PHASES:
            late = max(late, (ts - r.phase_since) * 1000.0 - median)
        out[r.rank] = round(max(late, 0.0), 1)
    return out
