"""The diagnostic stage's vocabulary: what detectors find, and what the diagnosis says.

- :class:`Finding` and :class:`Policy` — what a detector says about one tick,
  and how the shared state machine (:mod:`.tracker`) turns findings into
  raised and cleared signals: persistence before a raise, Schmitt-trigger
  hysteresis and a hold-down before a clear. Keeping that in one place is what
  makes every signal behave alike and keeps the detectors small.
- :class:`Signal`, :class:`RootCause`, :class:`Health`, :class:`Diagnosis`,
  :class:`Transition` — the diagnosis. These are the only diagnostic types
  front ends (API, dashboard, publishers) import; their ``to_dict`` forms are
  the contract's diagnosis shape.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..samples import SampleError, type_name

WARNING = "warning"
CRITICAL = "critical"
SEVERITIES: tuple[str, ...] = (WARNING, CRITICAL)

HEALTHY = "healthy"
DEGRADED = "degraded"
STATUS_CRITICAL = "critical"


@dataclass(frozen=True)
class Signal:
    """An active signal: something measurably wrong, with its evidence."""

    name: str
    severity: str
    since: float
    message: str
    subject: Mapping[str, Any] = field(default_factory=dict)
    evidence: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "severity": self.severity,
            "since": self.since,
            "message": self.message,
            "subject": dict(self.subject),
            "evidence": dict(self.evidence),
        }

    @classmethod
    def from_dict(cls, data: Any, where: str = "signal") -> Signal:
        """A signal read back from its ``to_dict`` form (a daemon's JSON); unknown keys are ignored."""
        data = _object(data, where)
        return cls(
            name=_field(data, "name", str, where),
            severity=_field(data, "severity", str, where),
            since=_field(data, "since", float, where),
            message=_field(data, "message", str, where),
            subject=_field(data, "subject", Mapping, where, {}),
            evidence=_field(data, "evidence", Mapping, where, {}),
        )


@dataclass(frozen=True)
class RootCause:
    """A ranked explanation of the active signals, with what to do about it."""

    cause: str
    confidence: float
    summary: str
    signals: tuple[str, ...] = ()
    subject: Mapping[str, Any] = field(default_factory=dict)
    remediation: str = ""
    #: What the cause found beyond its signals' evidence (``rank_hang``'s ``stacks``); left out when empty.
    evidence: Mapping[str, Any] = field(default_factory=dict)

    def share(self) -> str:
        """The confidence as people read it: a percentage, and for a cause a deeper one explains, which one
        (``0% — explained by gpu_thermal_throttling``: it adds no lost time of its own)."""
        by = self.evidence.get("explained_by")
        return f"{self.confidence:.0%}" + (f" — explained by {', '.join(by)}" if by else "")

    def to_dict(self) -> dict[str, Any]:
        out = {
            "cause": self.cause,
            "confidence": round(self.confidence, 3),
            "summary": self.summary,
            "signals": list(self.signals),
            "subject": dict(self.subject),
            "remediation": self.remediation,
        }
        if self.evidence:
            out["evidence"] = dict(self.evidence)
        return out

    @classmethod
    def from_dict(cls, data: Any, where: str = "root_cause") -> RootCause:
        """A root cause read back from its ``to_dict`` form; unknown keys are ignored."""
        data = _object(data, where)
        names = _field(data, "signals", list, where, [])
        return cls(
            cause=_field(data, "cause", str, where),
            confidence=_field(data, "confidence", float, where),
            summary=_field(data, "summary", str, where),
            signals=tuple(_item(name, str, f"{where}.signals[{i}]") for i, name in enumerate(names)),
            subject=_field(data, "subject", Mapping, where, {}),
            remediation=_field(data, "remediation", str, where, ""),
            evidence=_field(data, "evidence", Mapping, where, {}),
        )


@dataclass(frozen=True)
class Health:
    """The 0-100 health score and its status."""

    score: float = 100.0
    status: str = HEALTHY

    def to_dict(self) -> dict[str, Any]:
        return {"score": round(self.score, 1), "status": self.status}

    @classmethod
    def from_dict(cls, data: Any, where: str = "health") -> Health:
        """The health read back; both fields are required (a missing score must not read as 100)."""
        data = _object(data, where)
        return cls(score=_field(data, "score", float, where), status=_field(data, "status", str, where))


@dataclass(frozen=True)
class RankLoss:
    """One rank's recent step budget (ms per step): what its own lateness costs, and what it waited for others.

    ``lost_ms`` holds the rank's own components (``compute``, ``data``), ``lost_ms_per_step`` their sum: the
    rank reaches the collective that much later than the ideal step has it, and every other rank waits for
    that. ``waited_ms_per_step`` is its own wait for slower peers: their cost, so not in the sum.
    """

    rank: int
    lost_ms_per_step: float
    lost_ms: Mapping[str, float] = field(default_factory=dict)
    waited_ms_per_step: float = 0.0
    hostname: str | None = None
    gpu_index: int | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"rank": self.rank}
        if self.hostname is not None:
            out["hostname"] = self.hostname
        if self.gpu_index is not None:
            out["gpu_index"] = self.gpu_index
        out.update(
            lost_ms_per_step=round(self.lost_ms_per_step, 3),
            lost_ms={component: round(ms, 3) for component, ms in self.lost_ms.items()},
            waited_ms_per_step=round(self.waited_ms_per_step, 3),
        )
        return out

    @classmethod
    def from_dict(cls, data: Any, where: str = "rank") -> RankLoss:
        data = _object(data, where)
        lost = _field(data, "lost_ms", Mapping, where, {})
        return cls(
            rank=_field(data, "rank", int, where),
            lost_ms_per_step=_field(data, "lost_ms_per_step", float, where),
            lost_ms={k: _item(v, float, f"{where}.lost_ms.{k}") for k, v in lost.items()},
            waited_ms_per_step=_field(data, "waited_ms_per_step", float, where, 0.0),
            hostname=_field(data, "hostname", str, where, None),
            gpu_index=_field(data, "gpu_index", int, where, None),
        )


