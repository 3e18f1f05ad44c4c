"""Progress printed without a loss: a tqdm bar's count, rate and own clock.

Many trainers print their progress with no loss on the line: tqdm's bar (``45%|████▌     | 45/100
[00:10<00:12,  4.50it/s]``, the Trainer's and Accelerate's scripts; ``69it [01:19,  1.16s/it]`` where the total is
unknown). Such a line is a report of its step (the bar's count, past the epochs its description names) and its
step time (the bar's rate): a log of them is read. A bar whose description says it is not training (a download, an
evaluation, a dataset's map) is none; a bar of bytes is none; a bar with no rate yet (``?it/s``) reports nothing.

A bar keeps its own clock (its elapsed time): tqdm draws it again when it closes — a ^C after a hang, a ``finally``
— and an unfinished bar drawn again at the count it had, its elapsed time grown, is a silence of that long with no
step (:class:`BarClock`, told as a ``progress_gap``'s details, judged by the stall detector) when the log ends in
it; a bar that steps on after was paused (an evaluation, a save drew it again), and a finished bar drawn again is
the next one of as many steps. So is the time an unfinished bar's own clock holds beyond its count at the pace the
draw before it showed, where its steps averaged many times that pace (:data:`SLOW_BAR_MULTIPLE`), and the whole
clock of a bar that never stepped (``0/1000 [2:13:45<?, ?it/s]``: drawn again when it closed, hours after it began).
What a terminal glued after a bar's end is another line's (:func:`after_bar`). Pure: text in, facts out.
"""

from __future__ import annotations

import re
from typing import Any

from .progress import MIN_GAP_S

#: tqdm's bar: its description, then either the percentage, bar and ``N/M``, or ``Nit`` (no total); then
#: ``[elapsed<remaining, rate]`` (``[elapsed, rate]`` without a total), the rate in iterations.
BAR = re.compile(
    r"(?P<desc>[^|]{0,80}?)\s*(?:\d{1,3}%\|[^|]{0,80}\|\s*(?P<n>\d+)/(?P<total>\d+)\s*\[(?P<elapsed>[\d:]+)<[\d:?]+"
    r"|(?:^|\s)(?P<count>\d+)it \[(?P<elapsed2>[\d:]+)),\s*(?:(?P<rate>\d+\.?\d*)|\?)\s?(?P<unit>it/s|s/it)"
)
#: An unfinished bar whose steps averaged this many times the previous draw's step time (its shown rate) holds a
#: silence: the time beyond its count at that pace (YOLOv8's ``9/351 [13:44:50<…, 5498.98s/it]`` after a bar at
#: 1.36 it/s). A pace that varies less is a slowdown (throughput_collapse's), not time with no step.
SLOW_BAR_MULTIPLE = 10.0
#: What a bar's description says when its iterations are not training steps.
NOT_TRAINING = re.compile(
    r"down|upload|load|eval|valid|test|predict|infer|generat|map|token|filter|process|extract|sav|convert|"
    r"shard|sampl|encod|decod|fetch|resolv|build|prepar|comput|calculat|writ|read|copy|index|shuffl|pack|scan",
    re.IGNORECASE,
)
#: The epoch a bar's description names (``Epoch 3:``): its count restarts each epoch.
DESC_EPOCH = re.compile(r"\bepoch\s*\[?(\d+)", re.IGNORECASE)


def progress_report(text: str) -> dict[str, Any] | None:
    """The report a line of progress without a loss gives (see the module docstring), or None."""
    bar = _bar(text)
    if bar is None or bar[3] is None:
        return None
    step, _, _, rate, unit, _ = bar
    return {"global_step": step, "step_time_ms": _step_s(rate, unit) * 1000.0}


