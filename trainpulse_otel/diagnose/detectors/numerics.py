"""``loss_spike``: a loss far above its robust rolling baseline (non-finite values are :mod:`.nonfinite`'s).

The detector reads ``tick.losses``: every loss reported since the previous
tick (reports arrive faster than ticks; the frame keeps only the newest
report, so a one-step spike or NaN between two ticks would otherwise never be
judged). Each point is the job's loss or, when ranks report their own, one
rank's, and is judged against that series' own history.
"""

from __future__ import annotations

import math
from bisect import bisect_left, insort
from collections import deque
from dataclasses import dataclass
from typing import Any

from ...samples import LossPoint
from ..spec import TRAINING, FactSpec, SignalSpec
from ..stats import MAD_TO_SIGMA, sorted_median
from ..thresholds import CONVENTION, COUNT, MEASURED, SECONDS, SHARE, SIGMAS, TIMES, Knob, Thresholds
from ..tick import Tick
from ..types import WARNING, Finding, Policy
from .base import SCORE_CAP, BaseDetector

LOSS_SPIKE = SignalSpec(
    "loss_spike",
    "a loss far above its robust rolling baseline",
    TRAINING,
    0.10,
    None,
    policy=Policy(raise_evidence=1.0, min_observations=1, clear_after_s=30.0),
)
#: Finite losses in the rolling baseline (OLMo-core's skip-step window is 128 steps).
BASELINE_LOSSES = 128


def finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


#: The worst spike's loss over its rolling median.
LOSS_SPIKE_RATIO = FactSpec("loss_spike_ratio", TIMES, "the worst recent loss spike over its rolling median")


class RollingLosses:
    """The last ``size`` finite losses of one series, kept sorted for the median."""

    __slots__ = ("_order", "_sorted", "last_step", "size")

    def __init__(self, size: int = BASELINE_LOSSES) -> None:
        self.size = size
        self.last_step: int | None = None  # the step of the series' newest loss
        self._order: deque[float] = deque()
        self._sorted: list[float] = []

    def __len__(self) -> int:
        return len(self._order)

    def add(self, x: float) -> None:
        order, ordered = self._order, self._sorted
        if len(order) == self.size:
            ordered.remove(order.popleft())
        order.append(x)
        insort(ordered, x)

    def median(self) -> float:
        return sorted_median(self._sorted)

    def leveled(self) -> bool:
        """Whether the losses stand at a level a short series is judged by: a positive median, or every loss
        negative (a log-likelihood, judged by its size) — not an objective about zero."""
        return bool(self._sorted) and (self.median() > 0 or self._sorted[-1] < 0)

    def holds_zero(self) -> bool:
        """Whether a loss of exactly 0 is among them: an objective starting at zero (GRPO's, with its KL term at 0
        and its advantages centred), not a level a rise is measured from."""
        at = bisect_left(self._sorted, 0.0)
        return at < len(self._sorted) and self._sorted[at] == 0.0

    def recent_median(self, k: int) -> float:
        """The median of the last ``k`` losses: where the loss stands now."""
        order = self._order
        return sorted_median(sorted(order[i] for i in range(max(0, len(order) - k), len(order))))

    def sigma(self, median: float) -> float:
        """The robust spread: 1.4826 x the median absolute deviation."""
        return MAD_TO_SIGMA * sorted_median(sorted(abs(v - median) for v in self._sorted))


@dataclass(frozen=True, slots=True)
class Spike:
    """One loss above its series' threshold."""

    ts: float
    step: int | None
    rank: int | None
    loss: float
    median: float
    sigma: float
    score: float

    @property
    def ratio(self) -> float | None:
        """The loss over its baseline median (the ratio LLM Foundry's loss-spike callback uses); None for a
        loss that is not positive (a DPO or RL objective), where a ratio means nothing."""
        return self.loss / self.median if self.median > 0 else None


