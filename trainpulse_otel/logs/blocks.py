"""A training report printed over several lines: a header naming the step, then one indented value a line.

Composer's console logger (MosaicML, llm-foundry): ``[batch=12/500]:`` (``[epoch=1][batch=5/5]:``), then
``\t Train loss/train/total: 1.8421``, ``\t Train throughput/samples_per_sec: 2.7330``, …; OLMo's trainer:
``[step=2/739328]`` (``[step=120/1451,epoch=0]``, ``[step=15000/30000, eta=1 hour]``) at the end of a logger's
line, then ``    train/CrossEntropyLoss=10.73``, ``    throughput/device/tokens_per_second=45,538``. The values
under a header make one report, told when the next header comes or the values end. The training loss is the
``total`` loss (Composer) or the cross-entropy (OLMo), else the one training loss given; a gradient norm, tokens
and samples a second and batches a second (the step time) are read where given. Pure.
"""

from __future__ import annotations

import math
import re

from .keys import Payload, put_field

#: A block's header: Composer's ``[epoch=1][batch=5/5]:``, OLMo's ``… [step=2/739328]`` (with its epoch or ETA).
HEADER = re.compile(
    r"^(?:\d+:)?\s*(?:\[epoch=\d+\])?\[batch=(?P<batch>\d+)/\d+\]:\s*$"
    r"|\[step=(?P<step>\d+)(?:/\d+)?(?:,\s*(?:epoch=\d+|eta=[^\]]*))*\]\s*$"
)
#: One value of a block: indented (after an ``srun -l`` label), ``key: value`` or ``key=value``.
VALUE = re.compile(
    r"^(?:\d+:)?\s+(?:Train )?(?P<key>[A-Za-z][\w/ .()-]*?)(?::\s+|=)"
    r"(?P<num>[-+]?(?:\d{1,3}(?:,\d{3})+|\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf))\s*$",
    re.IGNORECASE,
)
#: Values that are not training's (the evaluation's, a validation's).
NOT_TRAINING = re.compile(r"(?:^|/)(?:eval|val|valid|test)\b", re.IGNORECASE)


class MetricBlockLines:
    """Composer's and OLMo's blocks (see the module docstring), one stream at a time."""

    name = "blocks"

    def __init__(self) -> None:
        self._step: int | None = None  # the header held, its values below
        self._values: dict[str, float] = {}
        self._began = 0.0

    def feed(self, text: str, ts: float) -> list[Payload] | None:
        if "=" in text and "[" in text and (header := HEADER.search(text)) is not None:
            done = self.flush()
            self._step, self._began = int(header["batch"] or header["step"]), ts
            return done
        if self._step is None:
            return None
        if (value := VALUE.match(text)) is not None:
            self._values[value["key"].strip().lower()] = float(value["num"].replace(",", ""))
            return []
        return self.flush() or None  # the block ended: the line is someone else's

    def flush(self) -> list[Payload]:
        step, values, self._step, self._values = self._step, self._values, None, {}
        if step is None or not values:
            return []
        payload: Payload = {"global_step": step, "timestamp": self._began}
        if (loss := _training_loss(values)) is not None:
            payload["loss"] = loss
        for key, value in values.items():
            last = key.rsplit("/", 1)[-1]
            if "grad_norm" in last and "grad_norm" not in payload:
                payload["grad_norm"] = value
            elif last in ("batches_per_sec", "batches_per_second") and value > 0 and "device" not in key:
                payload["step_time_ms"] = 1000.0 / value
            elif not NOT_TRAINING.search(key) and "device" not in key:
                put_field(payload, last, value, "")
        return [payload] if len(payload) > 2 else []


def _training_loss(values: dict[str, float]) -> float | None:
    """The block's training loss: the ``total`` loss, else the cross-entropy, else its only training loss."""
    losses = {k: v for k, v in values.items() if "loss" in k and not NOT_TRAINING.search(k)}
    for key, value in losses.items():
        if key.endswith(("/total", "crossentropyloss")):
            return value
    if len(losses) == 1:
        return next(iter(losses.values()))
    return next((v for k, v in losses.items() if not math.isfinite(v)), None)