@dataclass(frozen=True)
class Goodput:
    """The contract's ``goodput`` block: productive time over wall time, and the seconds lost by cause.

    ``ranks`` (TrainPulse's addition): the few ranks whose own lateness costs the job the most, worst first.
    ``wall_s`` (TrainPulse's addition): the wall time ``ratio`` and ``badput_s`` are over, from the first
    report to the last instant accounted for, so that ``sum(badput_s) == (1 - ratio) * wall_s`` (None: not
    given, as from an older daemon).
    """

    ratio: float
    window_ratio: float
    ideal_step_time_ms: float
    badput_s: Mapping[str, float] = field(default_factory=dict)
    ranks: tuple[RankLoss, ...] = ()
    wall_s: float | None = None
    #: The job's whole life across restarts (the contract's ``job`` block, :mod:`.joblife.life`); None: not given.
    job: Mapping[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {
            "ratio": round(self.ratio, 4),
            "window_ratio": round(self.window_ratio, 4),
            "ideal_step_time_ms": round(self.ideal_step_time_ms, 3),
            "badput_s": {cause: round(s, 3) for cause, s in self.badput_s.items()},
            "ranks": [r.to_dict() for r in self.ranks],
        }
        if self.wall_s is not None:
            out["wall_s"] = round(self.wall_s, 3)
        if self.job is not None:
            out["job"] = dict(self.job)
        return out

    @classmethod
    def from_dict(cls, data: Any, where: str = "goodput") -> Goodput:
        data = _object(data, where)
        badput = _object(data.get("badput_s", {}), f"{where}.badput_s")
        ranks = _field(data, "ranks", list, where, [])  # absent from a daemon older than the field
        return cls(
            ratio=_field(data, "ratio", float, where),
            window_ratio=_field(data, "window_ratio", float, where),
            ideal_step_time_ms=_field(data, "ideal_step_time_ms", float, where),
            badput_s={k: _item(v, float, f"{where}.badput_s.{k}") for k, v in badput.items()},
            ranks=tuple(RankLoss.from_dict(r, f"{where}.ranks[{i}]") for i, r in enumerate(ranks)),
            wall_s=_field(data, "wall_s", float, where, None),  # absent from a daemon older than the field
            job=_field(data, "job", Mapping, where, None),  # absent from a daemon older than the field
        )


@dataclass(frozen=True, slots=True)
class NodeRisk:
    """One component's risk of interrupting the job (:mod:`.risk`): ``hostname`` (None: this daemon's node),
    ``component`` (``gpu3``, ``mlx5_0/1`` or ``node``), ``risk`` in [0, 1], the evidence that raised it in words."""

    hostname: str | None
    component: str
    risk: float
    evidence: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"component": self.component, "risk": round(self.risk, 3), "evidence": [*self.evidence]}
        return out | ({"hostname": self.hostname} if self.hostname is not None else {})

    @classmethod
    def from_dict(cls, data: Any, where: str = "node_risk") -> NodeRisk:
        """A risk read back from its ``to_dict`` form; unknown keys are ignored."""
        data = _object(data, where)
        return cls(
            hostname=_field(data, "hostname", str, where, None),
            component=_field(data, "component", str, where),
            risk=_field(data, "risk", float, where),
            evidence=tuple(str(e) for e in _field(data, "evidence", list, where, [])),
        )


