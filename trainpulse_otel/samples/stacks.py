"""A rank's Python stack as its heartbeat carries it, and the stack the daemon keeps per rank.

A stack is a tuple of :class:`StackFrame` (file, line, function), innermost last, at most
:data:`MAX_STACK_FRAMES`; filenames are as the training process gave them. A rank's latest
stack is kept as a :class:`RankStack` with the step and phase it was taken in, only until that
rank's next heartbeat without one (it moved on).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from .model import TrainingSample

#: The deepest stack a heartbeat may carry (the innermost frames are kept; the outermost are the least telling).
MAX_STACK_FRAMES = 64


class StackFrame(NamedTuple):
    """One frame of a stack: the file as the process named it, the line, the function."""

    file: str
    line: int
    function: str


class RankStack(NamedTuple):
    """One rank's latest stack, with the step and phase its heartbeat was in when it was taken."""

    rank: int
    global_step: int | None
    phase: str | None
    frames: tuple[StackFrame, ...]


def with_stacks(training: TrainingSample | None, stacks: tuple[RankStack, ...]) -> TrainingSample | None:
    """``training`` with each rank's held stack put back on its entry (a trace records them as they came)."""
    if training is None or not stacks:
        return training
    by_rank = {s.rank: s.frames for s in stacks}
    ranks = tuple(replace(r, stack=by_rank[r.rank]) if r.rank in by_rank else r for r in training.ranks)
    return replace(training, ranks=ranks)
