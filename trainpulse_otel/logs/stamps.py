"""A line's own time in the other forms loggers begin it with, read without cutting the line.

:func:`dated_stamp` reads a stamp with a year that :data:`~.lines.TIME_PREFIX` does not: the date written with
slashes, a level inside its bracket, a logging prefix before it, ``ctime``'s words. :func:`month_day_clock` reads
one without a year (MMEngine's and detectron2's ``%m/%d %H:%M:%S``), as glog's and syslog's are read. The line is
kept whole: a framework's reader may read its own stamp. Pure.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone

#: A bracket's or a launcher's mark before a stamp: ``[``, a Ray actor's ``(TaskRunner pid=42) ``.
_LEAD = r"^\s*(?:\(\w+ pid=\d+[^)]*\)\s+)?"
_CLOCK = r"(?P<time>\d{2}:\d{2}:\d{2})(?:[.,](?P<frac>\d{1,9}))?"
#: The months as syslog and ``ctime`` name them.
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_MONTHS = "|".join(MONTHS)
#: Stamps with a year, each as a logger writes it:
#: ``%m/%d/%Y %H:%M:%S`` — the Hugging Face examples' and Accelerate's ``01/27/2026 02:27:10 - INFO - __main__ -``,
#: SageMaker's built-in algorithms' ``[05/10/2024 23:09:47 INFO 1400…]``;
#: ``%Y/%m/%d %H:%M:%S`` — PaddlePaddle's ``[2022/04/04 17:51:03] root INFO:``, MMEngine's ``2024/05/01 10:00:00 -
#: mmengine - INFO -``;
#: ISO after a level: Tornado's and Optuna's ``[I 2025-10-20 19:14:51,339]``, NeMo's ``[NeMo W 2025-06-18 21:57:03
#: …]``, Python logging's ``INFO:tensorflow:[2021-03-28 02:17:19]`` and ``INFO:2026-04-03 07:04:06,890:``, NVIDIA
#: dllogger's ``DLL 2020-10-30 14:53:19.375011 -``;
#: ``ctime`` — ``dmesg -T``'s ``[Sun Feb 23 16:24:18 2025]``, AWS Neuron's ``LOG Thu Sep 29 22:30:10 2022 -``.
DATED = (
    re.compile(_LEAD + r"\[?(?P<month>\d{2})/(?P<day>\d{2})/(?P<year>\d{4}) " + _CLOCK),
    re.compile(_LEAD + r"\[?(?P<year>\d{4})/(?P<month>\d{2})/(?P<day>\d{2}) " + _CLOCK),
    re.compile(
        _LEAD + r"(?:\[(?:NeMo )?[IWEDC] |(?:INFO|WARNING|ERROR|DEBUG|CRITICAL):(?:[\w.]+:)?\[?|DLL )"
        r"(?P<year>\d{4})-(?P<month>\d{2})-(?P<day>\d{2})[ T]" + _CLOCK
    ),
    re.compile(
        _LEAD
        + rf"(?:\[|LOG )?(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (?P<name>{_MONTHS}) {{1,2}}(?P<day>\d{{1,2}}) "
        + _CLOCK
        + r" (?P<year>\d{4})\b"
    ),
)
#: What a line must begin with (after blanks) for :data:`DATED` to be tried: most lines are passed over by it.
_FIRST = frozenset("0123456789[(IWEDCLMTFS")
#: What a line may begin with for :func:`dated_stamp` to be called at all (a blank before the stamp too).
STAMP_FIRST = _FIRST | frozenset(" \t")
#: MMEngine's and detectron2's stamp without a year (``06/11 13:16:45 - mmengine - INFO -``, ``[04/05 01:30:24
#: d2.utils.events]:``), DARTS' twelve-hour clock (``05/31 01:52:29 PM``).
MONTH_DAY = re.compile(
    r"^\s*\[?(?P<month>\d{2})/(?P<day>\d{2}) (?P<hour>\d{2}):(?P<rest>\d{2}:\d{2})(?:[.,](?P<frac>\d{1,6}))?"
    r"(?: (?P<half>[AP]M)\b)?(?!/)"
)


def dated_stamp(text: str) -> float | None:
    """The unix time of a stamp with a year that begins ``text`` in one of :data:`DATED`'s forms (read as UTC),
    or None."""
    first = text[:1]
    if first not in _FIRST and (not first.isspace() or text[:40].lstrip()[:1] not in _FIRST):
        return None
    for form in DATED:
        if (match := form.match(text)) is not None:
            return _unix(match)
    return None


def month_day_clock(text: str) -> str | None:
    """A :data:`MONTH_DAY` stamp as ``MM-DDTHH:MM:SS.ffffff`` (a clock without a year), or None."""
    if (match := MONTH_DAY.match(text)) is None:
        return None
    hour = int(match["hour"])
    if match["half"] is not None:
        hour = hour % 12 + (12 if match["half"] == "PM" else 0)
    frac = (match["frac"] or "0")[:6].ljust(6, "0")
    return f"{match['month']}-{match['day']}T{hour:02d}:{match['rest']}.{frac}"


def utc_time(date: str, clock: str, frac: str | None = None, zone: str | None = None) -> float | None:
    """The unix time of ``date`` (``YYYY-MM-DD``) at ``clock`` (``HH:MM`` or ``HH:MM:SS``) and its fraction of a
    second, in ``zone`` (``Z``, ``+05:30``, ``+0530``; UTC where it names none); None where there is no such time."""
    frac = (frac or "0")[:6].ljust(6, "0")
    zone = zone or "Z"
    if zone != "Z" and ":" not in zone:
        zone = f"{zone[:3]}:{zone[3:]}"
    clock = clock if clock.count(":") == 2 else f"{clock}:00"
    try:
        when = datetime.fromisoformat(f"{date}T{clock}.{frac}{'+00:00' if zone == 'Z' else zone}")
    except ValueError:
        return None
    return when.astimezone(timezone.utc).timestamp()


def _unix(match: re.Match[str]) -> float | None:
    said = match.groupdict()
    month = MONTHS.index(said["name"]) + 1 if said.get("name") else int(said["month"])
    return utc_time(f"{said['year']}-{month:02d}-{int(said['day']):02d}", said["time"], said.get("frac"))
