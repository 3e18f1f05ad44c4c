"""How often a job should checkpoint, from what its failures and checkpoints cost: Young's and Daly's interval.

A job that saves every ``tau`` seconds of work, at a cost of ``save_s`` each, loses on each interruption (one
every ``mtbf_s`` on average) the work since its last save — half an interval on average — and the restart
(``restart_s``: noticing the failure, rescheduling, loading the checkpoint). To first order the share of wall
time lost is ``save_s / tau + (tau / 2 + restart_s) / mtbf_s``; its minimum is Young's interval
``sqrt(2 * save_s * mtbf_s)`` (J. W. Young, "A first order approximation to the optimum checkpoint interval",
CACM 17(9), 1974). Daly's higher-order estimate corrects it where saves are not short against the MTBF, for
exponentially distributed interruptions (J. T. Daly, "A higher order estimate of the optimum checkpoint interval
for restart dumps", FGCS 22(3), 2006): ``sqrt(2 C M) * (1 + sqrt(C / 2M) / 3 + (C / 2M) / 9) - C`` for
``C < 2M``, else ``M``; under the same model the expected wall time of ``T`` seconds of work is
``M e^(R/M) (e^((tau + C)/M) - 1) T / tau``, whose inverse share is the ETTR :func:`expected_ettr` gives.

Worked example (docs/job-life.md): Llama 3's 419 interruptions in 54 days (one every ~3 h), a 60 s blocking save
and a 10-minute restart: save every ~19 min, ETTR 0.85 (0.84 to first order); with 5 s saves and 2-minute
restarts, every ~5.5 min and 0.96.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


def young_interval(save_s: float, mtbf_s: float) -> float:
    """Young's first-order optimum: ``sqrt(2 * save_s * mtbf_s)`` seconds of work between saves."""
    _positive(save_s=save_s, mtbf_s=mtbf_s)
    return math.sqrt(2.0 * save_s * mtbf_s)


def daly_interval(save_s: float, mtbf_s: float) -> float:
    """Daly's higher-order optimum (seconds of work between saves); the MTBF itself once a save costs 2 MTBFs."""
    _positive(save_s=save_s, mtbf_s=mtbf_s)
    if save_s >= 2.0 * mtbf_s:
        return mtbf_s
    ratio = save_s / (2.0 * mtbf_s)
    return math.sqrt(2.0 * save_s * mtbf_s) * (1.0 + math.sqrt(ratio) / 3.0 + ratio / 9.0) - save_s


def expected_ettr(interval_s: float, save_s: float, restart_s: float, mtbf_s: float) -> float:
    """The share of wall time that is productive with saves every ``interval_s``: Daly's expected wall time for
    exponentially distributed interruptions (see the module), inverted."""
    _positive(interval_s=interval_s, mtbf_s=mtbf_s)
    if save_s < 0 or restart_s < 0:
        raise ValueError(f"save_s and restart_s must be at least 0, got {save_s} and {restart_s}")
    m = mtbf_s
    wall_per_work = m * math.exp(restart_s / m) * math.expm1((interval_s + save_s) / m) / interval_s
    return 1.0 / wall_per_work


#: How far the job's own interval may be from Daly's before the advice says so (a factor either way): at twice or
#: half the optimum the first-order loss C/τ + τ/2M is 25 % above its minimum; nearer, the curve is flat.
OFF_BY = 2.0


@dataclass(frozen=True, slots=True)
class IntervalAdvice:
    """The interval to checkpoint at, what it rests on, and the ETTR it and the job's own interval predict."""

    interval_s: float
    method: str
    save_s: float
    restart_s: float
    mtbf_s: float
    mtbf_from: str  # "observed" (the job's interruptions) or "prior" (the config's mtbf, before the first)
    expected_ettr: float
    current_interval_s: float | None = None
    current_ettr: float | None = None

    @property
    def note(self) -> str | None:
        """A sentence when the job saves :data:`OFF_BY` times more or less often than the interval, else None."""
        current, best = self.current_interval_s, self.interval_s
        if current is None or self.current_ettr is None or best <= 0 or 1 / OFF_BY < current / best < OFF_BY:
            return None
        ettr = f"ETTR {self.current_ettr:.3f} now, {self.expected_ettr:.3f} at {_duration(best)}"
        if current > best:
            why = f"{current / best:.1f}x less often than Daly's: an interruption loses more work than saves would cost"
        else:
            why = f"{best / current:.1f}x more often than Daly's: the saves cost more than the work they protect"
        return f"saves every {_duration(current)}, {why} ({ettr})"

    def to_dict(self) -> dict[str, float | str | None]:
        return {
            "interval_s": round(self.interval_s, 1),
            "method": self.method,
            "save_s": round(self.save_s, 3),
            "restart_s": round(self.restart_s, 1),
            "mtbf_s": round(self.mtbf_s, 1),
            "mtbf_from": self.mtbf_from,
            "expected_ettr": round(self.expected_ettr, 4),
            "current_interval_s": None if self.current_interval_s is None else round(self.current_interval_s, 1),
            "current_ettr": None if self.current_ettr is None else round(self.current_ettr, 4),
            "note": self.note,
        }


def advise_interval(
    save_s: float,
    restart_s: float,
    mtbf_s: float,
    mtbf_from: str = "observed",
    current_interval_s: float | None = None,
) -> IntervalAdvice:
    """Daly's interval for the job's save cost and MTBF, with the ETTR it predicts (and the job's own interval's,
    where it has one) under the same restart cost."""
    interval = daly_interval(save_s, mtbf_s)
    current = None
    if current_interval_s is not None and current_interval_s > 0:
        current = expected_ettr(current_interval_s, save_s, restart_s, mtbf_s)
    return IntervalAdvice(
        interval_s=interval,
        method="daly",
        save_s=save_s,
        restart_s=restart_s,
        mtbf_s=mtbf_s,
        mtbf_from=mtbf_from,
        expected_ettr=expected_ettr(interval, save_s, restart_s, mtbf_s),
        current_interval_s=current_interval_s,
        current_ettr=current,
    )


def _duration(seconds: float) -> str:
    """``45 s``, ``12.5 min``, ``3.2 h``."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.1f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


def _positive(**values: float) -> None:
    for name, value in values.items():
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")
