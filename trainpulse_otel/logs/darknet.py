"""Darknet's training lines (pjreddie's ``detector.c`` and AlexeyAB's fork, YOLOv2–v4), one per batch.

`` 4259: 0.034688, 0.045240 avg loss, 0.001000 rate, 0.923000 seconds, 272576 images, 1.23 hours left``: the
iteration, its loss, the running average of the losses (``avg`` alone in pjreddie's), the learning rate, the batch's
seconds and the images seen. The average is the loss reported (the batch's own swings with its images); a NaN in
either is a non-finite loss (``-nan, -nan avg loss``). Pure: one stream's lines in, its payloads out.
"""

from __future__ import annotations

import math
import re
from typing import Any

Payload = dict[str, Any]

_NUM = r"([-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|nan|inf))"
#: The line, from its iteration to its images.
LINE = re.compile(
    rf"^\s*(\d+): {_NUM}, {_NUM} avg(?: loss)?, {_NUM} rate, (\d+(?:\.\d+)?) seconds, (\d+) images\b", re.IGNORECASE
)


class DarknetLines:
    """Darknet's per-batch lines (see the module)."""

    name = "darknet"

    def feed(self, text: str, ts: float) -> list[Payload] | None:
        if " avg" not in text or (line := LINE.match(text)) is None:
            return None
        batch_loss, average = float(line[2]), float(line[3])
        payload: Payload = {
            "global_step": int(line[1]),
            "timestamp": ts,
            "loss": batch_loss if not math.isfinite(batch_loss) else average,
            "step_time_ms": float(line[5]) * 1000.0,
        }
        rate = float(line[4])
        if math.isfinite(rate) and rate >= 0:
            payload["learning_rate"] = rate
        return [payload]

    def flush(self) -> list[Payload]:
        return []
