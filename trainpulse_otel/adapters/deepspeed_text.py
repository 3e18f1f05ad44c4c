"""Read DeepSpeed's console lines, one by one, into step records and fp16 overflow events (pure text parsing).

Lines understood, with or without the ``[date] [INFO] [file:line:func]``, ``[Rank 0]``
and ``rank=0`` prefixes, glued onto a tqdm bar or not (an example of each: docs/api.md):

- ThroughputTimer (``deepspeed/utils/timer.py``) in its three generations: ``0/25, SamplesPerSec=...``
  (2020), ``0/40, RunningAvgSamplesPerSec=..., CurrSamplesPerSec=..., MemAllocated=...`` (2021-22;
  a bare micro-step count, so their rates join the newest numbered step), and
  ``epoch=0/micro_step=200/global_step=200, RunningAvgSamplesPerSec=..., CurrSamplesPerSec=...``;
- engine progress ``step=200, skipped=4, lr=[...], mom=[...]``; the pipeline engine's
  ``steps: 200 loss: 2.3456 iter time (s): 1.234 samples/sec: 51.862``; the config dump's batch sizes;
- the wall-clock breakdown ``time (ms) | fwd: ... | bwd: ... | step: ...`` (older ``forward: ...``), its
  micro-step and pipeline send/receive lines of the same shape;
- fp16 overflows (:class:`OverflowReader`): ``OVERFLOW! Rank 0 Skipping step`` (``[deepscale]`` before 2021),
  ``Overflow detected. Skipping step``, ``fp16 dynamic loss scale overflow! Skipping step``,
  ``Grad overflow on iteration N``, the loss-scale changes and the fatal ``Current loss scale already at minimum``.

A step record is a numbered step plus the first breakdown after it (DeepSpeed prints the breakdown every
step, numbered lines every ``steps_per_print``), so every value describes one step.
"""

from __future__ import annotations

import math
import re
from typing import Any

from .base import log_lines

THROUGHPUT = re.compile(
    r"epoch=(?P<epoch>\d+)/micro_step=\d+/global_step=(?P<step>\d+), "
    r"RunningAvgSamplesPerSec=(?P<avg>[^,]+), CurrSamplesPerSec=(?P<curr>[-\w.+]+)"
)
THROUGHPUT_OLD = re.compile(
    r"(?<![=\w/])\d+/\d+, RunningAvgSamplesPerSec=(?P<avg>[^,]+), CurrSamplesPerSec=(?P<curr>[-\w.+]+)"
)
THROUGHPUT_2020 = re.compile(r"(?<![=\w/])\d+/\d+, SamplesPerSec=(?P<avg>\d+\.?\d*(?:[eE][-+]?\d+)?)")
PROGRESS = re.compile(r"\bstep=(?P<step>\d+), skipped=(?P<skipped>\d+), lr=\[(?P<lr>[^\],]*)")
PIPELINE = re.compile(
    r"\bsteps?: (?P<step>\d+)(?: / \d+)? +loss: (?P<loss>\S+) +"
    r"iter time \(s\): (?P<iter>\S+) +samples/sec: (?P<rate>\d+\.?\d*)"
)
CONFIG = re.compile(
    r"\[config\.py:\d+:print\]\s+(?P<key>train_batch_size|train_micro_batch_size_per_gpu|gradient_accumulation_steps)"
    r" \.*\s*(?P<value>\d+)\s*$"
)
BREAKDOWN = re.compile(r"time \(ms\)(?P<pairs>(?: \| [A-Za-z_]+: -?\d+(?:\.\d+)?)+)\s*$")
PAIR = re.compile(r"([A-Za-z_]+): (-?\d+(?:\.\d+)?)")
_NUMBER = r"(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
SKIPPING = re.compile(
    r"(?:OVERFLOW! Rank \d+|Overflow detected\.|fp16 dynamic loss scale overflow!) Skipping step\."
    r"(?: Attempted loss scale: (?P<attempted>" + _NUMBER + r"),"
    r"(?: reducing to (?P<scale>" + _NUMBER + r")| but hysteresis))?"
)
GRAD_OVERFLOW = re.compile(r"Grad overflow on iteration:? (?P<iteration>\d+)")
SCALE_CHANGE = re.compile(r"(?:Reducing|Increasing) dynamic loss scale from \S+ to (?P<scale>" + _NUMBER + ")")
AT_MINIMUM = "Current loss scale already at minimum"
#: DeepSpeed's ``min_loss_scale`` default: the scale at minimum where no line said it.
MIN_LOSS_SCALE = "1"
#: DeepSpeed's own time stamp inside a line (after a tqdm bar, say): an overflow's identity across ranks.
STAMP = re.compile(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+)\]")
#: Record keys of the overflow lines: how many steps were skipped, and the loss scale after the newest.
OVERFLOWS = "OVERFLOW skipped steps"
LOSS_SCALE = "loss scale"
#: Old releases time one micro-step per throughput line; their rates carry this suffix.
MICRO_STEP = " (micro-step)"
RATE_KEYS = (
    "RunningAvgSamplesPerSec",
    "CurrSamplesPerSec",
    "RunningAvgSamplesPerSec" + MICRO_STEP,
    "CurrSamplesPerSec" + MICRO_STEP,
    "SamplesPerSec" + MICRO_STEP,
)
#: Prefix of the breakdown values inside a record (their own names collide with ``step``).
BREAKDOWN_PREFIX = "time (ms) "
#: The engine's cumulative skipped-step count from the progress line (the record's, not a contract field).
SKIPPED_TOTAL = "skipped (total)"
#: Substrings one of which every step line holds: the cheap test before any regex.
_STEP_HINTS = ("SamplesPerSec=", "step=", "steps: ", "step: ", "time (ms)", "config.py:")
_OVERFLOW_HINTS = ("Skipping step", "Grad overflow on iteration", "dynamic loss scale", AT_MINIMUM)


