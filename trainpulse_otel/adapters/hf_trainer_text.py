"""Read the Hugging Face ``Trainer``'s console dicts, one line at a time (pure text parsing).

``ProgressCallback.on_log`` (and ``PrinterCallback``) print each log as a Python dict, not JSON:
``{'loss': 2.0491, 'grad_norm': nan, 'learning_rate': 0.000196, 'epoch': 0.28}``, a bare ``nan`` or
``inf`` for a diverged value; transformers 5 prints every float as a string formatted ``{:.4g}``
(``{'loss': '2.163', 'grad_norm': 'nan', 'epoch': '0.3556'}``). The dict may follow a tqdm bar on the same
line, or a viewer's line number. :func:`dict_values` reads one such dict; :func:`is_progress_bar` tells the
Trainer's own tqdm lines (``14%|█▍   | 380/2724 [14:02:33<86:01:24, 132.12s/it]``) apart.
"""

from __future__ import annotations

import re
from typing import Any

PAIR = re.compile(r"'(?P<key>[^']+)':\s*(?:'(?P<quoted>[^']*)'|(?P<bare>[^,}]+))")
#: A Trainer log holds one of these (the training, end-of-train and evaluation logs all carry ``epoch``).
TRAINER_KEYS = ("'epoch'", "'learning_rate'", "'train_runtime'")
#: Keys of evaluation and prediction logs, which describe no training step.
NOT_TRAINING = ("eval_", "test_", "predict_")
BAR = re.compile(r"\d+/\d+ \[[\d:]+<[\d:?]+,\s+[\d.?]+(?:it/s|s/it)")


def dict_values(line: str) -> dict[str, Any] | None:
    """The keys and values of the Trainer log dict on ``line`` (numbers as floats, NaN and infinities
    included; other strings kept as text), or None: no Trainer dict, or one cut off before its ``}``."""
    start = line.find("{'")
    if start < 0 or not any(key in line for key in TRAINER_KEYS):
        return None
    end = line.find("}", start)
    if end < 0:
        return None
    values: dict[str, Any] = {}
    for match in PAIR.finditer(line, start + 1, end):
        text = match["quoted"] if match["quoted"] is not None else match["bare"].strip()
        try:
            values[match["key"]] = float(text)
        except ValueError:
            values[match["key"]] = text
    return values or None


def is_training(values: dict[str, Any]) -> bool:
    """Whether a log describes training (not only evaluation or prediction metrics and the epoch)."""
    return any(not key.startswith(NOT_TRAINING) and key not in ("epoch", "step") for key in values)


def is_progress_bar(line: str) -> bool:
    """Whether ``line`` is (or holds) a tqdm progress bar."""
    return ("it/s" in line or "s/it" in line) and BAR.search(line) is not None
