"""Which actions a tick's transitions call for: matching and the cooldown, purely.

Data in, decisions out, the clock handed in (the tick's frame time, so a
replay decides as the live daemon did). An action is due when a signal it
matches is raised, or escalates to a severity it matches: its ``on.signal``
(or ``*``), its ``on.severity`` — ``warning`` is a threshold, matched by
warning and critical, ``critical`` only by critical — and, when it names one,
the top cause explaining the signal (``on.cause``). It runs once per signal
and subject per ``cooldown``: within it the same signal and subject (a second
raise, an escalation) is decided ``cooldown``. While the diagnosis warms up
(the daemon's virtual-time back-fill, or the warm-up ticks of real
collectors) nothing is due and nothing starts a cooldown: what was raised then
is decided ``warmup``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..config import ConfigError
from ..config.values import Action
from ..diagnose import PipelineResult
from .event import SignalEvent, signal_event

RUN, COOLDOWN, WARMUP = "run", "cooldown", "warmup"


@dataclass(frozen=True)
class Decision:
    """One action for one raised signal: ``run``, or suppressed (``cooldown``, ``warmup``)."""

    index: int
    action: Action
    event: SignalEvent
    verdict: str


class ActionPolicy:
    """The configured actions and when each last ran, per signal and subject."""

    def __init__(self, actions: Sequence[Action]) -> None:
        self.actions = tuple(actions)
        self._last_run: dict[tuple[int, str, str], float] = {}

    def decide(self, result: PipelineResult, now: float, warming: bool = False) -> list[Decision]:
        """The decisions of one tick's result, in the order of its transitions and then of the actions."""
        if not self.actions:
            return []
        diagnosis = result.diagnosis
        decisions = []
        for transition in result.transitions:
            if transition.event != "raised":
                continue
            event = signal_event(transition, diagnosis.signals, diagnosis.root_causes)
            for index, action in enumerate(self.actions):
                if _matches(action, event):
                    decisions.append(Decision(index, action, event, self._verdict(index, event, now, warming)))
        return decisions

    def _verdict(self, index: int, event: SignalEvent, now: float, warming: bool) -> str:
        if warming:
            return WARMUP
        key = (index, event.signal, subject_key(event.subject))
        last = self._last_run.get(key)
        if last is not None and now - last < self.actions[index].cooldown:
            return COOLDOWN
        self._last_run[key] = now
        return RUN


def _matches(action: Action, event: SignalEvent) -> bool:
    if action.signal not in ("*", event.signal) or not action.matches(event.severity):
        return False
    return action.cause is None or (event.cause is not None and event.cause.cause == action.cause)


def subject_key(subject: Any) -> str:
    """A subject as one stable string (the cooldown's key, and the log line's)."""
    return json.dumps(subject, sort_keys=True, separators=(",", ":"), default=str)


def check_actions(actions: Iterable[Action], signals: Iterable[str], causes: Iterable[str]) -> None:
    """Refuse, at start-up, an action waiting for a signal or a cause nothing declares (ConfigError naming it)."""
    signals, causes = frozenset(signals), frozenset(causes)
    for index, action in enumerate(actions):
        if action.signal != "*" and action.signal not in signals:
            raise ConfigError(
                f"actions[{index}].on.signal",
                f"unknown signal {action.signal!r}; known: * or " + ", ".join(sorted(signals)),
            )
        if action.cause is not None and action.cause not in causes:
            raise ConfigError(
                f"actions[{index}].on.cause",
                f"unknown root cause {action.cause!r}; known: " + ", ".join(sorted(causes)),
            )
