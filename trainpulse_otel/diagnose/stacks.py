"""The ranks' stacks grouped, the odd groups, and the line of the training script each stands at. Pure.

Ranks whose heartbeats sent a stack (:class:`~trainpulse_otel.samples.RankStack`) are grouped by
(global step, phase, frames): in a hang the ranks waiting in the collective share one stack and
the stuck ones stand elsewhere. A frame is the *training script's* unless its file is a
library's (:func:`is_library_file`): a pseudo-file (``<frozen runpy>``), anything under a
``site-packages``/``dist-packages`` folder or a ``lib/pythonX.Y`` folder (the standard library),
or a file of a ``torch`` or ``trainpulse_otel`` package folder (either may be an editable or
source install). The rule, with examples: docs/signals.md ("rank_hang").
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..samples import RankSample, RankStack, StackFrame

#: At most this many groups are listed in the evidence (each holds up to 64 frames).
MAX_GROUPS = 16
#: Folders whose files are libraries, not the training script (matched on ``/``-separated paths).
_LIBRARY = re.compile(r"/(site-packages|dist-packages|lib(64)?/python\d+(\.\d+)?t?|torch|trainpulse_otel)/")


def is_library_file(path: str) -> bool:
    """Whether a frame's file is a library's (standard library, an installed package, torch, TrainPulse)."""
    if path.startswith("<"):
        return True
    return _LIBRARY.search("/" + path.replace("\\", "/")) is not None


def script_frame(frames: Sequence[StackFrame]) -> StackFrame | None:
    """The innermost frame of the training script (``frames`` are innermost last); None when all are libraries'."""
    return next((f for f in reversed(frames) if not is_library_file(f.file)), None)


def frame_words(frame: StackFrame) -> str:
    """How a summary names a frame: ``file:line in function``."""
    return f"{frame.file}:{frame.line} in {frame.function}"


def stack_groups(ranks: Iterable[RankSample], stacks: Sequence[RankStack]) -> list[dict[str, Any]]:
    """The ranks with a current stack, grouped by (global step, phase, frames), the fewest ranks first (ties by
    lowest rank); at most :data:`MAX_GROUPS`. A stack whose rank's heartbeat has moved on to another step or
    phase since is left out."""
    if not stacks:
        return []
    now = {r.rank: (r.global_step, r.phase) for r in ranks if r.phase is not None}
    groups: dict[tuple[Any, ...], list[int]] = {}
    for s in stacks:
        if now.get(s.rank, (s.global_step, s.phase)) == (s.global_step, s.phase):
            groups.setdefault((s.global_step, s.phase, s.frames), []).append(s.rank)
    ordered = sorted(groups.items(), key=lambda item: (len(item[1]), min(item[1])))
    return [
        {
            "ranks": sorted(members),
            "phase": phase,
            "global_step": step,
            "frames": [f._asdict() for f in frames],
        }
        for (step, phase, frames), members in ordered[:MAX_GROUPS]
    ]


def odd_ranks(groups: Sequence[Mapping[str, Any]]) -> list[int]:
    """The ranks outside the group most ranks share, when most do (a strict majority of the ranks with a
    stack, and at least two groups); else none: nothing stands out."""
    if len(groups) < 2:
        return []
    largest = max(groups, key=lambda g: len(g["ranks"]))
    total = sum(len(g["ranks"]) for g in groups)
    if 2 * len(largest["ranks"]) <= total:
        return []
    return sorted(r for g in groups if g is not largest for r in g["ranks"])


def group_of(groups: Sequence[Mapping[str, Any]], rank: int) -> Mapping[str, Any] | None:
    """The group ``rank`` is in, if its stack is known."""
    return next((g for g in groups if rank in g["ranks"]), None)


def frames_in(group: Mapping[str, Any]) -> tuple[StackFrame, ...]:
    """A group's frames back as :class:`StackFrame` (the evidence holds them as JSON objects)."""
    return tuple(StackFrame(f["file"], f["line"], f["function"]) for f in group["frames"])
