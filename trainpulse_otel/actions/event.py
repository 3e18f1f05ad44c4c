"""What an action is told about a raised signal: one JSON object, and the same as ``TRAINPULSE_*`` variables.

Pure: a transition, the signal it raised (its evidence) and the diagnosis's root causes in; the object and the
variables out. The host, rank, GPU and pid are read from the signal's subject, then the top cause's subject, then
the evidence (and the first rank it lists as lagging: a stall's stuck rank); several ranks are joined by commas,
and what is not known is empty.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..diagnose import RootCause, Signal, Transition

#: The variables a command gets, and the subject keys (singular, plural) each is read from.
IDENTITY: dict[str, tuple[str, str]] = {
    "hostname": ("hostname", "hostnames"),
    "rank": ("rank", "ranks"),
    "gpu_index": ("gpu_index", "gpu_indices"),
    "pid": ("pid", "pids"),
}


@dataclass(frozen=True)
class SignalEvent:
    """A raised signal as an action sees it."""

    signal: str
    severity: str
    ts: float
    message: str
    subject: Mapping[str, Any] = field(default_factory=dict)
    evidence: Mapping[str, Any] = field(default_factory=dict)
    cause: RootCause | None = None
    identity: Mapping[str, str] = field(default_factory=dict)

    def to_dict(self, action: str) -> dict[str, Any]:
        """The JSON a command reads on its standard input and a webhook receives."""
        return {
            "event": "raised",
            "action": action,
            "signal": self.signal,
            "severity": self.severity,
            "ts": self.ts,
            "message": self.message,
            "subject": dict(self.subject),
            "evidence": dict(self.evidence),
            "cause": self.cause.to_dict() if self.cause is not None else None,
            **{key: self.identity.get(key, "") for key in IDENTITY},
        }

    def environment(self) -> dict[str, str]:
        """``TRAINPULSE_SIGNAL``, ``_SEVERITY``, ``_CAUSE``, ``_HOSTNAME``, ``_RANK``, ``_GPU_INDEX``, ``_PID``."""
        env = {
            "TRAINPULSE_SIGNAL": self.signal,
            "TRAINPULSE_SEVERITY": self.severity,
            "TRAINPULSE_CAUSE": self.cause.cause if self.cause is not None else "",
        }
        env.update({f"TRAINPULSE_{key.upper()}": self.identity.get(key, "") for key in IDENTITY})
        return env


def signal_event(transition: Transition, signals: Sequence[Signal], causes: Sequence[RootCause]) -> SignalEvent:
    """The event of a ``raised`` transition: its signal's evidence from the diagnosis, the top cause explaining it."""
    signal = next(
        (s for s in signals if s.name == transition.signal and dict(s.subject) == dict(transition.subject)), None
    )
    evidence = signal.evidence if signal is not None else {}
    cause = next((c for c in causes if transition.signal in c.signals), None)
    lagging = evidence.get("lagging")
    first = lagging[0] if isinstance(lagging, Sequence) and lagging and isinstance(lagging[0], Mapping) else {}
    places = (transition.subject, cause.subject if cause is not None else {}, evidence, first)
    identity = {key: _value(places, names) for key, names in IDENTITY.items()}
    return SignalEvent(
        transition.signal,
        transition.severity,
        transition.ts,
        transition.message or (signal.message if signal is not None else ""),
        transition.subject,
        evidence,
        cause,
        {key: value for key, value in identity.items() if value},
    )


def _value(places: Sequence[Mapping[str, Any]], names: tuple[str, str]) -> str:
    """The first place's value of a key (singular or plural), as text: a list joined by commas."""
    for place in places:
        for name in names:
            value = place.get(name)
            if isinstance(value, (list, tuple)):
                items = [str(v) for v in value if isinstance(v, (str, int)) and not isinstance(v, bool)]
                if items:
                    return ",".join(items)
            elif isinstance(value, (str, int)) and not isinstance(value, bool) and str(value):
                return str(value)
    return ""
