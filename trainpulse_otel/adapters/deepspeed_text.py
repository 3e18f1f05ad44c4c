"""Read DeepSpeed's console lines into one record of named values (pure text parsing).

Lines understood, with or without the ``[date] [INFO] [file:line:func]`` and
``[Rank 0]`` prefixes (an example of each: docs/api.md, ``deepspeed``):

- ThroughputTimer (``deepspeed/utils/timer.py``): ``epoch=0/micro_step=200/global_step=200,
  RunningAvgSamplesPerSec=..., CurrSamplesPerSec=...``; older releases print
  ``0/200, RunningAvgSamplesPerSec=...`` every micro-step, and their newest rate
  joins the newest numbered step;
- engine progress: ``step=200, skipped=4, lr=[0.00024, 0.00024], mom=[...]``;
- pipeline engine: ``steps: 200 loss: 2.3456 iter time (s): 1.234 samples/sec: 51.862``;
- the wall-clock breakdown, every step: ``time (ms) | fwd: ... | bwd: ... | step: ...``
  (older: ``rank=0 time (ms) | forward: ...``), and the micro-step and pipeline
  send/receive lines of the same shape;
- fp16 overflows (``[deepspeed] OVERFLOW! Rank 0 Skipping step. ... reducing to 32768``): counted, newest scale kept.

DeepSpeed numbers its lines only every ``steps_per_print`` steps but prints the
breakdown every step, right after that step's lines: the record is the newest
numbered step plus the first breakdown after it, so every value describes one
step; text without a numbered line gives the newest breakdown alone.
"""

from __future__ import annotations

import math
import re
from typing import Any

from .base import log_lines

THROUGHPUT = re.compile(
    r"epoch=(?P<epoch>\d+)/micro_step=\d+/global_step=(?P<step>\d+), "
    r"RunningAvgSamplesPerSec=(?P<avg>[^,]+), CurrSamplesPerSec=(?P<curr>[^,]+), MemAllocated="
)
THROUGHPUT_OLD = re.compile(
    r"(?<![=\w])\d+/\d+, RunningAvgSamplesPerSec=(?P<avg>[^,]+), CurrSamplesPerSec=(?P<curr>[^,]+), MemAllocated="
)
PROGRESS = re.compile(r"\bstep=(?P<step>\d+), skipped=\d+, lr=\[(?P<lr>[^\],]*)")
PIPELINE = re.compile(
    r"\bsteps?: (?P<step>\d+)(?: / \d+)? +loss: (?P<loss>\S+) +"
    r"iter time \(s\): (?P<iter>\S+) +samples/sec: (?P<rate>[\d.]+)"
)
OVERFLOW = re.compile(
    r"OVERFLOW! Rank \d+ Skipping step\.(?: Attempted loss scale: \S+, reducing to (?P<scale>[\d.eE+]+))?"
)
#: Record keys of the overflow lines: how many steps were skipped, and the loss scale after the newest.
OVERFLOWS = "OVERFLOW skipped steps"
LOSS_SCALE = "loss scale"
BREAKDOWN = re.compile(r"time \(ms\)(?P<pairs>(?: \| [A-Za-z_]+: -?\d+(?:\.\d+)?)+)\s*$")
PAIR = re.compile(r"([A-Za-z_]+): (-?\d+(?:\.\d+)?)")
#: Old releases time one micro-step per throughput line; their rates carry this suffix.
MICRO_STEP = " (micro-step)"
RATE_KEYS = (
    "RunningAvgSamplesPerSec",
    "CurrSamplesPerSec",
    "RunningAvgSamplesPerSec" + MICRO_STEP,
    "CurrSamplesPerSec" + MICRO_STEP,
)
#: Prefix of the breakdown values inside a record (their own names collide with ``step``).
BREAKDOWN_PREFIX = "time (ms) "


def newest_record(text: str) -> dict[str, Any] | None:
    """The values of the newest step in ``text`` (see the module docstring), or None."""
    numbered: dict[str, Any] | None = None
    awaiting_breakdown = False
    unnumbered: dict[str, Any] = {}
    overflows: dict[str, Any] = {}
    for line in log_lines(text):
        if match := OVERFLOW.search(line):
            overflows[OVERFLOWS] = overflows.get(OVERFLOWS, 0) + 1
            if match["scale"]:
                overflows[LOSS_SCALE] = float(match["scale"])
            continue
        values, step = _line_values(line)
        kind = _breakdown_kind(values)
        if not values or kind == "micro":
            continue  # micro-step timings describe a fraction of a step
        if step is not None:
            if numbered is None or numbered.get("global_step") != step:
                numbered, awaiting_breakdown = {"global_step": step}, True
            numbered.update(values)
        elif kind == "step":
            if numbered is not None and awaiting_breakdown:
                numbered.update(values)
                awaiting_breakdown = False
            unnumbered.update(values)
        elif kind == "pipe" and numbered is not None:
            numbered.update(values)  # printed right after the pipeline's own step line
        else:
            unnumbered.update(values)
    if numbered is None:
        return {**unnumbered, **overflows} or None
    rates = {k: v for k, v in unnumbered.items() if k in RATE_KEYS and k not in numbered}
    return {**numbered, **rates, **overflows}  # old releases number no throughput line; their newest rate holds


def _line_values(line: str) -> tuple[dict[str, Any], int | None]:
    """The named values of one line and its step number (None: the line has none)."""
    if match := THROUGHPUT.search(line):
        return _rates(match), int(match["step"])
    if match := PROGRESS.search(line):
        return _finite({"lr": match["lr"]}), int(match["step"])
    if match := PIPELINE.search(line):
        values = _finite({"iter time (s)": match["iter"], "samples/sec": match["rate"]})
        return {**_loss(match["loss"]), **values}, int(match["step"])
    if match := THROUGHPUT_OLD.search(line):
        return _rates(match, MICRO_STEP), None
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
