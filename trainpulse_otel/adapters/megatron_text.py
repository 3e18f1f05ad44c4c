"""Read Megatron-LM's console log into one record of named values (pure text parsing).

The iteration line (``training_log``, printed by the last rank every
``--log-interval`` iterations) in every release's form: with today's or 2024's
time stamp, without one (2022 and earlier), with Megatron-DeepSpeed's, BigScience's,
GPT-NeoX's (``lm_loss``, ``9.8TFLOPS``) or ALCF's (``key=value``) segments, and 2020's
without colons (``learning rate 1.258E-04 | lm loss 4.799004E+00 |``). Each segment
becomes a value under its own key; a line that does not end with ``|`` was cut: it is read with the lines after it
(a terminal wrapped it mid-word) until one ends it, else left out; one followed by the next iteration's line was
whole (a script's own line with no closing bar).

Timer blocks (``megatron/core/timers.py``, often prefixed ``INFO:megatron.core.timers:``)
follow the iteration line they belong to, in each ``--timing-log-option``:
``minmax`` (the default: ``(min, max) time across ranks (ms):``, then
``    forward-backward ....: (1234.56, 1290.12)``), ``max`` (``max time across
ranks (ms):``), ``all`` (``times across ranks (ms):``, then every rank's value),
and before 2022 one ``time (ms) | forward-compute: 123.45 | ...`` line. Values
are kept as ``timer <name>`` (the largest rank's milliseconds, per iteration;
``save-checkpoint`` is the whole save) and, for ``all``, per rank under
``times across ranks (ms)``. The record is the newest complete iteration line
merged with the timer blocks that follow it. Examples of every form: docs/api.md.
"""

from __future__ import annotations

import re
from typing import Any

from .base import log_lines

#: Not NeMo 2's ``Training epoch 0, iteration 120/149 | ...`` (Lightning's, read by the logs' Lightning parser).
ITERATION = re.compile(r"(?<!, )\biteration(?:\s+|=\s*)(?P<it>\d+)\s*/\s*\d+\s*\|")
SEGMENT = re.compile(
    r"^\s*(?P<key>[^:|=]*?[^:|=\s])(?:\s*[:=]\s*|\s+)"
    r"(?P<value>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf))(?P<unit>[KMGTP]?FLOPS)?\s*$",
    re.IGNORECASE,
)
#: GPT-NeoX's ``approx flops per GPU: 112.9TFLOPS``: the unit's factor to TFLOP/s.
FLOPS_UNITS = {"kflops": 1e-9, "mflops": 1e-6, "gflops": 1e-3, "tflops": 1.0, "pflops": 1e3, "flops": 1e-12}
HEADERS = (
    ("(min, max) time across ranks (ms):", "minmax"),
    ("max time across ranks (ms):", "max"),
    ("times across ranks (ms):", "all"),
)
_NUM = r"(\d+(?:\.\d+)?)"
# A timer name starts after whitespace (indentation), which keeps the search linear in the line.
MINMAX_LINE = re.compile(r"(?:^|\s)(?P<name>[A-Za-z][\w/\-]*) \.*: \(" + _NUM + ", " + _NUM + r"\)\s*$")
MAX_LINE = re.compile(r"(?:^|\s)(?P<name>[A-Za-z][\w/\-]*) \.*: " + _NUM + r"\s*$")
ALL_NAME = re.compile(r"(?:^|\s)(?P<name>[A-Za-z][\w/\-]*):\s*$")
ALL_RANK = re.compile(r"\brank\s+(?P<rank>\d+): " + _NUM + r"\s*$")
OLD_TIMERS = re.compile(r"time \(ms\)((?: \| [\w/\-][\w/\- ]*: \d+(?:\.\d+)?)+)\s*$")
OLD_PAIR = re.compile(r"([\w/\-][\w/\- ]*): (\d+(?:\.\d+)?)")
#: Lines of Megatron's that carry no value: the checkpoint save, the bad-gradient warning.
NOTICES = ("saving checkpoint at iteration", "successfully saved checkpoint", "***WARNING*** Bad grad_norm")

TIMER_PREFIX = "timer "
#: A wrapped iteration line is read from at most this many lines, and this many characters.
MAX_JOINS, MAX_JOINED = 3, 8192
PER_RANK_KEY = "times across ranks (ms)"


