"""Progress printed without a loss: a tqdm bar's count, rate and own clock.

Many trainers print their progress with no loss on the line: tqdm's bar (``45%|████▌     | 45/100
[00:10<00:12,  4.50it/s]``, the Trainer's and Accelerate's scripts; ``69it [01:19,  1.16s/it]`` where the total is
unknown). Such a line is a report of its step (the bar's count, past the epochs its description names) and its
step time (the bar's rate): a log of them is read. A bar whose description says it is not training (a download, an
evaluation, a dataset's map) is none; a bar of bytes is none; a bar with no rate yet (``?it/s``) reports nothing.

A bar keeps its own clock (its elapsed time): tqdm draws it again when it closes — a ^C after a hang, a ``finally``
— and an unfinished bar drawn again at the count it had, its elapsed time grown, is a silence of that long with no
step (:class:`BarClock`, told as a ``progress_gap``'s details, judged by the stall detector); a finished bar drawn
again is the next one of as many steps (an evaluation's). Pure: text in, facts out.
"""

from __future__ import annotations

import re
from typing import Any

from .progress import MIN_GAP_S

#: tqdm's bar: its description, then either the percentage, bar and ``N/M``, or ``Nit`` (no total); then
#: ``[elapsed<remaining, rate]`` (``[elapsed, rate]`` without a total), the rate in iterations.
BAR = re.compile(
    r"(?P<desc>[^|]{0,80}?)\s*(?:\d{1,3}%\|[^|]{0,80}\|\s*(?P<n>\d+)/(?P<total>\d+)\s*\[(?P<elapsed>[\d:]+)<[\d:?]+"
    r"|(?:^|\s)(?P<count>\d+)it \[(?P<elapsed2>[\d:]+)),\s*(?P<rate>\d+\.?\d*)\s?(?P<unit>it/s|s/it)"
)
#: What a bar's description says when its iterations are not training steps.
NOT_TRAINING = re.compile(
    r"down|upload|load|eval|valid|test|predict|infer|generat|map|token|filter|process|extract|sav|convert|"
    r"shard|sampl|encod|decod|fetch|resolv|build|prepar|comput|calculat|writ|read|copy|index|shuffl|pack",
    re.IGNORECASE,
)
#: The epoch a bar's description names (``Epoch 3:``): its count restarts each epoch.
DESC_EPOCH = re.compile(r"\bepoch\s*\[?(\d+)", re.IGNORECASE)


def progress_report(text: str) -> dict[str, Any] | None:
    """The report a line of progress without a loss gives (see the module docstring), or None."""
    bar = _bar(text)
    if bar is None:
        return None
    step, _, rate, unit, _ = bar
    return {"global_step": step, "step_time_ms": _step_s(rate, unit) * 1000.0}


class BarClock:
    """One stream's training bar, by its own elapsed time (see the module docstring)."""

    __slots__ = ("_last",)

    def __init__(self) -> None:
        self._last: tuple[int, float, float, str] | None = None  # step, elapsed s, step time s, description

    def feed(self, text: str, ts: float) -> dict[str, Any] | None:
        """A bar line read at ``ts``: the silence it shows, as a ``progress_gap``'s details, or None."""
        bar = _bar(text) if "it" in text else None
        if bar is None:
            return None
        step, elapsed, rate, unit, desc = bar
        last, self._last = self._last, (step, elapsed, _step_s(rate, unit), desc)
        if last is None or step != last[0] or desc != last[3] or elapsed - last[1] < MIN_GAP_S or _done(text):
            return None  # not the same bar drawn again later; or a finished one: the next bar of as many steps
        gap = elapsed - last[1]
        return {"since": ts - gap, "gap_s": round(gap, 3), "last_step": step, "interval_s": last[2], "line": text}


def glued_bar(text: str) -> bool:
    """Whether a line holds a progress bar with a loss (``…2.39it/s, loss=nan, …]``) before a message glued on."""
    return "loss=" in text and ("it/s" in text or "s/it" in text)


def _bar(text: str) -> tuple[int, float, float, str, str] | None:
    """(step, elapsed s, rate, unit, description) of a training bar's line, or None."""
    if "%|" not in text and "it [" not in text:
        return None
    match = BAR.search(text)
    if match is None or NOT_TRAINING.search(match["desc"]) or float(match["rate"]) <= 0:
        return None
    if match["count"] is not None:
        return (
            int(match["count"]),
            _seconds(match["elapsed2"]),
            float(match["rate"]),
            match["unit"],
            match["desc"].strip(),
        )
    n, total = int(match["n"]), int(match["total"])
    if n > total:
        return None
    epoch = DESC_EPOCH.search(match["desc"])
    step = n + (int(epoch[1]) * total if epoch else 0)
    return step, _seconds(match["elapsed"]), float(match["rate"]), match["unit"], match["desc"].strip()


def _done(text: str) -> bool:
    """Whether a bar's line shows it finished (``100%|``): a bar drawn again after that is another one."""
    return "100%|" in text


def _step_s(rate: float, unit: str) -> float:
    return 1.0 / rate if unit == "it/s" else rate


def _seconds(clock: str) -> float:
    """tqdm's elapsed time (``01:19``, ``2:01:43``) in seconds."""
    seconds = 0.0
    for part in clock.split(":"):
        seconds = seconds * 60 + float(part or 0)
    return seconds
