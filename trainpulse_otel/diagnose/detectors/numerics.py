"""Numerical faults: a loss far above its robust rolling baseline, and losses or gradients gone non-finite.

Both detectors read ``tick.losses``: every loss reported since the previous
tick (reports arrive faster than ticks; the frame keeps only the newest
report, so a one-step spike or NaN between two ticks would otherwise never be
judged). Each point is the job's loss or, when ranks report their own, one
rank's, and is judged against that series' own history.
"""

from __future__ import annotations

import math
from bisect import insort
from collections import deque
from dataclasses import dataclass
from typing import Any

from ...samples import LossPoint
from ..spec import NUMERICS, TRAINING, SignalSpec
from ..stats import MAD_TO_SIGMA, sorted_median
from ..thresholds import CONVENTION, COUNT, SECONDS, SHARE, SIGMAS, TIMES, Knob, Thresholds
from ..tick import Tick
from ..types import CRITICAL, WARNING, Finding, Policy
from .base import SCORE_CAP, BaseDetector

LOSS_SPIKE = SignalSpec(
    "loss_spike",
    "a loss far above its robust rolling baseline",
    TRAINING,
    0.10,
    None,
    policy=Policy(raise_evidence=1.0, min_observations=1, clear_after_s=30.0),
)
NONFINITE_LOSS = SignalSpec(
    "nonfinite_loss",
    "a NaN or infinite loss or gradient norm, or the optimizer skipping step after step",
    TRAINING,
    0.24,
    NUMERICS,
    policy=Policy(raise_evidence=1.0, min_observations=1, clear_after_s=60.0),
)
#: Finite losses in the rolling baseline (OLMo-core's skip-step window is 128 steps).
BASELINE_LOSSES = 128
#: A non-finite finding scores this: raised on its first observation, held while it lasts.
NONFINITE_SCORE = 3.0


def finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


class RollingLosses:
    """The last ``size`` finite losses of one series, kept sorted for the median."""

    __slots__ = ("_order", "_sorted", "size")

    def __init__(self, size: int = BASELINE_LOSSES) -> None:
        self.size = size
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
    ``min_rise`` x the median), once the series holds ``min_history`` losses."""
    if len(series) < t.min_history:
        return None
    median = series.median()
    floor = t.min_rise * abs(median)
    if loss - median <= floor:
        return None  # under the relative floor: no spike whatever the spread (and no MAD computed)
    sigma = series.sigma(median)
    threshold = max(t.sigmas * sigma, floor)
    if threshold <= 0:
        return None
    score = (loss - median) / threshold
    if score < 1.0:
        return None
    return Spike(point.ts, point.global_step, point.rank, loss, median, sigma, score)


class LossSpike(BaseDetector):
    """``loss_spike``: a loss far above its robust rolling baseline.

    Statistic: each finite loss against the median of that series' last 128
    finite losses (the job's, or a rank's own when ranks report theirs): a
    spike is more than ``max(6 x 1.4826 x MAD, 10 % of the median)`` above it,
    after at least 32 losses. NaN and infinite values never enter the
    baseline (``nonfinite_loss`` judges them). The median and MAD are the
    robust twins of OLMo-core's mean + 6 sigma over 128 steps: a spike, or the
    one before it, does not widen the band it is judged by. A spike is a
    moment: it is reported for 30 s after its last step above the threshold,
    raised on one observation, and clears 30 s after that.
    """

    name = "loss_spike"
    signals = (LOSS_SPIKE,)
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
        Knob("min_history", 32, COUNT, CONVENTION, "finite losses a series needs before a spike is judged", 2),
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
            if series is None:
                series = self._series[point.rank] = RollingLosses(self.thresholds.baseline_losses)
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
        return {} if self.worst is None or self.worst.ratio is None else {"loss_spike_ratio": self.worst.ratio}


def _spike_message(s: Spike) -> str:
    where = f" on rank {s.rank}" if s.rank is not None else ""
    at = f" at step {s.step}" if s.step is not None else ""
    size = f"{s.ratio:.2f}x" if s.ratio is not None else f"{s.loss - s.median:.3g} above"
    return f"loss {s.loss:.4g}{where}{at} is {size} its rolling median {s.median:.4g}"


@dataclass
class NonfiniteEpisode:
    """Non-finite values (or a run of skipped steps) since the job's numbers were last fine."""

    first_ts: float
    first_step: int | None
    what: str  # "loss", "grad_norm", "skipped_steps" or "loss_scale"
    last_ts: float
    count: int = 0
    ranks: set[int] | None = None