class StepReader:
    """DeepSpeed's step lines one by one: each numbered step with the breakdown logged after it."""

    def __init__(self) -> None:
        self.current: dict[str, Any] | None = None
        self.awaiting_breakdown = False
        self.unnumbered: dict[str, Any] = {}  # values of lines that name no step (old rates, lone breakdowns)
        self.config: dict[str, Any] = {}  # the config dump's batch sizes

    def feed(self, line: str) -> tuple[bool, dict[str, Any] | None]:
        """``(whether the line is a DeepSpeed step line, the record it completes)``: a numbered step completes
        the one before it."""
        if not any(hint in line for hint in _STEP_HINTS):
            return False, None
        if match := CONFIG.search(line):
            self.config[match["key"]] = int(match["value"])
            return True, None
        values, step = _line_values(line)
        if not values:
            return False, None
        kind = _breakdown_kind(values)
        if kind == "micro":
            return True, None  # micro-step timings describe a fraction of a step
        if step is not None:
            done = self.flush() if self.current is not None and self.current.get("global_step") != step else None
            if self.current is None:
                self.current, self.awaiting_breakdown = {"global_step": step}, True
            self.current.update(values)
            return True, done
        if kind == "step" and self.current is not None and self.awaiting_breakdown:
            self.current.update(values)
            self.awaiting_breakdown = False
            self.unnumbered.update(values)
            return True, None  # complete, but told with the next step: a trainer's line for it may follow
        if kind == "pipe" and self.current is not None:
            self.current.update(values)  # printed right after the pipeline's own step line
        else:
            self.unnumbered.update(values)
        return True, None

    def flush(self) -> dict[str, Any] | None:
        """The step still held (None: none), with the newest rates old releases print unnumbered."""
        current, self.current = self.current, None
        if current is None:
            return None
        rates = {k: v for k, v in self.unnumbered.items() if k in RATE_KEYS and k not in current}
        return {**self.config, **current, **rates}


