"""The stall's bounds, declared once: ``training_stalled`` decides by them, and the detectors that must tell a
stall from their own signal (a straggler's lateness, a step's wait) read them (``reads``), never a copy."""

from __future__ import annotations

from ..thresholds import CONVENTION, SECONDS, TIMES, Knob

#: The signal whose knobs these are.
STALL_SIGNAL = "training_stalled"
MIN_STALL_S = Knob(
    "min_stall_s",
    30.0,
    SECONDS,
    CONVENTION,
    "the shortest stall: the contract's max(30 s, 10 x the median step), the timeout NVIDIA's resiliency "
    "extension gives rank heartbeats",
    1,
)
STEP_MULTIPLE = Knob("step_multiple", 10.0, TIMES, CONVENTION, "a stall is at least this many median steps", 1)
#: What a reader declares: ``reads = STALL_BOUNDS``.
STALL_BOUNDS = ((STALL_SIGNAL, MIN_STALL_S), (STALL_SIGNAL, STEP_MULTIPLE))