def judge_spike(series: RollingLosses, point: LossPoint, loss: float, t: Thresholds) -> Spike | None:
    """``loss`` against its series before it joins: a Spike when past median + max(``sigmas`` x sigma,
    ``min_rise`` x the median), once the series holds ``min_history`` losses; from ``short_history`` losses on,
    with the floor ``short_min_rise`` x the median's size (:meth:`RollingLosses.leveled`) until then — or, from
    ``mid_history`` on, past the first rule with its sigmas widened by √(``min_history`` / n) (the MAD of fewer
    losses is less sure). A short series holding a loss of exactly 0 is not judged (:meth:`RollingLosses.holds_zero`).
    """
    n = len(series)
    if n < t.min_history and (n < t.short_history or not series.leveled() or series.holds_zero()):
        return None  # (a negative log-likelihood's is judged by its size: WaveGlow's; an RL objective about 0 is not)
    if (spike := _judge_by_level(series, point, loss, t)) is not None:
        return spike
    median = series.median()
    short = n < t.min_history
    floor = (t.short_min_rise if short and n < t.mid_history else t.min_rise) * abs(median)
    if loss - median <= floor:
        return None  # under the relative floor: no spike whatever the spread (and no MAD computed)
    sigma = series.sigma(median)
    threshold = max(t.sigmas * sigma, (t.short_min_rise if short else t.min_rise) * abs(median))
    if short and n >= t.mid_history:  # enough losses to judge by their spread, less surely
        threshold = min(threshold, max(t.sigmas * math.sqrt(t.min_history / n) * sigma, floor))
    if threshold <= 0:
        return None
    score = (loss - median) / threshold
    if score < 1.0:
        return None
    return Spike(point.ts, point.global_step, point.rank, loss, median, sigma, score)


def _run_again(last: int | None, step: int | None, t: Thresholds) -> bool:
    """Whether a loss's step went back far enough to be a run starting again (a resume from an earlier checkpoint,
    a sweep's next trial): its loss is judged against its own history, not the run before (a step or two back is
    ranks' reports interleaved)."""
    return last is not None and step is not None and last - step >= max(t.rerun_steps, t.rerun_share * last)


def _judge_by_level(series: RollingLosses, point: LossPoint, loss: float, t: Thresholds) -> Spike | None:
    """``loss`` against where the loss stands now: a Spike past ``recent_rise`` x the median of the last
    ``recent_losses`` (a positive one). A loss falling over orders of magnitude leaves its rolling median and spread
    far above its level, where a jump back up hides."""
    level = series.recent_median(t.recent_losses)
    if level <= 0 or loss <= t.recent_rise * level:
        return None
    score = loss / (t.recent_rise * level)
    return Spike(point.ts, point.global_step, point.rank, loss, level, series.sigma(level), score)