class NonfiniteLoss(BaseDetector):
    """``nonfinite_loss`` (critical): a NaN or infinite loss or gradient norm.

    Any non-finite ``loss`` or ``grad_norm`` — the job's or a rank's — raises
    it on the first observation; so do 8 or more optimizer steps skipped in a
    row (``skipped_steps``: fp16 loss-scale overflows, DeepSpeed's
    ``OVERFLOW! ... Skipping step``, Megatron's skipped iterations — one now
    and then is the scaler working, a run of them means the gradients stay
    non-finite) and a loss scale that collapsed to 1 or below. It is reported
    for 30 s after the last such value (also on ticks without a new report:
    the job's last word was a non-finite value) and clears 60 s after that.
    Evidence: the first non-finite step, how many values were non-finite, the
    field, and the ranks when ranks report their own.
    """

    name = "nonfinite_loss"
    signals = (NONFINITE_LOSS,)
    knobs = (
        Knob(
            "skipped_in_a_row",
            8,
            COUNT,
            CONVENTION,
            "optimizer steps skipped in a row that are a fault: one now and then is the fp16 loss scaler working",
            1,
        ),
        Knob(
            "collapsed_loss_scale",
            1.0,
            TIMES,
            CONVENTION,
            "a dynamic loss scale at or below this has collapsed (DeepSpeed's and Megatron's minimum is 1)",
            0,
        ),
        Knob(
            "memory_s",
            30.0,
            SECONDS,
            CONVENTION,
            "reported this long after the last non-finite value (then the signal's hold-down runs)",
            0,
        ),
    )

    def __init__(self, thresholds: Thresholds | None = None) -> None:
        super().__init__(thresholds)
        self.episode: NonfiniteEpisode | None = None
        self.total = 0
        #: Whether the loss scale was ever above its floor: a dynamic (fp16) scaler that can collapse. bf16 jobs
        #: log a constant loss scale of 1.0 (Megatron's iteration line does), which is no collapse.
        self._scaled = False
        #: Whether any step went through (a report whose steps were not all skipped): until then a run of skips is
        #: the scaler calibrating (DeepSpeed from 2**32 skips ~17 steps; Megatron logs "skipped 10 of 10").
        self._stepped = False
        self._skipped_in_a_row = 0
        self._skipped_total = 0
        self._last_step: int | None = None

    def update(self, tick: Tick) -> list[Finding] | None:
        for point in tick.losses:
            self._judge(point)
        episode = self.episode
        if episode is None:
            return [] if tick.losses else None
        if tick.ts - episode.last_ts > self.thresholds.memory_s:
            self.episode = None
            return []
        message = _nonfinite_message(episode, self.thresholds.skipped_in_a_row)
        return [Finding(NONFINITE_LOSS.name, NONFINITE_SCORE, CRITICAL, message, {}, self._evidence(episode))]

    def _judge(self, point: LossPoint) -> None:
        bad = [
            name
            for name, v in (("loss", point.loss), ("grad_norm", point.grad_norm))
            if v is not None and not finite(v)
        ]
        if point.rank is None and self._skipped_run(point):
            bad.append("skipped_steps")
        scale, floor = point.loss_scale, self.thresholds.collapsed_loss_scale
        if scale is not None and scale > floor:
            self._scaled = True
        elif scale is not None and self._scaled:
            bad.append("loss_scale")
        if not bad:
            return
        self.total += 1
        episode = self.episode
        if episode is None:
            episode = self.episode = NonfiniteEpisode(point.ts, point.global_step, bad[0], point.ts)
        episode.last_ts = point.ts
        episode.count += 1
        if point.rank is not None:
            episode.ranks = (episode.ranks or set()) | {point.rank}

    def _skipped_run(self, point: LossPoint) -> bool:
        """Count steps skipped in a row: a report whose every step since the previous was skipped extends
        the run, any other resets it. True while the run is ``skipped_in_a_row`` or longer, once a step has gone
        through."""
        step, last = point.global_step, self._last_step
        if step is not None:
            self._last_step = step
        skipped = point.skipped_steps
        if skipped is None:
            return False
        self._skipped_total += skipped
        advance = step - last if step is not None and last is not None and step > last else 1
        if skipped < advance:
            self._stepped = True  # a step went through: the loss scaler had found a scale that fits
        if not self._stepped:
            return False  # a fresh fp16 scaler halves its scale, skipping step after step, until one fits
        self._skipped_in_a_row = self._skipped_in_a_row + advance if skipped >= advance else 0
        return self._skipped_in_a_row >= self.thresholds.skipped_in_a_row

    def _evidence(self, episode: NonfiniteEpisode) -> dict[str, Any]:
        evidence: dict[str, Any] = {
            "first_step": episode.first_step,
            "field": episode.what,
            "nonfinite_count": episode.count,
            "since": episode.first_ts,
        }
        if self._skipped_total:
            evidence["skipped_steps"] = self._skipped_total
            evidence["skipped_in_a_row"] = self._skipped_in_a_row
        if episode.ranks:
            evidence["ranks"] = sorted(episode.ranks)
        return evidence

    def facts(self) -> dict[str, Any]:
        return {} if self.episode is None else {"nonfinite_since": self.episode.first_ts}


def _nonfinite_message(e: NonfiniteEpisode, in_a_row: int) -> str:
    at = f" since step {e.first_step}" if e.first_step is not None else ""
    ranks = f" on rank(s) {', '.join(map(str, sorted(e.ranks)))}" if e.ranks else ""
    if e.what == "skipped_steps":
        return f"the optimizer skipped {in_a_row}+ steps in a row{at}: gradients keep overflowing"
    if e.what == "loss_scale":
        return f"the fp16 loss scale collapsed to its minimum{at}: gradients overflow at every scale"
    return f"{e.what} is not finite{ranks}{at} ({e.count} non-finite report(s))"
