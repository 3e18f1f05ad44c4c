"""The training thread's Python stack, taken in-process by the heartbeat thread once a rank stays put.

A rank that has stayed in one phase for longer than :func:`stack_after_s` — max(``STACK_AFTER_MIN_S``,
``STACK_AFTER_STEPS`` × its median step) — sends its training thread's stack with each heartbeat:
``sys._current_frames()`` read from the heartbeat thread (no signal, no ptrace, no tool), the
innermost ``MAX_STACK_FRAMES`` frames, innermost last, filenames as the interpreter gives them
(cut to their last ``MAX_STRING_LENGTH`` characters). The median step is :class:`StepPace`'s,
measured off the training thread. Cost and privacy: docs/instrumentation.md ("Stacks").
"""

from __future__ import annotations

import sys
from collections import deque
from statistics import median
from types import FrameType

from ...samples import MAX_STACK_FRAMES, MAX_STRING_LENGTH, StackFrame

#: A rank sends its stack once it has been in one phase for this many median steps …
STACK_AFTER_STEPS = 3.0
#: … and at least this long (a job of 10 ms steps must not send stacks at every hiccup; a first step has no median).
STACK_AFTER_MIN_S = 5.0
#: Step-time samples the median is taken over (one per heartbeat in which steps completed).
PACE_SAMPLES = 31


def stack_after_s(median_step_s: float | None) -> float:
    """How long a rank stays in one phase before its heartbeats carry its stack."""
    if median_step_s is None:
        return STACK_AFTER_MIN_S
    return max(STACK_AFTER_MIN_S, STACK_AFTER_STEPS * median_step_s)


class StepPace:
    """The median step time of one rank, from its step count read now and then (heartbeat thread only).

    Each call to :meth:`note` that finds more steps than the last adds one sample: the time since the
    last such call over the steps completed in it. A blocked rank adds none, so its median stays that of
    its healthy steps.
    """

    def __init__(self) -> None:
        self._samples: deque[float] = deque(maxlen=PACE_SAMPLES)
        self._steps: int | None = None
        self._at = 0.0

    def note(self, steps: int, now: float) -> None:
        if self._steps is not None and steps > self._steps and now > self._at:
            self._samples.append((now - self._at) / (steps - self._steps))
        if self._steps is None or steps != self._steps:
            self._steps, self._at = steps, now

    @property
    def median_s(self) -> float | None:
        """The median step time in seconds; None before two readings a step apart."""
        return median(self._samples) if self._samples else None


def thread_stack(thread_id: int, max_frames: int = MAX_STACK_FRAMES) -> tuple[StackFrame, ...] | None:
    """The stack of the thread ``thread_id`` now, innermost last; None when that thread is gone."""
    frame = sys._current_frames().get(thread_id)
    return None if frame is None else frames_of(frame, max_frames)


def frames_of(frame: FrameType | None, max_frames: int = MAX_STACK_FRAMES) -> tuple[StackFrame, ...]:
    """``frame`` and its callers, at most ``max_frames`` of them (the innermost), innermost last."""
    out: list[StackFrame] = []
    while frame is not None and len(out) < max_frames:
        code = frame.f_code
        out.append(StackFrame(_bounded(code.co_filename), max(0, frame.f_lineno or 0), _bounded(code.co_name)))
        frame = frame.f_back
    out.reverse()
    return tuple(out)


def _bounded(text: str) -> str:
    """A name the daemon accepts (at most ``MAX_STRING_LENGTH`` characters): a long path keeps its end."""
    return text if len(text) <= MAX_STRING_LENGTH else "…" + text[-(MAX_STRING_LENGTH - 1) :]
