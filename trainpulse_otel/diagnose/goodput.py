"""Goodput: how much of the job's wall time went into productive steps, and where the rest went.

Productive time is steps × the job's ideal step (:mod:`.budget`); goodput is that over the wall
time since the first training report (``ratio``) and over the last ``WINDOW_S``
(``window_ratio``). The seconds lost are *badput*, attributed to root-cause names as Google's
ml-goodput-measurement attributes badput to categories:

- a step budget's component to the cause that books it (its :class:`~.spec.CauseSpec`
  ``books``: a checkpoint's time is ``checkpoint_io_bound``'s), ``compute`` and ``sync`` to the
  highest-ranked active cause behind them (a straggler's part and ``load_imbalance``'s split);
- every step of a report with a non-finite loss or gradient norm, whole, to ``numerical_instability``;
- wall time while ``training_stalled`` is raised to the cause that names it, as it passes;
- the rest to ``unattributed``.

Every badput figure only grows (they are exported as counters). Pure: the clock is the reports'.
The attribution and its reasons: docs/signals.md ("Goodput").
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping, Sequence

from ..samples import TrainingSample
from .budget import StepBudget, saved_ms
from .detectors.stall import TRAINING_STALLED
from .rootcause.ranks import LOAD_IMBALANCE, STRAGGLER_RANK
from .spec import NUMERICS
from .stats import decay
from .types import Goodput, RankLoss, RootCause
from .vocabulary import Vocabulary

#: The span of ``window_ratio``.
WINDOW_S = 600.0
#: The memory (seconds) of the recent loss rates root causes are ranked by.
RECENT_TAU_S = 120.0
UNATTRIBUTED = "unattributed"


class GoodputAccount:
    """Accumulates productive and lost time report by report; which cause a component's loss goes to comes from
    the causes' specs (``books``, ``wait``) in ``vocabulary``."""

    def __init__(self, vocabulary: Vocabulary | None = None, window_s: float = WINDOW_S) -> None:
        if vocabulary is None:
            from .builtins import VOCABULARY

            vocabulary = VOCABULARY
        self._booked: Mapping[str, str] = vocabulary.booked
        self._waits = vocabulary.waits
        self.window_s = window_s
        self.first_ts: float | None = None
        self.productive_s = 0.0
        self.badput_s: dict[str, float] = {}
        self._ideal_ms: float | None = None
        self._waiting_steps = 0  # steps seen before the ideal step was known
        self._recent: deque[tuple[float, float]] = deque()  # (ts, productive seconds) per report
        self._recent_s = 0.0
        self._loss_rates: dict[str, float] = {}  # per budget component: seconds lost per second, recently
        self._loss_ts: float | None = None
        self._last_report_ts: float | None = None
        self._stall_counted_s = 0.0  # stall seconds since the last report already in the badput
        self._stall_pending_s = 0.0  # counted by stall(), not yet attributed to a cause

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
        if self.first_ts is None:
            self.first_ts = ts
        self._last_report_ts = ts
        stall_counted, self._stall_counted_s = self._stall_counted_s, 0.0
        if _diverged(report):
            self._add_diverged(ts, report, steps)
            return
        productive = 0.0
        if ideal_ms is not None:
            productive = (steps + self._waiting_steps) * ideal_ms / 1000.0
            self._waiting_steps = 0
            self._ideal_ms = ideal_ms
        else:
            self._waiting_steps += steps
        self.productive_s += productive
        self._recent.append((ts, productive))
        self._recent_s += productive
        rates = self.recent_losses(ts)
        if budget is not None:
            for component, ms in budget.lost_ms.items():
                times = budget.steps if component == "checkpoint" else steps  # a reported save counts whole
                if ms > 0 and times:
                    lost_s = times * ms / 1000.0
                    if component == "stall":  # the seconds stall() counted as they passed are in already
                        lost_s, stall_counted = max(0.0, lost_s - stall_counted), max(0.0, stall_counted - lost_s)
                    for cause, part in self._causes_of(component, causes, straggler_share):
                        self.badput_s[cause] = self.badput_s.get(cause, 0.0) + lost_s * part
                    rates[component] = rates.get(component, 0.0) + lost_s / RECENT_TAU_S
        elif report.checkpoint_ms:  # before the ideal step is known, a reported save's time is still the save's
            for cause, part in self._causes_of("checkpoint", causes, straggler_share):
                self.badput_s[cause] = self.badput_s.get(cause, 0.0) + saved_ms(report, steps) / 1000.0 * part
        self._loss_rates = rates
        self._settle_unattributed(ts)

    def _add_diverged(self, ts: float, report: TrainingSample, steps: int) -> None:
        """A report whose loss is not finite: its steps' whole wall time is badput, none of it productive."""
        step_ms = report.step_time_ms or self._ideal_ms or 0.0
        lost_s = steps * step_ms / 1000.0
        rates = self.recent_losses(ts)
        if lost_s > 0:
            cause = self._booked.get(NUMERICS, UNATTRIBUTED)
            self.badput_s[cause] = self.badput_s.get(cause, 0.0) + lost_s
            rates[NUMERICS] = rates.get(NUMERICS, 0.0) + lost_s / RECENT_TAU_S
        self._loss_rates = rates
        self._recent.append((ts, 0.0))
        self._settle_unattributed(ts)

    def stall(self, ts: float) -> None:
        """Count the time since the last report as stalled, up to ``ts`` (each tick ``training_stalled`` is raised).

        The seconds go into the recent losses at once — so the ranking sees them on the tick the stall is
        raised — and into the badput with :meth:`attribute_stall`, once the causes are known.
        """
        if self._last_report_ts is None or self._ideal_ms is None:
            return
        new = ts - self._last_report_ts - self._stall_counted_s
        if new <= 0:
            return
        self._stall_counted_s += new
        self._stall_pending_s += new
        rates = self.recent_losses(ts)
        rates["stall"] = rates.get("stall", 0.0) + new / RECENT_TAU_S
        self._loss_rates = rates

    def attribute_stall(self, causes: Sequence[RootCause]) -> None:
        """The stalled seconds :meth:`stall` counted, to the cause of the stall."""
        if self._stall_pending_s > 0:
            cause = self._cause_of("stall", causes)
            self.badput_s[cause] = self.badput_s.get(cause, 0.0) + self._stall_pending_s
            self._stall_pending_s = 0.0

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
        if self._ideal_ms is None or self.first_ts is None or ts <= self.first_ts:
            return None
        while self._recent and self._recent[0][0] <= ts - self.window_s:
            self._recent_s -= self._recent.popleft()[1]
        wall = ts - self.first_ts
        window = min(wall, self.window_s)
        return Goodput(
            ratio=min(1.0, self.productive_s / wall),
            window_ratio=min(1.0, max(0.0, self._recent_s) / window),
            ideal_step_time_ms=self._ideal_ms,
            badput_s=dict(sorted(self.badput_s.items())),
            ranks=ranks,
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
            return next((c.cause for c in causes if TRAINING_STALLED.name in c.signals), UNATTRIBUTED)
        deeper = next((c.cause for c in causes if c.cause not in self._waits), None)
        if component == "sync":  # waiting for a late rank: the straggler, or what makes it late
            return deeper or STRAGGLER_RANK.name
        return deeper or UNATTRIBUTED

    def _settle_unattributed(self, ts: float) -> None:
        """Wall time neither productive nor attributed becomes ``unattributed`` (it never shrinks)."""
        if self.first_ts is None or self._ideal_ms is None:
            return
        attributed = sum(s for cause, s in self.badput_s.items() if cause != UNATTRIBUTED)
        left = ts - self.first_ts - self.productive_s - attributed
        if left > self.badput_s.get(UNATTRIBUTED, 0.0):
            self.badput_s[UNATTRIBUTED] = left


def _diverged(report: TrainingSample) -> bool:
    """True when the report's loss or gradient norm is NaN or infinite."""
    return any(v is not None and not math.isfinite(v) for v in (report.loss, report.grad_norm))
