"""MLPerf Training's ``:::MLLOG {…}`` lines (``mlperf_logging.mllog``, every submission since v0.7).

Each line is one JSON record: ``{"namespace": "", "time_ms": 1715111634920, "event_type": "POINT_IN_TIME",
"key": "train_loss", "value": 3.7122, "metadata": {"file": …, "lineno": …, "samples_count": 320}}``. The
records that are training progress: ``train_loss`` (the loss), ``tracked_stats`` (a dict of ``throughput`` in
samples/s and, where given, ``train_step_time`` in seconds) and ``throughput``; ``epoch_stop`` and ``eval_accuracy``
say the step reached (:data:`REACHED_KEYS`). Their step is the metadata's
``step_num`` / ``step`` / ``iteration``, else ``samples_count`` over the ``global_batch_size`` record the log
gave first (the samples themselves where it gave none), else ``epoch_num``. Every other key (the submission's
facts, ``block_start``, …) is claimed and says nothing. The line's time is its ``time_ms``
(:func:`~.lines.split_prefixes` reads it). Pure: one stream's lines in, its payloads out.
"""

from __future__ import annotations

import json
import math
from typing import Any

Payload = dict[str, Any]

#: What begins every record (after any launcher prefix).
MARK = ":::MLLOG "
#: The records that report training progress.
PROGRESS_KEYS = frozenset(("train_loss", "tracked_stats", "throughput"))
#: The records that say only that the run reached a step: an epoch done, an evaluation (its metadata numbers the
#: training it judged). A step alone, the run's progress, where it is past the last and the log prints no training
#: record of its own step (whose units may differ: samples, steps); a ``throughput`` record numbering none is of the
#: last.
REACHED_KEYS = frozenset(("epoch_stop", "eval_accuracy"))
#: Metadata keys that number a step, in the order preferred.
STEP_KEYS = ("step_num", "step", "iteration")


class MLPerfLines:
    """MLPerf's ``:::MLLOG`` records (see the module), one stream at a time."""

    name = "mlperf"

    def __init__(self) -> None:
        self._batch: int | None = None  # the run's global batch size, from its own record
        self._reached: int | None = None  # the last step a record numbered
        self._measured = False  # a training record numbered its own step (the reached ones' units may differ)

    def feed(self, text: str, ts: float) -> list[Payload] | None:
        at = text.find(MARK)
        if at < 0:
            return None
        record = _record(text[at + len(MARK) :])
        if record is None:
            return []  # a record cut short: claimed, nothing read
        key, value = record.get("key"), record.get("value")
        if key == "global_batch_size" and (batch := _count(value)) is not None:
            self._batch = batch
            return []
        meta = record.get("metadata")
        step = self._step(meta if isinstance(meta, dict) else {})
        self._measured = self._measured or (key in PROGRESS_KEYS and step is not None)
        if step is None and key == "throughput":
            step = self._reached
        if (key not in PROGRESS_KEYS and key not in REACHED_KEYS) or step is None:
            return []
        reached, self._reached = self._reached, max(step, self._reached or 0)
        payload: Payload = {"global_step": step, "timestamp": ts}
        if key in REACHED_KEYS:  # (an evaluation of an earlier checkpoint, after the run, reaches nothing)
            return [payload] if not self._measured and (reached is None or step > reached) else []
        if key == "train_loss" and (loss := _number(value)) is not None:
            payload["loss"] = loss
        stats = value if isinstance(value, dict) else {"throughput": value} if key == "throughput" else {}
        if (rate := _number(stats.get("throughput"))) is not None and rate > 0:
            payload["samples_per_sec"] = rate
        if (took := _number(stats.get("train_step_time"))) is not None and took > 0:
            payload["step_time_ms"] = took * 1000.0
        return [payload] if len(payload) > 2 else []

    def _step(self, meta: dict[str, Any]) -> int | None:
        for name in STEP_KEYS:
            if (step := _count(meta.get(name))) is not None:
                return step
        if (samples := _count(meta.get("samples_count"))) is not None:
            return samples // self._batch if self._batch else samples
        return _count(meta.get("epoch_num"))

    def flush(self) -> list[Payload]:
        return []


def _record(text: str) -> dict[str, Any] | None:
    try:
        record = json.loads(text)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def _number(value: Any) -> float | None:
    """A value as a float (NaN and infinities kept: a loss gone non-finite is the job's), None when not a number."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        return float(value)
    except ValueError:
        return None


def _count(value: Any) -> int | None:
    number = _number(value)
    return int(number) if number is not None and math.isfinite(number) and number >= 0 else None