class LossSpike(BaseDetector):
    """``loss_spike``: a loss far above its robust rolling baseline.

    Statistic: each finite loss against the median of that series' last 128
    finite losses (the job's, or a rank's own when ranks report theirs): a
    spike is more than ``max(6 x 1.4826 x MAD, 10 % of the median)`` above it,
    after at least 32 losses; from 2 losses until then, more than
    ``max(6 x 1.4826 x MAD, |the median|)`` above a positive median (double it), or an all-negative one (not while
    a loss of exactly 0 is among them: an objective starting at zero). From 2 losses on,
    a loss over 4x the median of the last 8 is a spike too (a loss falling over orders of magnitude keeps its
    rolling median far above where it stands). NaN and infinite values never enter the
    baseline (``nonfinite_loss`` judges them). The median and MAD are the
    robust twins of OLMo-core's mean + 6 sigma over 128 steps: a spike, or the
    one before it, does not widen the band it is judged by. A spike is a
    moment: it is reported for 30 s after its last step above the threshold,
    raised on one observation, and clears 30 s after that.
    """

    name = "loss_spike"
    signals = (LOSS_SPIKE,)
    provides = (LOSS_SPIKE_RATIO,)
    knobs = (
        Knob(
            "sigmas",
            6.0,
            SIGMAS,
            CONVENTION,
            "robust sigmas (1.4826 x MAD) above the rolling median: OLMo-core skips a step at mean + 6 sigma",
            0,
        ),
        Knob(
            "min_rise",
            0.10,
            SHARE,
            CONVENTION,
            "and at least this far above it, of the median's size: a near-noiseless loss needs a real jump",
            0,
        ),
        Knob(
            "baseline_losses",
            BASELINE_LOSSES,
            COUNT,
            CONVENTION,
            "finite losses in the rolling baseline (OLMo-core's skip-step window is 128 steps)",
            2,
            at_least="min_history",
        ),
        Knob(
            "min_history",
            32,
            COUNT,
            CONVENTION,
            "finite losses a series needs before a spike is judged by its spread and min_rise",
            2,
            at_least="mid_history",
        ),
        Knob(
            "mid_history",
            16,
            COUNT,
            CONVENTION,
            "finite losses from which a series is judged by its spread before min_history, its sigmas widened by "
            "√(min_history / n): the MAD's standard error grows as 1/√n, so 16 losses are judged at 8.5 sigmas",
            2,
            at_least="short_history",
        ),
        Knob(
            "short_history",
            2,
            COUNT,
            CONVENTION,
            "finite losses before a spike is judged at all: two give a level (their mean) and a spread, so an "
            "excerpt of a few iteration lines still shows a spike; one value is no level",
            2,
        ),
        Knob(
            "short_min_rise",
            1.0,
            SHARE,
            CONVENTION,
            "until min_history, a spike is also at least this far above the median, of its size: double it, LLM "
            "Foundry's KillLossSpike outlier multiplier (2x the running average)",
            0,
        ),
        Knob(
            "recent_losses",
            8,
            COUNT,
            CONVENTION,
            "the last losses whose median is where the loss stands now (recent_rise judges against it)",
            1,
        ),
        Knob(
            "recent_rise",
            4.0,
            TIMES,
            MEASURED,
            "a loss this many times its recent median is a spike whatever its long baseline: 'several times' its "
            "level; on the log corpus's train split, 3x fired on none of 218 healthy runs",
            1,
        ),
        Knob(
            "rerun_steps",
            2,
            COUNT,
            CONVENTION,
            "a loss's step this far back (and rerun_share) starts its series again, a run starting over: one step "
            "back is ranks' reports of one iteration interleaved",
            1,
        ),
        Knob(
            "rerun_share",
            0.1,
            SHARE,
            CONVENTION,
            "and at least this share of the last step back: a resume from an earlier checkpoint or a sweep's next "
            "trial goes back a save interval or to its start, not a step or two of a long run",
            0,
        ),
        Knob(
            "memory_s",
            30.0,
            SECONDS,
            CONVENTION,
            "a spike is a moment: reported this long after its last step above the threshold",
            0,
        ),
    )

    def __init__(self, thresholds: Thresholds | None = None) -> None:
        super().__init__(thresholds)
        self._series: dict[int | None, RollingLosses] = {}
        self.worst: Spike | None = None  # the worst spike of the current episode
        self.first: Spike | None = None  # its first
        self._last_ts = -math.inf  # its latest

    def update(self, tick: Tick) -> list[Finding] | None:
        points = tick.losses
        if not points:
            return None
        judged = False
        for point in points:
            loss = point.loss
            if not finite(loss):
                continue
            judged = True
            series = self._series.get(point.rank)
            if series is None or _run_again(series.last_step, point.global_step, self.thresholds):
                series = self._series[point.rank] = RollingLosses(self.thresholds.baseline_losses)
            if point.global_step is not None:
                series.last_step = point.global_step
            spike = judge_spike(series, point, loss, self.thresholds)  # type: ignore[arg-type]
            series.add(loss)  # type: ignore[arg-type]
            if spike is not None:
                self._remember(spike)
        if not judged:
            return None
        return self._findings(tick.ts)

    def _remember(self, spike: Spike) -> None:
        if self.first is None or spike.ts - self._last_ts > self.thresholds.memory_s:
            self.first = self.worst = spike  # a new episode
        elif self.worst is None or spike.score >= self.worst.score:
            self.worst = spike
        self._last_ts = max(self._last_ts, spike.ts)

    def _findings(self, ts: float) -> list[Finding]:
        worst = self.worst
        if worst is None or ts - self._last_ts > self.thresholds.memory_s:
            self.worst = self.first = None
            return []
        return [
            Finding(
                LOSS_SPIKE.name,
                min(worst.score, SCORE_CAP),
                WARNING,
                _spike_message(worst),
                {},
                self._evidence(worst, self.first or worst),
            )
        ]

    def _evidence(self, worst: Spike, first: Spike) -> dict[str, Any]:
        evidence: dict[str, Any] = {
            "loss": round(worst.loss, 6),
            "baseline_loss": round(worst.median, 6),
            "baseline_sigma": round(worst.sigma, 6),
            "spike_ratio": None if worst.ratio is None else round(worst.ratio, 3),
            "spike_sigmas": round((worst.loss - worst.median) / worst.sigma, 1) if worst.sigma > 0 else None,
            "first_step": first.step,
            "step": worst.step,
        }
        if worst.rank is not None:
            evidence["rank"] = worst.rank
        return evidence

    def facts(self) -> dict[str, Any]:
        return {} if self.worst is None or self.worst.ratio is None else {LOSS_SPIKE_RATIO.name: self.worst.ratio}


def _spike_message(s: Spike) -> str:
    where = f" on rank {s.rank}" if s.rank is not None else ""
    at = f" at step {s.step}" if s.step is not None else ""
    size = f"{s.ratio:.2f}x" if s.ratio is not None else f"{s.loss - s.median:.3g} above"
    return f"loss {s.loss:.4g}{where}{at} is {size} its rolling median {s.median:.4g}"