class _Record:
    """One iteration line and the timers logged after it."""

    def __init__(self, iteration: int, values: dict[str, Any]) -> None:
        self.values: dict[str, Any] = {"iteration": iteration, **values}
        self.per_rank: dict[str, dict[int, float]] = {}

    def timer(self, name: str, value_ms: float, rank: int | None = None) -> None:
        key = TIMER_PREFIX + name
        self.values[key] = max(value_ms, self.values.get(key, 0.0))
        if rank is not None:
            self.per_rank.setdefault(name, {})[rank] = value_ms

    def result(self) -> dict[str, Any]:
        return {**self.values, PER_RANK_KEY: self.per_rank} if self.per_rank else dict(self.values)


class RecordReader:
    """Megatron's log line by line: each complete iteration line with the timer blocks logged after it."""

    def __init__(self) -> None:
        self.current: _Record | None = None
        self.block: str | None = None
        self.all_name: str | None = None
        self.partial: str | None = None  # an iteration line cut where a terminal wrapped it, until its end comes
        self.joins = 0
        self.began = False  # whether the line fed last began an iteration's line

    def feed(self, line: str) -> tuple[bool, dict[str, Any] | None]:
        """``(whether the line is Megatron's, the record it completes)``: an iteration line completes the one
        before it (its timers end where the next iteration begins)."""
        self.began = False
        if self.partial is not None:
            if "iteration" in line and (held := ITERATION.search(self.partial)) and ITERATION.search(line):
                # a new iteration line, not the held one's end: that one was whole but for its closing bar
                self.current, self.partial = _Record(int(held["it"]), _segments(self.partial, held)), None
            else:  # an iteration line a terminal wrapped: this line goes on with it
                line, self.partial = self.partial + line, None
                self.joins += 1
        if "iteration" in line and (match := ITERATION.search(line)):
            complete = line.rstrip().endswith("|")
            done, self.block, self.began = self.flush(), None, True  # an iteration line ends the one before
            if not complete and self.joins < MAX_JOINS and len(line) < MAX_JOINED:
                self.partial = line  # (a line cut for good is left out when the next one does not end it)
                return True, done
            self.joins = 0
            self.current = _Record(int(match["it"]), _segments(line, match)) if complete else None
            return True, done
        self.joins = 0
        if ("checkpoint" in line or "***WARNING***" in line) and any(notice in line for notice in NOTICES):
            return True, None
        if "across ranks" in line:
            header = next((mode for marker, mode in HEADERS if marker in line), None)
            if header is not None:
                self.block, self.all_name = header, None
                return True, None
        current = self.current
        if current is None:
            return False, None
        if "time (ms)" in line and (match := OLD_TIMERS.search(line)):
            for name, value in OLD_PAIR.findall(match.group(1)):
                current.timer(name, float(value))
            return True, None
        if self.block is None:
            return False, None
        self.block, self.all_name = _timer_line(current, line, self.block, self.all_name)
        return self.block is not None, None

    def flush(self) -> dict[str, Any] | None:
        """The iteration still held, with the timers read so far (None: none)."""
        current, self.current = self.current, None
        return current.result() if current is not None else None


def newest_record(text: str) -> dict[str, Any] | None:
    """The newest complete iteration line of ``text`` with its timers, or None."""
    reader = RecordReader()
    newest = None
    for line in log_lines(text):
        _, done = reader.feed(line)
        newest = done or newest
    return reader.flush() or newest


def _segments(line: str, iteration: re.Match[str]) -> dict[str, Any]:
    """``key: number`` (``key=number``, 2020's ``key number``) segments of an iteration line, before and after
    ``iteration N/ M`` (``NAN``/``INF`` included: ``{:.6E}`` of a diverged loss); text segments are left out.
    Validation decides which fields may be non-finite."""
    out: dict[str, Any] = {}
    for segment in (*line[: iteration.start()].split("|")[:-1], *line[iteration.end() :].split("|")):
        if match := SEGMENT.match(segment):
            value = float(match["value"])
            if match["unit"]:
                value *= FLOPS_UNITS[match["unit"].lower()]
            out[match["key"].strip()] = value
    return out


def _timer_line(record: _Record, line: str, block: str | None, all_name: str | None) -> tuple[str | None, str | None]:
    """Add one line of a timer block; a line that fits no timer shape ends the block."""
    if block == "minmax" and (match := MINMAX_LINE.search(line)):
        record.timer(match["name"], float(match.group(3)))
    elif block == "max" and (match := MAX_LINE.search(line)):
        record.timer(match["name"], float(match.group(2)))
    elif block == "all" and (match := ALL_RANK.search(line)) and all_name is not None:
        record.timer(all_name, float(match.group(2)), int(match["rank"]))
    elif block == "all" and (match := ALL_NAME.search(line)):
        all_name = match["name"]
    else:
        return None, None
    return block, all_name
