"""Goodput: how much of the job's wall time went into productive steps, and where the rest went.

One ledger (:mod:`.ledger`): each report *claims* its steps' productive time (steps × the job's ideal
step, :mod:`.budget`) and its losses by cause, and the ledger books the claims against the wall time
since the first training report, each second once — so the badput by cause, ``unattributed``
included, sums to the wall time not counted as productive. A report's claims, most certain first:

- the part of a stall not yet counted, then its save (``checkpoint_ms``, whole), to their causes;
- every step of a report with a non-finite loss or gradient norm, whole, to ``numerical_instability``
  (none of it productive);
- its steps' productive time;
- its step budget's other components, to the cause that books each (:class:`~.spec.CauseSpec`
  ``books``), ``sync`` and ``compute`` to the highest-ranked active cause behind them (a straggler's
  part and ``load_imbalance``'s split), ``compute`` — the residual — last.

Wall time while ``training_stalled`` is raised is booked to the cause that names it as it passes; wall
time no claim takes is ``unattributed``. Goodput is productive time over that wall time (``ratio``) and
over the last ``WINDOW_S`` (``window_ratio``). Every badput figure only grows (they are exported as
counters). Pure: the clock is the reports'. The attribution and its reasons: docs/goodput.md.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

from ..samples import TrainingSample
from .budget import StepBudget, saved_ms
from .ledger import PRODUCTIVE, UNATTRIBUTED, WallLedger
from .rootcause.ranks import LOAD_IMBALANCE, STRAGGLER_RANK
from .saved import NUMBER, is_row
from .spec import NUMERICS, ROLE_STALL
from .stats import decay
from .types import Goodput, RankLoss, RootCause
from .vocabulary import Vocabulary

#: The badput of a job's restarts, beside its causes' (the contract's buckets, :mod:`.joblife`).
LOST_PROGRESS, RESTART, CHECKPOINT_LOAD = "lost_progress", "restart", "checkpoint_load"
RESTART_BUCKETS = frozenset((LOST_PROGRESS, RESTART, CHECKPOINT_LOAD))

#: The span of ``window_ratio``.
WINDOW_S = 600.0
#: The memory (seconds) of the recent loss rates root causes are ranked by.
RECENT_TAU_S = 120.0
#: How long claims and unclaimed wall time wait for each other, in ideal steps: a report's steps may have
#: begun before the previous report (steps end and reports are sent at different times).
CARRY_STEPS = 2.0
#: The order a report's claims are booked in (the components not named come between productive and compute).
_FIRST = ("stall", "checkpoint", NUMERICS)
_LAST = "compute"


class GoodputAccount:
    """Books each report's productive time and losses in one wall-time ledger; which cause a component's loss
    goes to comes from the causes' specs (``books``, ``wait``) in ``vocabulary``."""

    def __init__(self, vocabulary: Vocabulary | None = None, window_s: float = WINDOW_S) -> None:
        if vocabulary is None:
            from .builtins import VOCABULARY

            vocabulary = VOCABULARY
        self._booked: Mapping[str, str] = vocabulary.booked
        self._waits = vocabulary.waits
        self._stall_signal = vocabulary.roles.get(ROLE_STALL)  # the signal whose time is the stall
        self.window_s = window_s
        self.ledger = WallLedger()
        self._ideal_ms: float | None = None
        self._waiting_steps = 0  # steps seen before the ideal step was known
        self._recent: deque[tuple[float, float]] = deque()  # (ts, productive seconds booked) per report
        self._recent_s = 0.0
        self._loss_rates: dict[str, float] = {}  # per budget component: seconds lost per second, recently
        self._loss_ts: float | None = None
        self._last_report_ts: float | None = None
        self._stall_counted_s = 0.0  # stall seconds since the last report already counted
        self._stall_ts: float | None = None  # counted by stall() up to here, not yet booked to a cause

    @property
    def first_ts(self) -> float | None:
        """When the first training report came (the wall time is counted from it)."""
        return self.ledger.start

    @property
    def ideal_ms(self) -> float | None:
        """The ideal step the account books productive time by (None until known)."""
        return self._ideal_ms

    @property
    def productive_s(self) -> float:
        return self.ledger.productive_s

    @property
    def badput_s(self) -> dict[str, float]:
        return self.ledger.booked

    def add(
        self,
        ts: float,
        report: TrainingSample,
        budget: StepBudget | None,
        ideal_ms: float | None,
        causes: Sequence[RootCause],
        straggler_share: float,
        steps: int = 1,
    ) -> None:
        """Account for one new training report at ``ts`` standing for ``steps`` steps, with their budget;
        ``straggler_share``: the share of the ranks' wait for slower peers the raised stragglers explain (none
        without one), the rest being ``load_imbalance``'s."""
        self._last_report_ts = ts
        stall_counted, self._stall_counted_s, self._stall_ts = self._stall_counted_s, 0.0, None
        if ideal_ms is not None:
            self._ideal_ms = ideal_ms
        rates = self.recent_losses(ts)
        if _diverged(report):
            claims = self._diverged_claims(report, steps, rates)
        else:
            claims = self._claims(report, budget, ideal_ms, causes, straggler_share, steps, stall_counted, rates)
        self._loss_rates = rates
        before = self.ledger.productive_s
        self.ledger.advance(ts, claims, self._carry_s())
        productive = self.ledger.productive_s - before
        self._recent.append((ts, productive))
        self._recent_s += productive

    def _claims(
        self,
        report: TrainingSample,
        budget: StepBudget | None,
        ideal_ms: float | None,
        causes: Sequence[RootCause],
        straggler_share: float,
        steps: int,
        stall_counted: float,
        rates: dict[str, float],
    ) -> list[tuple[str, float]]:
        """A report's claims, in booking order (``rates`` gain its losses)."""
        productive = 0.0
        if ideal_ms is not None:
            productive = (steps + self._waiting_steps) * ideal_ms / 1000.0
            self._waiting_steps = 0
        elif self.ledger.start is not None:  # the first report's steps ended before the wall time is counted from
            self._waiting_steps += steps
        if budget is None:  # no step time, or the ideal not known yet: a reported save is still the save's time
            saved = saved_ms(report, steps) / 1000.0
            return [(self._cause_of("checkpoint", causes), saved), (PRODUCTIVE, productive)]
        lost: dict[str, float] = {}
        for component, ms in budget.lost_ms.items():
            times = budget.steps if component == "checkpoint" else steps  # a reported save counts whole
            if ms > 0 and times:
                lost[component] = times * ms / 1000.0
                rates[component] = rates.get(component, 0.0) + lost[component] / RECENT_TAU_S
        if "stall" in lost:  # the seconds stall() counted as they passed are booked already
            lost["stall"] = max(0.0, lost["stall"] - stall_counted)
        order = [c for c in _FIRST if c in lost] + [PRODUCTIVE]
        order += [c for c in lost if c not in _FIRST and c != _LAST] + ([_LAST] if _LAST in lost else [])
        claims: list[tuple[str, float]] = []
        for component in order:
            if component == PRODUCTIVE:
                claims.append((PRODUCTIVE, productive))
                continue
            claims += [
                (cause, lost[component] * part) for cause, part in self._causes_of(component, causes, straggler_share)
            ]
        return claims

    def _diverged_claims(self, report: TrainingSample, steps: int, rates: dict[str, float]) -> list[tuple[str, float]]:
        """A report whose loss is not finite: its steps' whole wall time is badput, none of it productive."""
        step_ms = report.step_time_ms or self._ideal_ms or 0.0
        lost_s = steps * step_ms / 1000.0
        if lost_s <= 0:
            return []
        rates[NUMERICS] = rates.get(NUMERICS, 0.0) + lost_s / RECENT_TAU_S
        return [(self._booked.get(NUMERICS, UNATTRIBUTED), lost_s)]

    def _carry_s(self) -> float | None:
        """How long claims and open wall time may wait (None before the ideal step is known: the warm-up's
        steps claim their time once it is)."""
        if self._ideal_ms is None:
            return None
        return CARRY_STEPS * self._ideal_ms / 1000.0

    def booked_now(self) -> dict[str, float]:
        """The seconds booked to each cause so far (what :meth:`book_restart` measures a restart's gap from)."""
        return dict(self.ledger.booked)

    def book_restart(self, before: Mapping[str, float], lost_progress_s: float, load_s: float) -> None:
        """A new attempt began: the time booked since ``before`` (:meth:`booked_now` at the ended attempt's last
        step: the gap a stall's causes took) and the open time no report claimed are the restart's, its checkpoint
        load first; ``lost_progress_s`` of the productive time went to steps the new attempt does again."""
        ledger, load_left = self.ledger, load_s
        ledger.book_open(UNATTRIBUTED)  # the gap's wall time no report claimed, moved on with the rest below
        for key, now in list(ledger.booked.items()):
            gap = now - before.get(key, 0.0)
            if gap <= 0 or key in RESTART_BUCKETS:
                continue
            to_load = min(gap, load_left)
            load_left -= ledger.rebook(key, to_load, CHECKPOINT_LOAD)
            ledger.rebook(key, gap - to_load, RESTART)
        ledger.rebook(PRODUCTIVE, lost_progress_s, LOST_PROGRESS)

    def to_state(self) -> dict[str, Any]:
        """What the account has booked, and the ideal step it books by, as plain data (:meth:`restore`)."""
        return {"ledger": self.ledger.to_state(), "ideal_ms": self._ideal_ms, "recent": [list(r) for r in self._recent]}

    def restore(self, state: Any) -> None:
        """Continue the account :meth:`to_state` saved; ValueError (nothing changed) when it does not hold one."""
        if not isinstance(state, dict):
            raise ValueError("the goodput is not an object")
        ideal, recent = state.get("ideal_ms"), state.get("recent", [])
        if ideal is not None and (not isinstance(ideal, (int, float)) or not ideal > 0):
            raise ValueError("the goodput's ideal step is not a positive number")
        if not isinstance(recent, list) or not all(is_row(r, NUMBER, NUMBER) for r in recent):
            raise ValueError("the goodput's recent steps are not [time, seconds] pairs")
        self.ledger.restore(state.get("ledger"))
        self._ideal_ms = None if ideal is None else float(ideal)
        self._recent = deque((float(ts), float(s)) for ts, s in recent)
        self._recent_s = sum(s for _, s in self._recent)

    def stall(self, ts: float) -> None:
        """Count the time since the last report as stalled, up to ``ts`` (each tick ``training_stalled`` is raised).

        The seconds go into the recent losses at once — so the ranking sees them on the tick the stall is
        raised — and into the ledger with :meth:`attribute_stall`, once the causes are known.
        """
        if self._last_report_ts is None or self._ideal_ms is None:
            return
        new = ts - self._last_report_ts - self._stall_counted_s
        if new <= 0:
            return
        self._stall_counted_s += new
        self._stall_ts = ts
        rates = self.recent_losses(ts)
        rates["stall"] = rates.get("stall", 0.0) + new / RECENT_TAU_S
        self._loss_rates = rates

    def attribute_stall(self, causes: Sequence[RootCause]) -> None:
        """The wall time :meth:`stall` counted, booked to the cause of the stall."""
        if self._stall_ts is not None:
            self.ledger.book_now(self._stall_ts, self._cause_of("stall", causes))
            self._stall_ts = None

    def recent_losses(self, ts: float) -> dict[str, float]:
        """Each budget component's recent loss, as a share of wall time (a leaky sum over ~2 minutes)."""
        if self._loss_ts is None:
            self._loss_ts = ts
            return dict(self._loss_rates)
        keep = decay(ts - self._loss_ts, RECENT_TAU_S)
        self._loss_rates = {c: r * keep for c, r in self._loss_rates.items()}
        self._loss_ts = ts
        return dict(self._loss_rates)

    def goodput(self, ts: float, ranks: tuple[RankLoss, ...] = ()) -> Goodput | None:
        """The goodput at ``ts`` (None before the ideal step is known), listing ``ranks`` (:mod:`.rank_budget`)."""
        wall = self.ledger.wall_s
        if self._ideal_ms is None or wall <= 0:
            return None
        while self._recent and self._recent[0][0] <= ts - self.window_s:
            self._recent_s -= self._recent.popleft()[1]
        window = min(wall, self.window_s)
        return Goodput(  # open time — at most two steps no report has claimed yet — counts as productive till one does
            ratio=min(1.0, (self.ledger.productive_s + self.ledger.open_s) / wall),
            window_ratio=min(1.0, max(0.0, self._recent_s) / window),
            ideal_step_time_ms=self._ideal_ms,
            badput_s=dict(sorted(self.ledger.booked.items())),
            ranks=ranks,
            wall_s=wall,
        )

    def _causes_of(
        self, component: str, causes: Sequence[RootCause], straggler_share: float
    ) -> tuple[tuple[str, float], ...]:
        """The causes a component's loss goes to, each with its part: the wait for slower peers is split between
        the straggler (or what makes it late) and the other ranks' imbalance, any other component is one cause's."""
        if component != "sync" or straggler_share >= 1.0:
            return ((self._cause_of(component, causes), 1.0),)
        if straggler_share <= 0.0:
            return ((LOAD_IMBALANCE.name, 1.0),)
        return (self._cause_of(component, causes), straggler_share), (LOAD_IMBALANCE.name, 1.0 - straggler_share)

    def _cause_of(self, component: str, causes: Sequence[RootCause]) -> str:
        booked = self._booked.get(component)
        if booked is not None:
            return booked
        if component == "stall":  # the deepest ranked cause that explains the stall
            return next((c.cause for c in causes if self._stall_signal in c.signals), UNATTRIBUTED)
        deeper = next((c.cause for c in causes if c.cause not in self._waits), None)
        if component == "sync":  # waiting for a late rank: the straggler, or what makes it late
            return deeper or STRAGGLER_RANK.name
        return deeper or UNATTRIBUTED


def _diverged(report: TrainingSample) -> bool:
    """True when the report's loss or gradient norm is NaN or infinite."""
    return any(v is not None and not math.isfinite(v) for v in (report.loss, report.grad_norm))
