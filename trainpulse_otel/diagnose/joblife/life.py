"""The ``goodput.job`` block: a job's attempts, what its restarts cost, its checkpoints and the interval to use.

:class:`JobLife` watches what the pipeline sees each tick — the job's step, its checkpoint saves (a report's
``checkpoint_ms``), the launcher's ``workers_restarted`` events — and gives the contract's ``job`` block:
``attempts``, ``interruptions``, ``mtbf_s``, ``ettr`` (the life's productive share, :meth:`AttemptLedger.ettr`),
``checkpoint`` (``last_step``, ``interval_s`` and ``save_s`` as medians of the saves seen, ``load_s`` where a
restart's load was told) and ``recommended_checkpoint_interval_s`` (Daly's, :mod:`.interval`, once an
interruption gives an MTBF, or with the config's ``mtbf`` prior; ``interval_inputs`` says which and what else it
rests on), with ``lost_s`` (TrainPulse's addition: the restarts' cost by bucket). Pure.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from itertools import pairwise
from statistics import median
from typing import Any

from ...samples import CHECKPOINT_LOADED, JOB_CANCELLED, WORKERS_RESTARTED, LogEvent, LossPoint, TrainingSample
from ..saved import NUMBER, is_row
from .attempts import FAILED, KILLED, Attempt, AttemptLedger
from .interval import IntervalAdvice, advise_interval

#: Checkpoint saves kept for the medians.
MAX_SAVES = 64
#: What happened at a moment of a tick, in the order :meth:`JobLife.observe` replays them.
RESTARTED, CANCELLED, LOADED, STEPPED = "restarted", "cancelled", "loaded", "stepped"


class JobLife:
    """One job's life as the pipeline sees it (see the module)."""

    def __init__(self, mtbf_prior_s: float | None = None) -> None:
        self.attempts = AttemptLedger()
        self.mtbf_prior_s = mtbf_prior_s  # the config's mtbf, until the job's first interruption
        self._saves: deque[tuple[float, int | None, float]] = deque(maxlen=MAX_SAVES)  # (ts, step, seconds)

    def observe(
        self,
        ts: float,
        report: TrainingSample | None,
        events: Iterable[LogEvent] = (),
        points: Iterable[LossPoint] = (),
    ) -> Attempt | None:
        """One tick, in the order things happened: the steps of every report since the last tick (``points``, the
        job's; else the tick's ``report``), the launcher's restarts and the scheduler's cancellations (a step after
        one begins a new attempt) and the checkpoint loads (the next attempt's); the attempt begun after another,
        if one was (a restart to book)."""
        # at one time, a report's own load comes before its steps, and a log line's event after the steps stamped
        # with it: a line with no stamp of its own is given the one before it
        moments: list[tuple[float, int, str, Any]] = []
        for e in events:
            if e.kind == WORKERS_RESTARTED:
                moments.append((e.ts, 2, RESTARTED, None))
            elif e.kind == JOB_CANCELLED:
                moments.append((e.ts, 2, CANCELLED, KILLED if e.details.get("end") == KILLED else FAILED))
            elif e.kind == CHECKPOINT_LOADED:  # the load's time, where the job said it
                took = e.details.get("duration_s")
                moments.append((e.ts, 2, LOADED, float(took) if isinstance(took, (int, float)) else 0.0))
        if report is not None and report.checkpoint_load_ms:  # the SDK's checkpoint_load phase
            moments.append((report.timestamp or ts, 0, LOADED, report.checkpoint_load_ms / 1000.0))
        steps = [
            (p.ts, 1, STEPPED, float(p.global_step)) for p in points if p.rank is None and p.global_step is not None
        ]
        if not steps and report is not None and report.global_step is not None:
            steps = [(ts, 1, STEPPED, float(report.global_step))]
        ordered = sorted(moments + steps, key=lambda m: (m[0], m[1]))
        last = max((i for i, m in enumerate(ordered) if m[2] == STEPPED), default=None)
        began = None
        for i, (at, _, what, value) in enumerate(ordered):
            if what == RESTARTED:
                self.attempts.restarted(at)
            elif what == CANCELLED:
                self.attempts.cancelled(at, value)
            elif what == LOADED:
                self.attempts.checkpoint_loaded(at, value)
            else:  # the process reporting now is the latest step's
                began = self.attempts.progress(at, int(value), _pid(report) if i == last else None) or began
        if report is not None and report.checkpoint_ms:
            self._saves.append((ts, report.global_step, report.checkpoint_ms / 1000.0))
        return began

    def block(self, productive_s: float, wall_s: float) -> dict[str, Any] | None:
        """The ``job`` block (``productive_s`` of the goodput ledger's ``wall_s``), None before a step."""
        ledger = self.attempts
        if not ledger.attempts:
            return None
        out = ledger.to_dict()
        ettr = ledger.ettr(productive_s, wall_s)
        out["ettr"] = None if ettr is None else round(ettr, 4)
        out["lost_s"] = {bucket: round(s, 3) for bucket, s in ledger.lost().items()}
        out["checkpoint"] = self._checkpoint()
        advice = self._advice(out["checkpoint"])
        out["recommended_checkpoint_interval_s"] = None if advice is None else round(advice.interval_s, 1)
        out["interval_inputs"] = None if advice is None else advice.to_dict()
        if out["mtbf_s"] is not None:
            out["mtbf_s"] = round(out["mtbf_s"], 1)
        return out

    def to_state(self) -> dict[str, Any]:
        """The life as plain data: its attempts and the saves seen (:meth:`restore` takes it back)."""
        return {"attempts": self.attempts.to_state(), "saves": [list(save) for save in self._saves]}

    def restore(self, state: Any) -> None:
        """Continue the life :meth:`to_state` saved; ValueError (nothing changed) when it does not hold one."""
        if not isinstance(state, dict) or not isinstance(state.get("saves"), list):
            raise ValueError("the checkpoint saves are missing")
        saves = state["saves"]
        if not all(is_row(save, NUMBER, (int, type(None)), NUMBER) for save in saves):
            raise ValueError("a checkpoint save is not [time, step, seconds]")
        attempts = AttemptLedger()
        attempts.restore(state.get("attempts"))
        self.attempts = attempts
        self._saves = deque(((float(ts), step, float(s)) for ts, step, s in saves), maxlen=MAX_SAVES)

    def _checkpoint(self) -> dict[str, Any]:
        saves = list(self._saves)
        gaps = [b[0] - a[0] for a, b in pairwise(saves)]
        loads = [a.checkpoint_load_s for a in self.attempts.attempts if a.checkpoint_load_s > 0]
        return {
            "last_step": saves[-1][1] if saves else None,
            "interval_s": round(median(gaps), 1) if gaps else None,
            "save_s": round(median(s for _, _, s in saves), 3) if saves else None,
            "load_s": round(median(loads), 3) if loads else None,
        }

    def _advice(self, checkpoint: dict[str, Any]) -> IntervalAdvice | None:
        """Daly's interval from the MTBF (observed, else the config's prior), save cost and restart cost (load
        included), with its inputs; None until the job has had a save and an MTBF is known."""
        observed = self.attempts.mtbf_s()
        mtbf, save = observed or self.mtbf_prior_s, checkpoint["save_s"]
        restarts = [a.restart_s + a.checkpoint_load_s for a in self.attempts.attempts[1:]]
        if mtbf is None or not save or mtbf <= 0:
            return None
        restart = median(restarts) if restarts else 0.0
        origin = "observed" if observed else "prior"
        return advise_interval(save, restart, mtbf, origin, current_interval_s=checkpoint["interval_s"])


def _pid(report: TrainingSample | None) -> int | None:
    """The process of the lowest rank the report lists (its heartbeat's; ranks are listed in order), where known."""
    return report.ranks[0].pid if report is not None and report.ranks else None
