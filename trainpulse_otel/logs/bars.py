"""Progress printed without a loss: a tqdm bar's count and rate.

Many trainers print their progress with no loss on the line: tqdm's bar (``45%|████▌     | 45/100
[00:10<00:12,  4.50it/s]``, the Trainer's and Accelerate's scripts). Such a line is a report of its step (the
bar's count, past the epochs its description names) and its step time (the bar's rate): a log of them is read,
and its stamped lines keep the progress clock a stall is judged by. A bar whose description says it is not
training (a download, an evaluation, a dataset's map) is none; a bar of bytes is none; a bar with no rate yet
(``?it/s``) reports nothing. Pure: text in, payloads out.
"""

from __future__ import annotations

import re
from typing import Any

#: tqdm's bar: its description, the percentage and bar, ``N/M``, ``[elapsed<remaining, rate]`` in iterations.
BAR = re.compile(
    r"(?P<desc>[^|]{0,80}?)\s*\d{1,3}%\|[^|]{0,80}\|\s*(?P<n>\d+)/(?P<total>\d+)\s*"
    r"\[[\d:]+<[\d:?]+,\s*(?P<rate>\d+\.?\d*)\s?(?P<unit>it/s|s/it)"
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
    if "%|" not in text:
        return None
    match = BAR.search(text)
    if match is None or NOT_TRAINING.search(match["desc"]) or int(match["n"]) > int(match["total"]):
        return None
    epoch = DESC_EPOCH.search(match["desc"])
    step = int(match["n"]) + (int(epoch[1]) * int(match["total"]) if epoch else 0)
    rate = float(match["rate"])
    if rate <= 0:
        return None
    return {"global_step": step, "step_time_ms": 1000.0 / rate if match["unit"] == "it/s" else rate * 1000.0}
