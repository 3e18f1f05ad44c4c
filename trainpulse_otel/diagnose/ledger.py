"""The wall-time ledger: every second since the first report booked once, as productive or to one cause.

Reports *claim* time — their steps' productive time (steps × the ideal step), their save, their losses
by cause — and the ledger books the claims against the wall time that has passed, in the order given
(the most certain first: a stall's or a save's measured time before productive time, the step budget's
residual ``compute`` last). A claim never books more than the wall time there is: what no wall time is
left for waits (``pending``) for wall time a later report leaves over — a report's steps may have begun
before the previous report — and wall time no claim takes waits (``open``) for a later report's claims;
each waits at most ``carry_s`` (a couple of steps: the jitter between when steps end and when reports
are sent), beyond which a claim is dropped (it overlaps time already booked: a save also counted in a
step's time) and wall time is booked ``unattributed``. So, by construction::

    productive_s + open_s + sum(booked.values()) == wall_s    # booked includes "unattributed"

and no second is booked twice. Every booked figure only grows. Pure: the clock is the caller's.
The rules and their reasons: docs/goodput.md.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from .saved import NUMBER, is_row

#: The key of a claim of productive time (not a cause).
PRODUCTIVE = "productive"
UNATTRIBUTED = "unattributed"


class WallLedger:
    """Books claims of time against the wall time since the first :meth:`advance`."""

    def __init__(self) -> None:
        self.start: float | None = None
        self.frontier: float | None = None  # the wall time is booked (or open) up to here
        self.productive_s = 0.0
        self.booked: dict[str, float] = {}  # seconds by cause, with UNATTRIBUTED
        self.dropped_s = 0.0  # claims beyond the wall time (time they would have counted twice)
        self.open_s = 0.0  # wall time before the frontier no claim has taken yet (at most ``carry_s``)
        self._pending: list[list] = []  # [key, seconds] claims waiting for wall time, oldest first

    @property
    def wall_s(self) -> float:
        """The wall time from the first advance to the frontier."""
        return 0.0 if self.start is None or self.frontier is None else self.frontier - self.start

    def advance(self, ts: float, claims: Iterable[tuple[str, float]], carry_s: float | None) -> None:
        """Wall time up to ``ts``, and ``claims`` (key, seconds) on it; ``carry_s``: how much open time and
        pending claims may wait (None: no limit yet — the ideal step is not known)."""
        if self.frontier is None:
            self.start = self.frontier = ts
        available = self.open_s + max(0.0, ts - self.frontier)
        self.frontier = max(self.frontier, ts)
        queue = self._pending + [[key, s] for key, s in claims if s > 0]
        self._pending = []
        for i, claim in enumerate(queue):
            take = min(available, claim[1])
            if take > 0:
                self._book(claim[0], take)
                available -= take
                claim[1] -= take
            if claim[1] > 0:
                self._pending = [c for c in queue[i:] if c[1] > 0]
                break
        self.open_s = available
        if carry_s is not None:
            self._trim(carry_s)

    def book_now(self, ts: float, key: str) -> float:
        """The wall time from the frontier to ``ts`` to ``key`` at once (a stall, counted as it passes); its
        seconds."""
        if self.frontier is None or ts <= self.frontier:
            return 0.0
        seconds = ts - self.frontier
        self._book(key, seconds)
        self.frontier = ts
        return seconds

    def book_open(self, key: str) -> float:
        """The open time — wall time no claim has taken — to ``key`` at once; its seconds."""
        seconds, self.open_s = self.open_s, 0.0
        if seconds > 0:
            self._book(key, seconds)
        return seconds

    def rebook(self, key: str, seconds: float, to: str) -> float:
        """Move up to ``seconds`` booked to ``key`` (:data:`PRODUCTIVE` for productive time) to ``to``, as far as
        ``key`` holds them; the seconds moved. The wall time and the sum stay what they were."""
        held = self.productive_s if key == PRODUCTIVE else self.booked.get(key, 0.0)
        moved = max(0.0, min(seconds, held))
        if moved <= 0:
            return 0.0
        if key == PRODUCTIVE:
            self.productive_s -= moved
        elif held - moved > 1e-9:
            self.booked[key] = held - moved
        else:
            del self.booked[key]  # all of it moved
        self._book(to, moved)
        return moved

    def to_state(self) -> dict[str, Any]:
        """The ledger's figures as plain data, with the claims still waiting for wall time."""
        return {
            "start": self.start,
            "frontier": self.frontier,
            "productive_s": self.productive_s,
            "booked": dict(self.booked),
            "dropped_s": self.dropped_s,
            "open_s": self.open_s,
            "pending": [list(claim) for claim in self._pending],
        }

    def restore(self, state: Any) -> None:
        """Continue the figures :meth:`to_state` saved; ValueError (nothing changed) when it does not hold them."""
        if not isinstance(state, dict):
            raise ValueError("the goodput ledger is not an object")
        numbers = [state.get(k) for k in ("start", "frontier", "productive_s", "dropped_s", "open_s")]
        booked, pending = state.get("booked"), state.get("pending", [])
        if not all(_number(n) for n in numbers) or not isinstance(booked, dict):
            raise ValueError("the goodput ledger's figures are missing or not numbers")
        if not isinstance(pending, list) or not all(_claim(c) for c in pending):
            raise ValueError("the goodput ledger's pending claims are not [key, seconds] pairs")
        if not all(isinstance(k, str) and _number(v) and v >= 0 for k, v in booked.items()):
            raise ValueError("the goodput ledger's badput is not seconds by cause")
        start, frontier, productive, dropped, open_s = (float(n) for n in numbers)
        if frontier < start or min(productive, dropped, open_s) < 0:
            raise ValueError("the goodput ledger's figures do not add up")
        self.start, self.frontier, self.productive_s = start, frontier, productive
        self.booked = {k: float(v) for k, v in booked.items()}
        self.dropped_s, self.open_s = dropped, open_s
        self._pending = [[key, float(seconds)] for key, seconds in pending]

    def _book(self, key: str, seconds: float) -> None:
        if key == PRODUCTIVE:
            self.productive_s += seconds
        else:
            self.booked[key] = self.booked.get(key, 0.0) + seconds

    def _trim(self, carry_s: float) -> None:
        """Open time beyond ``carry_s`` is unattributed; pending claims beyond it are dropped, newest first."""
        if self.open_s > carry_s:
            self._book(UNATTRIBUTED, self.open_s - carry_s)
            self.open_s = carry_s
        excess = sum(c[1] for c in self._pending) - carry_s
        while excess > 0 and self._pending:
            last = self._pending[-1]
            cut = min(last[1], excess)
            last[1] -= cut
            excess -= cut
            self.dropped_s += cut
            if last[1] <= 0:
                self._pending.pop()


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _claim(value: Any) -> bool:
    return is_row(value, str, NUMBER) and _number(value[1])
