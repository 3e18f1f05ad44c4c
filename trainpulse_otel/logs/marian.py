"""Marian NMT's training lines (``src/training/scheduler.h``'s display line, every ``--disp-freq`` updates).

``[2021-06-01 07:24:53] Ep. 3 : Up. 15500 : Sen. 165,243 : Cost 4.19193411 * 304,329 @ 617 after 10,741,148 :
Time 178.32s : 1706.66 words/s : L.r. 3.0000e-04`` (v1.10; older releases print ``Cost 6.32`` alone, newer ones
add ``gNorm 0.5123``): ``Up.`` is the update (the step), ``Cost`` the training loss, ``words/s`` the throughput in
target words (read as tokens/s), ``L.r.`` the learning rate, ``gNorm`` the gradient norm. ``Time`` is the time
since the previous display line, so a step's time is it over the updates between the two (none for the first).
``[valid]`` lines are evaluation's. Pure: one stream's lines in, its payloads out.
"""

from __future__ import annotations

import math
import re
from typing import Any

Payload = dict[str, Any]

#: The words every display line holds (the cheap test first).
MARK = " : Up. "
_NUM = r"([-+]?(?:\d[\d,]*\.?\d*(?:[eE][-+]?\d+)?|nan|inf))"
UPDATE = re.compile(r"\bUp\. (\d+)")
COST = re.compile(r"\bCost " + _NUM, re.IGNORECASE)
TIME = re.compile(r"\bTime (\d+(?:\.\d+)?)s\b")
WORDS = re.compile(r"(\d+(?:\.\d+)?) words/s\b")
LEARNING_RATE = re.compile(r"\bL\.r\. " + _NUM)
GRAD_NORM = re.compile(r"\bgNorm " + _NUM, re.IGNORECASE)


class MarianLines:
    """Marian's display lines (see the module), one stream at a time."""

    name = "marian"

    def __init__(self) -> None:
        self._last_update: int | None = None

    def feed(self, text: str, ts: float) -> list[Payload] | None:
        if MARK not in text or (update := UPDATE.search(text)) is None:
            return None
        if "[valid]" in text:
            return []  # evaluation's numbers, not a step
        step = int(update[1])
        payload: Payload = {"global_step": step, "timestamp": ts}
        _put(payload, "loss", COST.search(text), finite=False)
        _put(payload, "learning_rate", LEARNING_RATE.search(text))
        _put(payload, "grad_norm", GRAD_NORM.search(text), finite=False)
        if (words := WORDS.search(text)) is not None:
            payload["tokens_per_sec"] = float(words[1])
        last, self._last_update = self._last_update, step
        took = TIME.search(text)
        if took is not None and last is not None and step > last:
            payload["step_time_ms"] = float(took[1]) * 1000.0 / (step - last)
        return [payload]

    def flush(self) -> list[Payload]:
        return []


def _put(payload: Payload, name: str, match: re.Match[str] | None, finite: bool = True) -> None:
    """The matched number under ``name``: a NaN or infinity only where it may be one (a loss, a norm)."""
    if match is None:
        return
    value = float(match[1].replace(",", ""))
    if (math.isfinite(value) and value >= 0) or (not finite and not math.isfinite(value)):
        payload[name] = value
