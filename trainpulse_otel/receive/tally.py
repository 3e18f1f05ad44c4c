"""The account of one OTLP request: points accepted, rejected (with why) and ignored (by metric name).

It becomes the answer's ``partial_success`` (rejected points and an error
message) and the daemon's operational counters. Bounded: a request with
millions of unknown metrics or bad points still gives a short message.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..samples import NodeReport

#: Ignored metric names listed by name at most; the rest are counted together under OTHER_METRICS.
MAX_IGNORED_NAMES = 64
OTHER_METRICS = "(other metrics)"
#: Distinct error messages kept for the answer's ``error_message``.
MAX_MESSAGES = 8


@dataclass(frozen=True, slots=True)
class Decoded:
    """What a request said: one report per node it named, and the account of its points."""

    reports: tuple[NodeReport, ...]
    accepted: int = 0
    rejected: int = 0
    ignored: int = 0
    ignored_metrics: Mapping[str, int] = field(default_factory=dict)
    error_message: str = ""


@dataclass
class Tally:
    """Counts kept while a request is decoded."""

    accepted: int = 0
    rejected: int = 0
    ignored: int = 0
    ignored_metrics: dict[str, int] = field(default_factory=dict)
    messages: list[str] = field(default_factory=list)
    unlisted_messages: int = 0

    def accept(self, points: int = 1) -> None:
        self.accepted += points

    def ignore(self, metric: str, points: int = 1) -> None:
        """Points of a metric TrainPulse does not read (or no longer needs): counted, not an error."""
        self.ignored += points
        key = metric if metric in self.ignored_metrics or len(self.ignored_metrics) < MAX_IGNORED_NAMES else None
        key = key if key is not None else OTHER_METRICS
        self.ignored_metrics[key] = self.ignored_metrics.get(key, 0) + points

    def reject(self, message: str, points: int = 1) -> None:
        """Points refused, and why (the message names the metric and the field)."""
        self.rejected += points
        self.note(message)

    def note(self, message: str) -> None:
        """A message for the answer that rejects no point (a resource attribute that could not be used)."""
        if message in self.messages:
            return
        if len(self.messages) < MAX_MESSAGES:
            self.messages.append(message)
        else:
            self.unlisted_messages += 1

    def decoded(self, reports: Sequence[NodeReport]) -> Decoded:
        return Decoded(
            tuple(reports), self.accepted, self.rejected, self.ignored, dict(self.ignored_metrics), self.message()
        )

    def message(self) -> str:
        """The answer's ``error_message``: the messages noted, and how many more there were."""
        more = f"; and {self.unlisted_messages} more" if self.unlisted_messages else ""
        return "; ".join(self.messages) + more
