"""``rank_straggler``: one rank persistently late at the collective, everyone else waiting for it.

Per report each rank's *lateness* (when it reaches the collective, :mod:`.lateness`) is
median-filtered over 3 reports and compared with the median rank's; its excess is averaged
fast and slow and must stand ``consistent_t`` standard errors above zero — errors taken from
how widely the *other* ranks scatter — and ``min_slowdown`` above the median. Scores follow
NVIDIA's resiliency extension (0..1, 1 best): relative (the median's lateness over this
rank's) and individual (its best over its current). Beside a straggler the evidence says how
widely the others scatter and how late the last of them arrives: what ``load_imbalance``
explains. The statistics are columns over the ranks (:mod:`.columns`). The method, its
reasons and the measurements behind it: docs/signals.md ("rank_straggler").
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any

from ...samples import RankSample
from ..spec import RANKS, ROLE_STRAGGLER, SignalSpec
from ..stats import IQR_TO_SIGMA
from ..thresholds import ALPHA, CONVENTION, SHARE, T_STAT, Knob, Thresholds
from ..tick import Tick
from ..types import CRITICAL, WARNING, Finding, Policy
from . import columns
from .base import SCORE_CAP, BaseDetector, JobWarmup
from .columns import UNKNOWN, Column
from .lateness import RANK_NUMBER, STEP_TIME, lateness, own_busy_vote, reference
from .stall_bounds import STALL_BOUNDS

RANK_STRAGGLER = SignalSpec(
    "rank_straggler",
    "one rank persistently late at the collective, everyone else waiting for it",
    RANKS,
    0.10,
    "sync",
    measured=True,
    explainer_claims=True,
    policy=Policy(clear_after_s=30.0),
    role=ROLE_STRAGGLER,
)
#: Below this many ranks their scatter says nothing about noise: each rank's own noise is used.
FEW_RANKS = 4
#: Votes that decide the per-rank step-time convention: the first 9 reports, then every 5th.
CONVENTION_VOTES = 9
VOTE_EVERY = 5
#: The most an inconsistent excess scores: enough to keep an active signal, not to raise one.
HOLD_ONLY = 0.9
#: The weights of the smoothed lateness (the scores') and of the others' scatter.
EWMA_ALPHA = 0.3
SPREAD_ALPHA = 0.2
#: The smallest standard error assumed (0.2 %): a perfectly steady job is not infinitely sure.
MIN_SE = 0.002
BEST_FORGET = 1.0005  # the best lateness drifts up 0.05 % a report, so an old best is forgotten


#: How much wider an EWMA of consecutive medians of 3 scatters than one of i.i.d. values: they share two values.
MEDIAN3_CORRELATION = 1.45


def excess_se(alpha: float) -> float:
    """Sigma of the EWMA (weight ``alpha``) of a median of 3 consecutive values, per sigma of the values: the
    i.i.d. factor sqrt(a / (2 - a)), times :data:`MEDIAN3_CORRELATION`."""
    return MEDIAN3_CORRELATION * (alpha / (2.0 - alpha)) ** 0.5


class RankStraggler(BaseDetector):
    """Per-rank relative and individual scores; findings for the persistently slow ranks."""

    name = "ranks"
    signals = (RANK_STRAGGLER,)
    reads = STALL_BOUNDS  # a rank late by a stall's length is the stall's, not a straggler's
    knobs = (
        Knob(
            "min_slowdown",
            0.10,
            SHARE,
            CONVENTION,
            "slower than the median rank by this share, consistently: every other rank then waits a tenth of a "
            "step for it, each step",
            0.001,
        ),
        Knob(
            "critical_slowdown",
            0.30,
            SHARE,
            CONVENTION,
            "critical when a third slower than the median rank",
            0,
            at_least="min_slowdown",
        ),
        Knob(
            "consistent_t",
            4.0,
            T_STAT,
            CONVENTION,
            "standard errors (from the other ranks' scatter) the mean excess must clear: consistent, not "
            "occasional, slowness; with data-dependent work averages of 20-30 % happen by chance",
            0.1,
        ),
        Knob(
            "fast_alpha",
            0.5,
            ALPHA,
            CONVENTION,
            "the fast average of a rank's excess: follows its current pace within a few reports",
            0.001,
            1,
        ),
        Knob(
            "slow_alpha",
            0.05,
            ALPHA,
            CONVENTION,
            "the slow average (~40 reports): its error bar a fifth as wide, a rank 35 % slower within "
            "data-dependent scatter stands out within a minute",
            0.001,
            1,
        ),
    )

    def __init__(self, thresholds: Thresholds | None = None) -> None:
        super().__init__(thresholds)
        t = self.thresholds
        self.min_slowdown, self.critical_slowdown, self.consistent_t = (
            t.min_slowdown,
            t.critical_slowdown,
            t.consistent_t,
        )
        self.fast_alpha, self.slow_alpha = t.fast_alpha, t.slow_alpha
        self.fast_se, self.slow_se = excess_se(t.fast_alpha), excess_se(t.slow_alpha)
        self._fingerprint: list[float | None] | None = None
        self._votes: deque[bool] = deque(maxlen=CONVENTION_VOTES)
        self._reports = 0
        self._warmup = JobWarmup()
        self.convention = ""
        #: The smoothed lateness the reference is the median of (its median is sorted for only when asked).
        self._referenced: Column | None = None
        self._reference: float | None = None
        self._reset(())

    def _reset(self, ids: tuple[int, ...]) -> None:
        """Fresh statistics for these ranks: one column per statistic (:mod:`.columns`), unknown until seen."""
        n = len(ids)
        self._ids = ids
        self._prev1, self._prev2 = columns.full(n, UNKNOWN), columns.full(n, UNKNOWN)
        self._smooth, self._best, self._spread = (
            columns.full(n, UNKNOWN),
            columns.full(n, UNKNOWN),
            columns.full(n, UNKNOWN),
        )
        self._others_last = columns.full(n, UNKNOWN)
        self._excess, self._slow_excess, self._excess_var = (
            columns.full(n, 0.0),
            columns.full(n, 0.0),
            columns.full(n, 0.0),
        )

    def update(self, tick: Tick) -> list[Finding] | None:
        training = tick.training
        if training is None or len(training.ranks) < 2:
            return None
        if tick.report is not None and not self._warmup.over(tick.ts, tick.report.global_step):
            return None  # a fresh job's ranks reach the first collectives at scattered times: no evidence yet
        ranks = training.ranks
        steps = list(map(STEP_TIME, ranks))
        if tick.report is None and steps == self._fingerprint:
            return None  # a repeat of the same report: no new evidence
        self._fingerprint = steps
        ids = tuple(map(RANK_NUMBER, ranks))
        if ids != self._ids:
            self._reset(ids)
        timed = steps if all(steps) or None not in steps else None  # every rank's step time, or by tokens/s
        late = lateness(ranks, self._own_busy(ranks, timed), timed)
        present = columns.known(late)
        if len(present) < 2:
            return None
        typical = reference(present)
        if typical <= 0:
            return None
        bounds = self.thresholds  # a lateness as long as a stall (training_stalled's bounds) is the stall's
        stalled = max(bounds.min_stall_s * 1000.0, bounds.step_multiple * typical)
        if self.convention != "tokens" and present[-1] >= stalled:
            late = columns.forget_at_least(late, stalled)
            present = columns.known(late)
        if len(present) >= FEW_RANKS:
            self._learn_spread(late, present, typical)
        lagged, self._prev1, self._prev2 = columns.median3(late, self._prev1, self._prev2)
        lagged_typical = reference(columns.known(lagged))
        if lagged_typical > 0:
            self._fold(lagged, lagged_typical)
        if len(present) < FEW_RANKS:  # too few ranks to scatter: each rank's own report-to-report noise
            deviation = columns.squared_deviation(late, typical, self._excess)
            self._excess_var = columns.ewma(self._excess_var, deviation, SPREAD_ALPHA)
        self._referenced = self._smooth  # a new column each report: the reference is this report's
        return self._findings(ranks)

    @property
    def reference(self) -> float | None:
        """The median rank's smoothed lateness (None before the first judged report); a sort over every
        rank, done when a finding or a score needs it, not on every report."""
        if self._referenced is not None:
            present = columns.known(self._referenced)
            self._reference = reference(present) if len(present) else None
            self._referenced = None
        return self._reference

    def _own_busy(self, ranks: tuple[RankSample, ...], steps: list[float] | None) -> bool:
        """The convention the recent reports agree on; switching it restarts the per-rank history."""
        if ranks[0].step_time_ms is None:
            self.convention = "tokens"
            return False
        self._reports += 1
        if len(self._votes) < CONVENTION_VOTES or self._reports % VOTE_EVERY == 0:
            vote = own_busy_vote(ranks, steps)
            if vote is not None:
                self._votes.append(vote)
        own = 2 * sum(self._votes) > len(self._votes)
        convention = "own_busy" if own else "wall"
        if self.convention and convention != self.convention:
            self._reset(self._ids)
        self.convention = convention
        return own

    def _learn_spread(self, late: Column, present: Column, typical: float) -> None:
        """Smooth, per rank, how widely the *other* ranks scatter around the median (relative IQR as a sigma), and
        how far after the median the last of them arrives (relative to it).

        Leaving one value out of a sorted list shifts each quartile by at most one
        place, so there are only three leave-one-out IQRs: for ranks below the
        lower quartile, between the quartiles, and above the upper one. A rank is
        at or below place ``lo`` (its last equal value's place: removing any of
        equal values leaves the same others) exactly when it is below the value
        at ``lo + 1``, so two comparisons place it.
        """
        m = len(present) - 1  # the others
        lo, hi = m // 4, (3 * m) // 4
        scale = IQR_TO_SIGMA * typical
        below = (present[hi + 1] - present[lo + 1]) / scale
        between = (present[hi + 1] - present[lo]) / scale
        above = (present[hi] - present[lo]) / scale
        spread = columns.place(late, (present[lo + 1], present[hi + 1]), (below, between, above))
        self._spread = columns.ewma(self._spread, spread, SPREAD_ALPHA)
        # and how far after the median the last of the others arrives: the latest rank's, or for it the next one's
        last = present[-1]
        last_excess = last / typical - 1.0
        latest = columns.place(late, (last, last), (last_excess, last_excess, present[-2] / typical - 1.0))
        self._others_last = columns.ewma(self._others_last, latest, self.slow_alpha)  # a mean wait: steady

    def _fold(self, lagged: Column, typical: float) -> None:
        """Update each rank's lateness EWMA, best, and mean excess over the median of the lagged medians (a rank
        without a lagged median this report keeps its statistics)."""
        self._smooth = columns.ewma(self._smooth, lagged, EWMA_ALPHA)
        self._best = columns.forgetful_min(self._best, self._smooth, BEST_FORGET, given=lagged)
        excess = columns.relative(lagged, typical)
        self._excess = columns.ewma(self._excess, excess, self.fast_alpha)
        self._slow_excess = columns.ewma(self._slow_excess, excess, self.slow_alpha)

    def consistency(self, i: int) -> float:
        """How many standard errors rank ``i``'s mean excess stands above zero (the surer of the two averages)."""
        return self._excess_and_t(i)[1]

    def _excess_and_t(self, i: int) -> tuple[float, float]:
        """Rank ``i``'s mean excess and its standard errors above zero: the fast average's when it shows the rank
        consistently late, else the surer of the two."""
        spread = _known(self._spread[i])
        fast, slow = self._excess[i], self._slow_excess[i]
        if spread is None:  # too few ranks: against the faster of two, a long average is biased upward
            return fast, fast / max(self._excess_var[i] ** 0.5 * self.fast_se, MIN_SE)
        t_fast = fast / max(spread * self.fast_se, MIN_SE)
        t_slow = slow / max(spread * self.slow_se, MIN_SE)
        # the fast average, when it is sure enough: it follows the rank's current pace; else the surer one
        return (fast, t_fast) if t_fast >= self.consistent_t or t_fast >= t_slow else (slow, t_slow)

    def _findings(self, ranks: tuple[RankSample, ...]) -> list[Finding]:
        out: list[Finding] = []
        report_floor = self.report_floor
        floor = report_floor * self.min_slowdown
        above = {*columns.above(self._excess, floor), *columns.above(self._slow_excess, floor)}
        if not above:
            return out  # no rank's excess is past the floor: the usual report at thousands of ranks
        ref = self.reference
        if ref is None or ref <= 0:
            return out
        for i in sorted(above):
            slower, t = self._excess_and_t(i)
            score = slower / self.min_slowdown
            if t < self.consistent_t:  # not shown to be consistent: may hold an active signal, never raise one
                score = min(HOLD_ONLY, score * (t / self.consistent_t) ** 2)
            score = min(SCORE_CAP, score)
            if score >= report_floor:
                out.append(self._finding(ranks[i], i, ref, slower, score, _spans_hosts(ranks)))
        return out

    def _finding(self, rank: RankSample, i: int, ref: float, slower: float, score: float, name_host: bool) -> Finding:
        s = _known(self._smooth[i]) or ref
        best = _known(self._best[i]) or s
        spread = _known(self._spread[i])
        subject: dict[str, Any] = {"rank": rank.rank}
        if rank.gpu_index is not None:
            subject["gpu_index"] = rank.gpu_index
        if rank.hostname is not None:
            subject["hostname"] = rank.hostname
        evidence: dict[str, Any] = {
            "relative_score": round(min(1.0, ref / s), 3),
            "individual_score": round(min(1.0, best / s), 3),
            "slower_than_median": round(slower, 4),
            "consistency_t": round(self._excess_and_t(i)[1], 1),
            "convention": self.convention,
        }
        if spread is not None:  # how widely the other ranks scatter: the step-to-step imbalance beside it
            evidence["others_scatter"] = round(spread, 4)
        others_last = _known(self._others_last[i])
        if others_last is not None:  # the wait the others would still pay without this rank (load_imbalance's)
            evidence["others_last_excess"] = round(others_last, 4)
        if self.convention != "tokens":
            evidence.update(lateness_ms=round(s, 1), median_lateness_ms=round(ref, 1), peers_wait_ms=round(s - ref, 1))
        if rank.hostname is not None:
            evidence["hostname"] = rank.hostname
        severity = CRITICAL if slower >= self.critical_slowdown else WARNING
        than = "the median rank" if len(self._ids) >= 3 else "the other rank"
        where = f" on {rank.hostname}" if name_host and rank.hostname is not None else ""
        message = f"rank {rank.rank}{where} is {slower:.0%} slower than {than}"
        if self.convention != "tokens":
            message += f"; the others wait ~{s - ref:.0f} ms for it every step"
        return Finding(RANK_STRAGGLER.name, score, severity, message, subject, evidence)

    def scores(self) -> dict[int, tuple[float, float]]:
        """``{rank: (relative score, individual score)}`` for every rank seen."""
        ref = self.reference
        out = {}
        smooth, best_seen = self._smooth, self._best
        for rank, s, best in zip(self._ids, smooth, best_seen, strict=True):
            if ref and s > 0:  # a rank not yet known (NaN) is not above zero
                out[rank] = (min(1.0, ref / s), min(1.0, (best or s) / s))
        return out


def _known(value: float) -> float | None:
    """One rank's statistic, None while it is not known (NaN)."""
    return value if value == value else None


def _spans_hosts(ranks: Sequence[RankSample]) -> bool:
    """Whether the job's ranks run on more than one host (messages then say which host a rank is on)."""
    first = ranks[0].hostname
    return any(r.hostname != first for r in ranks)
