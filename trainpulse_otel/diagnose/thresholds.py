"""Thresholds as data: every knob a detector decides by, with a value, a unit and a reason.

A detector declares its knobs once, in one table of :class:`Knob` s; their full
name is ``SIGNAL.KNOB`` (``rank_straggler.min_slowdown``). It is built with their
values — a :class:`Thresholds`, the declared values with any overrides from the
config key ``detectors`` — so the statistic it computes (a score) stays apart
from the numbers that turn it into a decision::

    class LowMfu(LevelDetector):
        knobs = (Knob("warning", 0.20, SHARE, PHYSICS, "dense LLM training reaches 0.35-0.55 MFU"),)

        def __init__(self, thresholds: Thresholds | None = None) -> None:
            super().__init__(thresholds)
            self.warning = self.thresholds.warning

A knob's ``basis`` says what it rests on: physics, a convention (with its
source) or a measurement (with what was measured).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

#: What a knob rests on.
PHYSICS = "physics"
CONVENTION = "convention"
MEASURED = "measured"
BASES = (PHYSICS, CONVENTION, MEASURED)

#: Units, written the same way everywhere.
SHARE = "share"  # a fraction 0-1 of what the knob's reason names (a step, a device's memory, …)
TIMES = "×"  # a multiple of a baseline, a median or another knob
SECONDS = "s"
MILLISECONDS = "ms"
CELSIUS = "°C"
PERCENT = "%"
SIGMAS = "sigma"
T_STAT = "t"  # a fitted slope's t statistic
COUNT = "count"  # reports, steps, points, errors: a whole number
ALPHA = "alpha"  # an EWMA's weight of the newest value
PER_SECOND = "/s"  # a counter's rate: events a second
PER_MINUTE = "/min"  # a counter's rate: events a minute
PER_HOUR = "/h"  # a counter's rate: events an hour


class ThresholdError(ValueError):
    """A threshold override that does not fit its knob; ``key`` names it (``detectors.SIGNAL.KNOB``)."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key
        self.message = message


@dataclass(frozen=True, slots=True)
class Knob:
    """One named threshold: its declared value, unit, basis and reason, and the range an override must keep;
    ``at_least``: another knob of the same detector this one may not fall below (a critical level and its
    warning, a horizon and its critical time)."""

    name: str
    value: float
    unit: str
    basis: str
    reason: str
    minimum: float = 0.0
    maximum: float = math.inf
    at_least: str = ""

    @property
    def integral(self) -> bool:
        """Whether the knob counts things (its value is an int)."""
        return isinstance(self.value, int)

    def accept(self, value: Any) -> float:
        """``value`` as this knob's kind, or a ValueError saying what it must be."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"must be a number, got {value!r}")
        if self.integral:
            if isinstance(value, float) and not value.is_integer():
                raise ValueError(f"must be a whole number ({self.unit}), got {value!r}")
            value = int(value)
        elif not math.isfinite(value):
            raise ValueError(f"must be a finite number, got {value!r}")
        if not self.minimum <= value <= self.maximum:
            bounds = (
                f"at least {self.minimum:g}" if math.isinf(self.maximum) else f"{self.minimum:g} to {self.maximum:g}"
            )
            raise ValueError(f"must be {bounds} ({self.unit}), got {value!r}")
        return float(value) if not self.integral else value


class Thresholds:
    """One detector's knob values, as attributes: the declared values with the given overrides."""

    def __init__(self, knobs: Iterable[Knob], overrides: Mapping[str, float] | None = None) -> None:
        for knob in knobs:
            setattr(self, knob.name, knob.value)
        for name, value in (overrides or {}).items():
            setattr(self, name, value)

    def __getattr__(self, name: str) -> float:  # only reached for a knob the detector did not declare
        raise AttributeError(f"no knob {name!r} is declared (declare it in the detector's knobs)")

    def __repr__(self) -> str:
        return f"Thresholds({vars(self)!r})"
