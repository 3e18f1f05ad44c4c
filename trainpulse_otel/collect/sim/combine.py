"""Several catalogue faults at once: ``-scenario rank_straggler,dataloader_starvation``.

Real jobs rarely fail one way at a time, and a fault one detector sees can
hide another (a straggler's slow steps dilute the data wait's share). So a
combination is one :class:`~.scenarios.Scenario` for the one physical model:
the union of its parts' effects, each pinned to its part's own onset, so the
faults begin as they would alone; the combined onset is the earliest, so
``-onset`` (``Scenario.starting_at``) moves every part by the same amount.

Two parts must not claim the same thing: the same :class:`~.job.JobConfig`
key set to different values, or the same knob on the same GPU (a job-wide
knob is on every GPU), is a ValueError naming both. The one exception is a
load that adds up (:data:`ADDITIVE_KNOBS`): the host's extra CPU from input
workers plus a noisy neighbour's is their sum, written as a chain of effects
that follows the sum exactly (the model applies effects on one knob in
order, each moving the knob from where the previous left it).
:func:`check_scenario` is the start-up check of a ``-scenario`` setting.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from itertools import combinations, pairwise
from typing import Any

from ...config import ConfigError
from .scenarios import GPU_KNOBS, SCENARIOS, Effect, Scenario, get_scenario

#: Job knobs whose level is an extra load over a healthy 0: two parts moving one add up.
ADDITIVE_KNOBS = frozenset({"host_cpu_percent"})


def scenario_named(spec: str) -> Scenario:
    """The scenario ``-scenario`` names: a catalogue name, or several joined by commas, combined."""
    names = [name.strip() for name in spec.split(",")]
    if len(names) == 1:
        return get_scenario(names[0])
    return combine(*(get_scenario(name) for name in names))


def check_scenario(spec: str) -> None:
    """Refuse a ``-scenario`` the simulator cannot run, as a ``scenario`` setting error.

    Settings check its syntax only; the names are checked here, at start-up: a
    :class:`~trainpulse_otel.config.ConfigError` names the first unknown scenario and lists the known
    ones, or says why the named ones cannot run together.
    """
    for name in spec.split(","):
        if name.strip() not in SCENARIOS:
            raise ConfigError("scenario", f"unknown scenario {name.strip()!r}; known: {', '.join(sorted(SCENARIOS))}")
    try:
        scenario_named(spec)
    except ValueError as exc:
        raise ConfigError("scenario", str(exc)) from None


def combine(*scenarios: Scenario) -> Scenario:
    """The scenarios running at once, each from its own onset; a ValueError names two that conflict."""
    parts = tuple(p for s in scenarios for p in (s.parts or (s,)))
    _check_parts(parts)
    return Scenario(
        name=",".join(p.name for p in parts),
        description=" + ".join(p.description for p in parts),
        onset_s=min(p.onset_s for p in parts),
        duration_s=max(p.duration_s for p in parts),
        expected_signals=frozenset().union(*(p.expected_signals for p in parts)),
        allowed_signals=frozenset().union(*(p.allowed_signals for p in parts)),
        expected_cause=None,
        effects=_effects(parts),
        job=_job(parts),
        parts=parts,
        after_kill=any(p.after_kill for p in parts),
    )


def _check_parts(parts: tuple[Scenario, ...]) -> None:
    names = [p.name for p in parts]
    if len(parts) < 2:
        raise ValueError(f"a combination needs two scenarios or more, got {names}")
    for name in {n for n in names if names.count(n) > 1}:
        raise ValueError(f"scenario {name!r} is named twice")
    for part in parts:
        if not part.expected_signals:
            raise ValueError(f"scenario {part.name!r} is no fault to combine")


def _job(parts: tuple[Scenario, ...]) -> dict[str, Any]:
    """The parts' JobConfig overrides merged; one key set differently by two parts is a conflict."""
    merged: dict[str, Any] = {}
    owner: dict[str, str] = {}
    for part in parts:
        for key, value in part.job.items():
            if key in merged and merged[key] != value:
                first = owner[key]
                raise ValueError(
                    f"scenarios {first!r} and {part.name!r} conflict: {first} sets job {key}={merged[key]!r}, "
                    f"{part.name} sets {key}={value!r}"
                )
            merged[key] = value
            owner.setdefault(key, part.name)
    return merged


