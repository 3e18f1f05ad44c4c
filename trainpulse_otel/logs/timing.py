"""A log line's place in time where it says none: the file's first stamp, a report's step time, the line order.

A replayed log's lines are placed by their own stamps; where the first lines carry none, they start at the file's
first stamped line (:func:`first_stamp`, read ahead), and a report moves its stream's clock by its step time times
the steps since the last report (:func:`advance_s`), or by :data:`UNTIMED_REPORT_S` where it prints none. A
framework that prints no step time gets the one its stamps give (:func:`with_stamped_step_time`). Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .labels import split_label
from .lines import plain, split_prefixes

#: A report's time advances by its step time times the steps it stands for, at most this much (s): a bogus
#: step time cannot throw a log without time stamps hours ahead.
MAX_ADVANCE_S = 3600.0
#: A report that says no time (no stamp, no step time) in a stream whose lines say none moves its clock this much
#: (s): the order of the lines is then the time axis, one report a tick at the default interval.
UNTIMED_REPORT_S = 1.0


def first_stamp(lines: Iterable[str]) -> float | None:
    """The time of the first line of ``lines`` that carries its own stamp, or None."""
    for text in lines:
        when = split_prefixes(split_label(plain(text))[1])[1]
        if when is not None:
            return when
    return None


def with_stamped_step_time(
    payload: dict[str, Any], step: int, ts: float, last: tuple[int, float] | None
) -> dict[str, Any]:
    """A report that gives no step time, with the one its lines' own time stamps give: the time since the
    previous stamped report over the steps since (torchtitan, the Trainer's dicts print none)."""
    if "step_time_ms" in payload or last is None or step <= last[0] or ts <= last[1]:
        return payload
    step_ms = (ts - last[1]) / (step - last[0]) * 1000.0
    return {**payload, "step_time_ms": step_ms} if step_ms <= MAX_ADVANCE_S * 1000.0 else payload


def advance_s(payload: Mapping[str, Any], step: Any, last: int | None) -> float:
    """How far a report without a time of its own moves its stream's clock: its step time, times the steps
    since the last report (one when unknown); :data:`UNTIMED_REPORT_S` when it gives no step time."""
    step_ms = payload.get("step_time_ms")
    if not isinstance(step_ms, (int, float)) or not step_ms > 0:
        return UNTIMED_REPORT_S
    steps = step - last if isinstance(step, int) and last is not None and step > last else 1
    return min(MAX_ADVANCE_S, steps * step_ms / 1000.0)