@dataclass(frozen=True)
class Diagnosis:
    """Health, active signals, ranked root causes and goodput at one instant (goodput None until known)."""

    ts: float = 0.0
    health: Health = Health()
    signals: tuple[Signal, ...] = ()
    root_causes: tuple[RootCause, ...] = ()
    goodput: Goodput | None = None
    #: Each component's and node's risk of interrupting the job, riskiest first (:mod:`.risk`); empty: none shows any.
    node_risk: tuple[NodeRisk, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out = {
            "health": self.health.to_dict(),
            "signals": [s.to_dict() for s in self.signals],
            "root_causes": [c.to_dict() for c in self.root_causes],
            "goodput": self.goodput.to_dict() if self.goodput is not None else None,
        }
        return out | ({"node_risk": [r.to_dict() for r in self.node_risk]} if self.node_risk else {})

    @classmethod
    def from_dict(cls, data: Any, where: str = "diagnosis", ts: float = 0.0) -> Diagnosis:
        """A diagnosis read back from its ``to_dict`` form (inside a daemon's snapshot).

        The JSON carries no time of its own: ``ts`` is the snapshot's timestamp,
        which is the frame the pipeline diagnosed. Unknown keys are ignored, so a
        newer daemon still reads; a malformed part raises :class:`SampleError`
        naming it (``diagnosis.signals[2].since``).
        """
        data = _object(data, where)
        signals = _field(data, "signals", list, where, [])
        causes = _field(data, "root_causes", list, where, [])
        goodput = data.get("goodput")
        risks = _field(data, "node_risk", list, where, [])
        return cls(
            ts=ts,
            health=Health.from_dict(data.get("health"), f"{where}.health"),
            signals=tuple(Signal.from_dict(s, f"{where}.signals[{i}]") for i, s in enumerate(signals)),
            root_causes=tuple(RootCause.from_dict(c, f"{where}.root_causes[{i}]") for i, c in enumerate(causes)),
            goodput=None if goodput is None else Goodput.from_dict(goodput, f"{where}.goodput"),
            node_risk=tuple(NodeRisk.from_dict(r, f"{where}.node_risk[{i}]") for i, r in enumerate(risks)),
        )


_REQUIRED: Any = object()
_KINDS = {str: "a string", float: "a number", int: "an integer", Mapping: "an object", list: "an array"}


def _object(data: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(data, Mapping):
        raise SampleError(where, f"must be an object, got {type_name(data)}")
    return data


def _item(value: Any, kind: type, where: str) -> Any:
    """``value`` if it is of ``kind`` (a JSON number for ``float``, as a float), else a SampleError at ``where``."""
    accepted = (int, float) if kind is float else kind
    if isinstance(value, bool) or not isinstance(value, accepted):
        raise SampleError(where, f"must be {_KINDS[kind]}, got {type_name(value)}")
    return float(value) if kind is float else value


def _field(data: Mapping[str, Any], key: str, kind: type, where: str, default: Any = _REQUIRED) -> Any:
    """``data[key]`` checked as :func:`_item`; absent or null is ``default``, or an error when there is none."""
    value = data.get(key)
    if value is None:
        if default is _REQUIRED:
            raise SampleError(f"{where}.{key}", "is required")
        return default
    return _item(value, kind, f"{where}.{key}")


@dataclass(frozen=True)
class Transition:
    """A signal raised or cleared: one entry of the timeline and one OTel event."""

    ts: float
    event: str  # "raised" | "cleared"
    signal: str
    severity: str
    subject: Mapping[str, Any] = field(default_factory=dict)
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "ts": self.ts,
            "event": self.event,
            "signal": self.signal,
            "severity": self.severity,
            "subject": dict(self.subject),
        }


@dataclass(frozen=True, slots=True)
class Policy:
    """How findings of one signal become a raised or cleared signal.

    ``raise_evidence``: a pending signal is raised once the sum of
    ``min(score, 3)`` over consecutive observations with ``score >= 1``
    reaches this, and there were at least ``min_observations`` of them — so a
    marginal fault needs three observations, a clear one (score 1.25) two,
    and a single noisy one never suffices. ``hold``: an active signal stays active while
    its score is at least this (below 1: hysteresis). ``clear_after_s``: it
    clears after its score stayed below ``hold`` this long (hold-down, no
    flapping). ``stale_after_s``: a subject its detector has not judged for
    this long is cleared (the GPU vanished, the job stopped reporting).
    """

    raise_evidence: float = 2.5
    min_observations: int = 2
    hold: float = 0.75
    clear_after_s: float = 20.0
    stale_after_s: float = 180.0


DEFAULT_POLICY = Policy()


@dataclass(frozen=True, slots=True)
class Finding:
    """One detector's judgement of one signal on one subject, at one tick.

    ``score`` is the detector's statistic scaled to its raise threshold:
    ``>= 1`` means the raise condition holds (2 means twice as far past it),
    ``policy.hold <= score < 1`` is enough to keep an active signal. Detectors
    leave out subjects scoring below about half the hold level: a subject the
    detector judged and did not mention counts as score 0.
    """

    signal: str
    score: float
    severity: str = WARNING
    message: str = ""
    subject: Mapping[str, Any] = field(default_factory=dict)
    evidence: Mapping[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> tuple:
        """What the state machine keys on: the signal and its subject."""
        return (self.signal, *self.subject.items())