class OverflowReader:
    """fp16 overflow lines one by one: each skipped step once, however many ranks print it, and the loss scale.

    An event is told as soon as its loss scale is known: at once for the ``Skipping step`` lines, which carry
    it; at the ``Reducing dynamic loss scale`` line after a ``Grad overflow on iteration N`` line. Once a
    stream prints those (they name the step), the ``Skipping step`` lines beside them only give the scale.
    Identical lines with the same time stamp, or the same iteration, are several ranks' copies of one event.
    """

    def __init__(self) -> None:
        self.scale: float | None = None  # the newest loss scale any line gave
        self.by_iteration = False
        self._pending = False
        self._key: object = None

    def feed(self, line: str, ts: float) -> tuple[bool, list[dict[str, Any]]]:
        """``(whether the line is an overflow or loss-scale line, the events it completes)``."""
        if not any(hint in line for hint in _OVERFLOW_HINTS):
            return False, []
        if match := GRAD_OVERFLOW.search(line):
            self.by_iteration = True
            return True, self._event(("iteration", match["iteration"]), None)
        if match := SKIPPING.search(line):
            scale = match["scale"] or match["attempted"]
            if self.by_iteration:
                return True, self._scaled(scale)
            stamp = STAMP.search(line)
            return True, self._event((stamp[1] if stamp else ts, match.group(0)), scale or "")
        if match := SCALE_CHANGE.search(line):
            return True, self._scaled(match["scale"])
        if AT_MINIMUM in line:  # the scale can go no lower: the newest said, else DeepSpeed's min_loss_scale default
            return True, self._event(("minimum", ts), "" if self.scale is not None else MIN_LOSS_SCALE)
        return False, []

    def flush(self) -> list[dict[str, Any]]:
        """The event still waiting for its loss scale, as a record (``[]``: none)."""
        if not self._pending:
            return []
        self._pending = False
        return [self._record()]

    def _event(self, key: object, scale: str | None) -> list[dict[str, Any]]:
        """A new event (or another rank's copy of the newest); ``scale`` None: its scale is yet to come."""
        if key == self._key:
            return self._scaled(scale or None) if self._pending else []
        done = self.flush()
        self._key = key
        if scale is None:
            self._pending = True
            return done
        self._set_scale(scale or None)
        return [*done, self._record()]

    def _scaled(self, scale: str | None) -> list[dict[str, Any]]:
        self._set_scale(scale)
        return self.flush() if scale is not None else []

    def _record(self) -> dict[str, Any]:
        return {OVERFLOWS: 1} if self.scale is None else {OVERFLOWS: 1, LOSS_SCALE: self.scale}

    def _set_scale(self, text: str | None) -> None:
        if text is not None and math.isfinite(value := float(text)):
            self.scale = value


def newest_record(text: str) -> dict[str, Any] | None:
    """The values of the newest step in ``text`` with every overflow counted (see the module docstring), or
    None: a text without a numbered step gives its newest unnumbered values."""
    steps, overflows = StepReader(), OverflowReader()
    newest: dict[str, Any] | None = None
    skipped = 0
    for line in log_lines(text):
        overflow, events = overflows.feed(line, 0.0)
        skipped += len(events)
        if overflow:
            continue
        _, done = steps.feed(line)
        newest = done or newest
    skipped += len(overflows.flush())
    newest = steps.flush() or newest
    counted = {OVERFLOWS: skipped} if skipped else {}
    if overflows.scale is not None:
        counted[LOSS_SCALE] = overflows.scale
    if newest is None:
        return {**steps.unnumbered, **counted} or None
    return {**newest, **counted}


def _line_values(line: str) -> tuple[dict[str, Any], int | None]:
    """The named values of one line and its step number (None: the line has none)."""
    if match := THROUGHPUT.search(line):
        return _rates(match), int(match["step"])
    if match := PROGRESS.search(line):
        values = {**_finite({"lr": match["lr"]}), SKIPPED_TOTAL: int(match["skipped"])}
        return values, int(match["step"])
    if match := PIPELINE.search(line):
        values = _finite({"iter time (s)": match["iter"], "samples/sec": match["rate"]})
        return {**_loss(match["loss"]), **values}, int(match["step"])
    if match := THROUGHPUT_OLD.search(line):
        return _rates(match, MICRO_STEP), None
    if match := THROUGHPUT_2020.search(line):
        return _finite({"SamplesPerSec" + MICRO_STEP: match["avg"]}), None
    if match := BREAKDOWN.search(line):
        pairs = PAIR.findall(match["pairs"])
        return {BREAKDOWN_PREFIX + name: float(value) for name, value in pairs}, None
    return {}, None


def _rates(match: re.Match[str], suffix: str = "") -> dict[str, Any]:
    return _finite({"RunningAvgSamplesPerSec" + suffix: match["avg"], "CurrSamplesPerSec" + suffix: match["curr"]})


def _finite(raw: dict[str, str]) -> dict[str, Any]:
    """Parse the numbers, dropping what is not finite (RunningAvgSamplesPerSec=-inf before warm-up)."""
    out: dict[str, Any] = {}
    for key, text in raw.items():
        try:
            value = float(text.strip())
        except ValueError:
            continue
        if math.isfinite(value):
            out[key] = value
    return out


def _loss(text: str) -> dict[str, Any]:
    """The pipeline line's loss, NaN or inf included (a diverged loss is data; validation accepts it)."""
    try:
        return {"loss": float(text.strip())}
    except ValueError:
        return {}


def _breakdown_kind(values: dict[str, Any]) -> str | None:
    """Which breakdown line these values came from: "step", "micro", "pipe", or None."""
    names = {key[len(BREAKDOWN_PREFIX) :] for key in values if key.startswith(BREAKDOWN_PREFIX)}
    if not names:
        return None
    if any(name.endswith("_microstep") for name in names):
        return "micro"
    if all(name.startswith("pipe_") for name in names):
        return "pipe"
    return "step"
