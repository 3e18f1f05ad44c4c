"""``nonfinite_loss``: losses or gradient norms gone NaN or infinite, the optimizer skipping step after step, the
fp16 loss scale collapsed.

Reads ``tick.losses`` (every loss point reported since the previous tick, as :mod:`.numerics` does): a one-step
NaN between two ticks is still judged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ...samples import LossPoint
from ..spec import NUMERICS, TRAINING, FactSpec, SignalSpec
from ..thresholds import CONVENTION, COUNT, SECONDS, TIMES, Knob, Thresholds
from ..tick import Tick
from ..types import CRITICAL, Finding, Policy
from .base import BaseDetector
from .numerics import finite

NONFINITE_LOSS = SignalSpec(
    "nonfinite_loss",
    "a NaN or infinite loss or gradient norm, or the optimizer skipping step after step",
    TRAINING,
    0.24,
    NUMERICS,
    policy=Policy(raise_evidence=1.0, min_observations=1, clear_after_s=60.0),
)
#: A non-finite finding scores this: raised on its first observation, held while it lasts.
NONFINITE_SCORE = 3.0
#: When the current episode of non-finite values began.
NONFINITE_SINCE = FactSpec("nonfinite_since", SECONDS, "when the current episode of non-finite losses began")


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
    it on the first observation; so do 4 or more optimizer steps skipped in a
    row past the fp16 warm-up (a step went through, or the run began below a
    scale of 1024) (``skipped_steps``: fp16 loss-scale overflows, DeepSpeed's
    ``OVERFLOW! ... Skipping step``, Megatron's skipped iterations — one now
    and then is the scaler working, a run of them means the gradients stay
    non-finite) and a loss scale that collapsed: below 1, at 1 after having
    been above it, or at 1 while steps are still skipped. An infinite norm
    beside a finite loss is a skipped overflow where the next report of the
    numerics says a skip, or where no finite norm came before and that report
    is finite (the scaler's warm-up). It is reported
    for 30 s after the last such value (also on ticks without a new report:
    the job's last word was a non-finite value) and clears 60 s after that.
    Evidence: the first non-finite step, how many values were non-finite, the
    field, and the ranks when ranks report their own.
    """

    name = "nonfinite_loss"
    signals = (NONFINITE_LOSS,)
    provides = (NONFINITE_SINCE,)
    knobs = (
        Knob(
            "skipped_in_a_row",
            4,
            COUNT,
            CONVENTION,
            "optimizer steps skipped in a row past the warm-up that are a fault: the scaler doubles its scale after a "
            "window of clean steps and one halving undoes it (two with DeepSpeed's hysteresis); gradients that still "
            "overflow at a scale 16x smaller are not large but non-finite",
            1,
        ),
        Knob(
            "warmup_loss_scale",
            1024.0,
            TIMES,
            CONVENTION,
            "a run of skips from below this scale is past the fp16 warm-up: no dynamic scaler starts there "
            "(DeepSpeed's initial_scale_power is 16 by default, Apex's and torch.amp's GradScaler 2^16, Megatron 2^32)",
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
        self._run_scale: float | None = None  # the loss scale the current run of skips began at
        self._skipped_total = 0
        self._last_step: int | None = None
        self._pending: LossPoint | None = None  # a non-finite gradient norm beside a finite loss, until the next report
        self._normed = False  # whether a finite gradient norm was reported: the scaler's warm-up is behind

    def update(self, tick: Tick) -> list[Finding] | None:
        for point in tick.losses:
            self._resolve(point)
            if _overflow_like(point):
                self._pending = point  # judged with the report after it: a scaler's skip makes it an overflow
            else:
                self._judge(point)
        if not tick.losses and tick.report is None:  # (a report of progress only, an evaluation's, says no word)
            self._resolve(None)
        episode = self.episode
        if episode is None:
            return [] if tick.losses else None
        if tick.ts - episode.last_ts > self.thresholds.memory_s:
            self.episode = None
            return []
        message = _nonfinite_message(episode, self.thresholds.skipped_in_a_row)
        return [Finding(NONFINITE_LOSS.name, NONFINITE_SCORE, CRITICAL, message, {}, self._evidence(episode))]

    def _resolve(self, after: LossPoint | None) -> None:
        """The held non-finite gradient norm, now that the next report (``after``) is known: the overflow a
        dynamic loss scaler skipped (the skip counts, as every skip does), or non-finite."""
        pending, self._pending = self._pending, None
        if pending is None:
            return
        if after is not None and after.skipped_steps and after.loss_scale is not None:
            return
        if after is not None and not self._normed and _finite_report(after):
            return  # the run's first norms: torch.amp's scaler starts at 2**16 and skips its first overflows
        self._judge(pending)

    def _judge(self, point: LossPoint) -> None:
        self._normed = self._normed or (point.grad_norm is not None and finite(point.grad_norm))
        bad = [
            name
            for name, v in (("loss", point.loss), ("grad_norm", point.grad_norm))
            if v is not None and not finite(v)
        ]
        if point.rank is None and self._skipped_run(point):
            bad.append("skipped_steps")
        if self._collapsed(point):
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

    def _collapsed(self, point: LossPoint) -> bool:
        """Whether the loss scale has collapsed: below its floor (no fp16 run trains there), at it after having
        been above (bf16 jobs log a constant 1.0), or at it while steps are still skipped (the scaler has nowhere
        left to go: the gradients overflow unscaled)."""
        scale, floor = point.loss_scale, self.thresholds.collapsed_loss_scale
        if scale is None:
            return False
        if scale > floor:
            self._scaled = True
            return False
        return scale < floor or self._scaled or bool(point.skipped_steps)

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
        elif self._skipped_in_a_row == 0:  # a run of skips begins, at this scale
            self._run_scale = point.loss_scale
        past_warmup = self._run_scale is not None and self._run_scale < self.thresholds.warmup_loss_scale
        if not (self._stepped or past_warmup):
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
        return {} if self.episode is None else {NONFINITE_SINCE.name: self.episode.first_ts}


def _finite_report(point: LossPoint) -> bool:
    """A report whose loss and gradient norm are both given and finite: the step after an overflow went through."""
    return point.grad_norm is not None and finite(point.grad_norm) and point.loss is not None and finite(point.loss)


def _overflow_like(point: LossPoint) -> bool:
    """An infinite gradient norm beside a finite loss (or none), no skip said: what an fp16 overflow looks like
    before the scaler says it skipped the step (NVIDIA's ``Gradient norm: inf`` then ``Skipped batch, new scale``).
    A NaN norm is no overflow's (an overflowing gradient is infinite): judged at once."""
    norm, loss = point.grad_norm, point.loss
    return (
        norm is not None
        and norm == math.inf
        and (loss is None or finite(loss))
        and not point.skipped_steps
        and point.rank is None
    )


def _nonfinite_message(e: NonfiniteEpisode, in_a_row: int) -> str:
    at = f" since step {e.first_step}" if e.first_step is not None else ""
    ranks = f" on rank(s) {', '.join(map(str, sorted(e.ranks)))}" if e.ranks else ""
    if e.what == "skipped_steps":
        return f"the optimizer skipped {in_a_row}+ steps in a row{at}: gradients keep overflowing"
    if e.what == "loss_scale":
        return f"the fp16 loss scale collapsed to its minimum{at}: gradients overflow at every scale"
    return f"{e.what} is not finite{ranks}{at} ({e.count} non-finite report(s))"
