"""Read Lightning's and NeMo's console progress, one line at a time (pure text parsing).

The ``TQDMProgressBar`` line, ``Epoch 1:  39%|█████▍   | 4846/12331 [05:59<09:15, 13.47it/s, loss=0.0136,
v_num=1]``, in its forms: speed as ``it/s`` or ``s/it`` (or none, NeMo's ``Epoch 0: : 100%|...``), no total
(``1it [00:04, 4.36s/it, ...]``), the postfix metrics ``loss``, ``train_loss_step``, NeMo's
``reduced_train_loss``, ``global_step``, ``train_step_timing in s``, ``lr``, ``gradient_norm``, ... Lightning
prints floats through tqdm: ``global_step=794.0``, ``5.000``, and ``2e+3`` — three significant digits, so a
step in scientific notation is not exact (:data:`APPROX_STEP`). A bar is redrawn many times per step, several
draws may share one line (carriage returns), and a message may be glued to its end. NeMo 2's
``ProgressPrinter`` prints ``Training epoch 0, iteration 120/149 | lr: 3e-05 | global_step: 120 | ...``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

BAR = re.compile(
    r"Epoch (?P<epoch>\d+):[\s:]*(?:\d+%\|[^|]*\|\s*)?(?P<n>\d+)(?:/(?P<total>\d+))?(?:it)? \[(?P<inner>[^\]]*)\]"
)
RATE = re.compile(r"^\s*(?P<value>\d+\.?\d*)(?P<unit>it/s|s/it)$")
PRINTER = re.compile(r"Training epoch (?P<epoch>\d+), iteration (?P<n>\d+)/(?P<total>\d+) \|(?P<pairs>.*)$")
#: Record keys: where the bar stands (epoch, batch) and its speed.
EPOCH, BATCH, SECONDS_PER_IT = "epoch", "batch", "seconds per it"
#: ``global_step`` printed in scientific notation: rounded to three significant digits.
APPROX_STEP = "global_step (approx)"


def progress_values(line: str) -> Iterator[dict[str, Any]]:
    """Each progress draw on ``line``, in order, as a record (``epoch``, ``batch``, the speed, the postfix)."""
    if "Epoch " in line:
        for match in BAR.finditer(line):
            yield _bar(match)
    elif "Training epoch " in line and (match := PRINTER.search(line)):
        values: dict[str, Any] = {EPOCH: int(match["epoch"]), BATCH: int(match["n"])}
        for pair in match["pairs"].split("|"):
            key, sep, value = pair.partition(":")
            if sep:
                _put(values, key.strip(), value.strip())
        yield values


def _bar(match: re.Match[str]) -> dict[str, Any]:
    values: dict[str, Any] = {EPOCH: int(match["epoch"]), BATCH: int(match["n"])}
    for part in match["inner"].split(",")[1:]:
        if rate := RATE.match(part):
            seconds = float(rate["value"])
            if seconds > 0:
                values[SECONDS_PER_IT] = seconds if rate["unit"] == "s/it" else 1.0 / seconds
            continue
        key, sep, value = part.partition("=")
        if sep:
            _put(values, key.strip(), value.strip())
    return values


def _put(values: dict[str, Any], key: str, text: str) -> None:
    """A postfix value as a number (text kept as text); ``global_step`` exact, or marked approximate."""
    try:
        number = float(text)
    except ValueError:
        values[key] = text
        return
    if key == "global_step":
        values[APPROX_STEP if "e" in text.lower() else key] = number
    else:
        values[key] = number
