"""What a reader has read: its lines, and what they became (reports, events, lines no reader knew)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass
class ReadStats:
    """What a reader has read: lines, and what they became.

    Beyond the counts: reports by the parser that read them (``parsers``), events by kind (``kinds``), how
    each report's time was known (``timed_by``: ``stamp``, ``step_time``, ``line_order``), what the reports
    carried (finite and non-finite losses, step times, throughput), bad values dropped from reports
    (``invalid_fields``) and lines a terminal's wrap had cut, read with the line that ends them (``joined``)."""

    lines: int = 0
    reports: int = 0
    events: int = 0
    unknown: int = 0
    invalid: int = 0
    repeated: int = 0
    invalid_fields: int = 0
    joined: int = 0
    parsers: Counter[str] = field(default_factory=Counter)
    kinds: Counter[str] = field(default_factory=Counter)
    timed_by: Counter[str] = field(default_factory=Counter)
    losses: int = 0
    nonfinite: int = 0
    step_times: int = 0
    throughput: int = 0
    ranks: set[int] = field(default_factory=set)

    def copy(self) -> ReadStats:
        return ReadStats(self.lines, self.reports, self.events, self.unknown, self.invalid, self.repeated)
