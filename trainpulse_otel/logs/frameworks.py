"""Iteration lines, framework by framework: each a streaming parser turning its lines into training payloads.

:data:`FRAMEWORKS` names the built-in parsers; a :class:`~.reader.LogReader`
gives each stream a fresh instance (of the framework named, or of the first
that claims one of the stream's lines). A parser's payloads are the contract's
training fields, mapped by the framework's adapter (:mod:`trainpulse_otel.adapters`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..adapters import megatron
from ..adapters.megatron_text import RecordReader


class MegatronLines:
    """Megatron-LM's iteration lines and the timer blocks after them (:mod:`..adapters.megatron_text`)."""

    name = "megatron"

    def __init__(self) -> None:
        self._records = RecordReader()
        self._began = 0.0  # the time of the iteration line held

    def feed(self, text: str, ts: float) -> list[dict[str, Any]] | None:
        before, began = self._records.current, self._began
        claimed, done = self._records.feed(text)
        if not claimed:
            return None
        if self._records.current is not None and self._records.current is not before:
            self._began = ts  # an iteration line: its record is held for the timers after it
        return [] if done is None else [self._payload(done, began)]

    def flush(self) -> list[dict[str, Any]]:
        done = self._records.flush()
        return [] if done is None else [self._payload(done, self._began)]

    @staticmethod
    def _payload(record: dict[str, Any], ts: float) -> dict[str, Any]:
        return {**megatron.translate_record(record, {}).payload, "timestamp": ts}


#: The built-in parsers by framework name (``trainpulse replay -framework NAME``), tried in this order.
FRAMEWORKS: dict[str, Callable[[], Any]] = {"megatron": MegatronLines}