class BarClock:
    """One stream's training bar, by its own elapsed time (see the module docstring)."""

    __slots__ = ("_last", "_pending")

    def __init__(self) -> None:
        self._last: tuple[int, float, float | None, str] | None = None  # step, elapsed s, step time s, description
        self._pending: dict[str, Any] | None = None  # the silence a bar drawn again showed, until it steps on

    def feed(self, text: str, ts: float) -> None:
        """A line read at ``ts``: a bar's draw moves the clock (see the module docstring)."""
        bar = _bar(text)
        if bar is None:
            return
        step, count, elapsed, rate, unit, desc = bar
        last, self._last = self._last, (step, elapsed, None if rate is None else _step_s(rate, unit), desc)
        if rate is None and not count:  # a bar that never stepped: its whole clock is time with no step
            self._pending = _start_silence(text, ts, elapsed, step)
            return
        if last is None or desc != last[3] or step != last[0]:
            self._pending = None if last is None else self._slow(text, ts, (count, elapsed), last[2], step)
        elif elapsed - last[1] >= MIN_GAP_S and not _done(text):  # a finished bar again is the next of its size
            gap = elapsed - last[1]
            self._pending = {"since": ts - gap, "gap_s": round(gap, 3), "last_step": step, "interval_s": last[2]}
            self._pending["line"] = text.strip()

    @staticmethod
    def _slow(text: str, ts: float, clock: tuple[int, float], pace_s: float | None, step: int) -> dict[str, Any] | None:
        """The silence an unfinished bar's own clock (``clock``: its count and elapsed seconds) holds: its steps took
        :data:`SLOW_BAR_MULTIPLE` times the pace the bar before showed, on average; the time beyond its count at that
        pace (None: no such silence)."""
        count, elapsed = clock
        if not count or pace_s is None or _done(text) or elapsed < SLOW_BAR_MULTIPLE * pace_s * count:
            return None
        return _start_silence(text, ts, elapsed - pace_s * count, step, pace_s)

    def flush(self) -> dict[str, Any] | None:
        """The silence the stream ended in (its bar drawn again, never stepping on), or None."""
        told, self._pending = self._pending, None
        return told


def _start_silence(text: str, ts: float, gap_s: float, step: int, pace_s: float | None = None) -> dict[str, Any] | None:
    """A silence a bar's own clock holds (``gap_s`` up to its draw at ``ts``), phase ``start``: its clock holds its
    start (data-loader workers, a compile), so it is judged as a pause is; ``pace_s`` the step time the bar before
    showed, where one did. None under :data:`MIN_GAP_S`."""
    if gap_s < MIN_GAP_S:
        return None
    told: dict[str, Any] = {"since": ts - gap_s, "gap_s": round(gap_s, 3), "last_step": step, "phase": "start"}
    if pace_s is not None:
        told["interval_s"] = pace_s
    return told | {"line": text.strip()}


#: A tqdm bar's end (its rate, then its postfix): what a terminal printed next, when the bar ended no line, is glued
#: after it (``9it [00:04,  2.30it/s]zsh: segmentation fault  python3 train.py``, ``… 13.82it/s]Killed``).
BAR_END = re.compile(r"(?:it/s|s/it)(?:, [^\]\n]*)?\]")


def after_bar(text: str) -> str:
    """What a terminal glued after the last bar's end on ``text`` (``""`` where no bar ends on it)."""
    if "]" not in text or ("it/s" not in text and "s/it" not in text):
        return ""
    end = _last_match(BAR_END, text)
    return "" if end is None else text[end.end() :].strip()


def glued_bar(text: str) -> bool:
    """Whether a line holds a progress bar with a loss (``…2.39it/s, loss=nan, …]``) before a message glued on."""
    return "loss=" in text and ("it/s" in text or "s/it" in text)


def _bar(text: str) -> tuple[int, int, float, float | None, str, str] | None:
    """(step, the bar's own count, elapsed s, rate — None where it shows none yet —, unit, description) of a training
    bar's line, or None."""
    if "%|" not in text and "it [" not in text:
        return None
    match = _last_match(BAR, text)  # a terminal's carriage returns keep every draw on one line: the last is now
    rate = None if match is None or match["rate"] is None else float(match["rate"])
    if match is None or NOT_TRAINING.search(match["desc"]) or rate == 0:
        return None
    if match["count"] is not None:
        return (
            int(match["count"]),
            int(match["count"]),
            _seconds(match["elapsed2"]),
            rate,
            match["unit"],
            match["desc"].strip(),
        )
    n, total = int(match["n"]), int(match["total"])
    if n > total:
        return None
    epoch = DESC_EPOCH.search(match["desc"])
    step = n + (int(epoch[1]) * total if epoch else 0)
    return step, n, _seconds(match["elapsed"]), rate, match["unit"], match["desc"].strip()


def _last_match(pattern: re.Pattern[str], text: str) -> re.Match[str] | None:
    """The last of ``pattern``'s matches in ``text``, or None."""
    found = None
    for found in pattern.finditer(text):  # noqa: B007 (the loop keeps the last)
        pass
    return found


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
