"""The input pipeline: waiting for the data loader and for tokenization."""

from __future__ import annotations

import math

from ..spec import TRAINING, SignalSpec
from ..thresholds import CONVENTION, PHYSICS, SHARE, SIGMAS, TIMES, Knob
from .level import StepShareDetector

DATALOADER_STARVATION = SignalSpec(
    "dataloader_starvation",
    "the step waits for its next batch from the data loader",
    TRAINING,
    0.10,
    "data",
    measured=True,
)
TOKENIZER_STALL = SignalSpec(
    "tokenizer_stall", "the step waits for on-the-fly tokenization", TRAINING, 0.10, "tokenizer", measured=True
)


#: The knobs of a wait inside the step, ``{what}`` the thing waited for: (name, value, unit, basis, reason, range).
WAIT_KNOBS = (
    ("warning", 0.10, SHARE, CONVENTION, "a tenth of every step waiting for {what} is worth fixing", (0, 1)),
    ("critical", 0.30, SHARE, CONVENTION, "a third of the GPUs' time idle, waiting for {what}", (0, 1)),
    (
        "early",
        0.02,
        SHARE,
        CONVENTION,
        (
            "a smaller wait for {what} counts when it is also early_ratio times the job's own baseline and "
            "early_z sigmas above it: a ramp caught while small, an always-small wait never alarms"
        ),
        (0, 1),
    ),
    ("early_ratio", 3.0, TIMES, CONVENTION, "how far above its baseline an early wait must be", (1, math.inf)),
    ("early_z", 6.0, SIGMAS, CONVENTION, "how many baseline sigmas above it an early wait must be", (0, math.inf)),
    (
        "min_sigma",
        0.002,
        SHARE,
        PHYSICS,
        "the baseline's smallest sigma: reported waits are rounded, never steady",
        (0, 1),
    ),
)


#: Which knob of WAIT_KNOBS each may not fall below.
WAIT_ORDER = {"critical": "warning", "warning": "early"}


def wait_knobs(what: str) -> tuple[Knob, ...]:
    """The thresholds of a wait inside the step (the data loader's, the tokenizer's)."""
    return tuple(
        Knob(name, value, unit, basis, reason.format(what=what), *bounds, at_least=WAIT_ORDER.get(name, ""))
        for name, value, unit, basis, reason, bounds in WAIT_KNOBS
    )


class DataloaderStarvation(StepShareDetector):
    """``dataloader_starvation``: the median of the last 5 reports of ``data_wait_ms / step_time_ms`` against its
    knobs (warning 10 %, critical 30 %, early 2 % when it departs from the job's baseline)."""

    name = "dataloader"
    signals = (DATALOADER_STARVATION,)
    knobs = wait_knobs("the data loader")
    field = "data_wait_ms"
    waits_for = "the data loader"


class TokenizerStall(StepShareDetector):
    """``tokenizer_stall``: the median of the last 5 reports of ``tokenizer_wait_ms / step_time_ms``, judged as the
    data loader's wait is."""

    name = "tokenizer"
    signals = (TOKENIZER_STALL,)
    knobs = wait_knobs("tokenization")
    field = "tokenizer_wait_ms"
    waits_for = "tokenization"