def _effects(parts: tuple[Scenario, ...]) -> tuple[Effect, ...]:
    """Every part's effects pinned to its own onset; an additive knob two parts move becomes one summed chain."""
    pinned = {p.name: [_pinned(e, p.onset_s) for e in p.effects] for p in parts}
    _check_knobs(pinned)
    shared = sorted(k for k in ADDITIVE_KNOBS if sum(any(e.knob == k for e in es) for es in pinned.values()) > 1)
    kept = tuple(e for es in pinned.values() for e in es if e.knob not in shared)
    return kept + tuple(
        e for knob in shared for e in _summed(knob, [[e for e in es if e.knob == knob] for es in pinned.values()])
    )


def _pinned(effect: Effect, onset_s: float) -> Effect:
    return Effect(effect.knob, effect.level, effect.gpus, effect.start(onset_s), effect.ramp_s)


def _check_knobs(pinned: Mapping[str, list[Effect]]) -> None:
    """A ValueError when two parts move the same knob on the same GPU (additive knobs excepted)."""
    for (a, a_effects), (b, b_effects) in combinations(pinned.items(), 2):
        for x in a_effects:
            for y in b_effects:
                if x.knob == y.knob and x.knob not in ADDITIVE_KNOBS and _overlap(x, y):
                    where = _where(x, y)
                    raise ValueError(f"scenarios {a!r} and {b!r} conflict: both set {x.knob} {where}")


def _overlap(x: Effect, y: Effect) -> bool:
    return x.gpus is None or y.gpus is None or bool(set(x.gpus) & set(y.gpus))


def _where(x: Effect, y: Effect) -> str:
    if x.knob not in GPU_KNOBS:
        return "(a job-wide knob)"
    gpus = sorted(set(x.gpus) & set(y.gpus)) if x.gpus and y.gpus else (x.gpus or y.gpus)
    return f"on GPU {', '.join(map(str, gpus))}" if gpus else "on every GPU"


def _summed(knob: str, chains: list[list[Effect]]) -> list[Effect]:
    """Effects that move ``knob`` along the sum of each part's own trajectory (each from a healthy 0).

    The sum of piecewise-linear ramps is piecewise linear, with corners where
    some part's effect starts or ends: one ramp per piece (and a step where a
    part steps), each starting from where the previous left the knob.
    """
    corners = sorted({t for chain in chains for e in chain for t in (e.start(0.0), e.start(0.0) + e.ramp_s)})
    out: list[Effect] = []
    for t0, t1 in pairwise([*corners, corners[-1]]):
        at = _total(chains, t0, before=False)
        if at != _total(chains, t0, before=True):
            out.append(Effect(knob, at, onset_s=t0))
        if t1 > t0 and _total(chains, t1, before=True) != at:
            out.append(Effect(knob, _total(chains, t1, before=True), onset_s=t0, ramp_s=t1 - t0))
    return out


def _total(chains: Iterable[list[Effect]], t: float, before: bool) -> float:
    """The sum of the parts' levels at ``t`` (``before``: just before ``t``, so a step at ``t`` is not yet taken)."""
    total = 0.0
    for chain in chains:
        value = 0.0
        for e in chain:
            p = _progress_before(e, t) if before else e.progress(t, 0.0)
            value += (e.level - value) * p
        total += value
    return total


def _progress_before(effect: Effect, t: float) -> float:
    elapsed = t - effect.start(0.0)
    if elapsed <= 0:
        return 0.0
    return 1.0 if effect.ramp_s <= 0 else min(1.0, elapsed / effect.ramp_s)
