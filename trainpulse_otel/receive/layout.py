"""A node's export layout, planned: its values checked and assembled into the node's samples in a few calls.

A node daemon sends the same metrics over the same attribute sets every
export (:mod:`.attributes` recognises the layout by its zeroed bytes). When
every metric of a layout can be kept whole — its attribute sets sound, each
series once, no delta to total up, every point with a recorded value — what
is left to do for each export depends only on its values: one check per value
rule (least, greatest and a NaN over all the values the rule governs, in C
loops) and the frame's assembly planned ahead
(:class:`~trainpulse_otel.telemetry.assembly.AssemblyPlan`). That is the same
outcome as checking and keeping each metric on its own (``OwnInstruments``
falls back to that whenever a value fails its check), for a fraction of the
calls: a 64-node job's receiver takes 64 such exports every second.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain
from typing import TYPE_CHECKING

from ..telemetry.assembly import AssemblyPlan, FrameAssembler, Taker, taker
from .attributes import zero_cases

if TYPE_CHECKING:
    from .own import MetricPlan
    from .readings import Reading

#: What a metric's values were taken as (:func:`~.attributes.take_values`): its values, and its points' times.
Taken = tuple[list[float | int | None], list[int]]


@dataclass(frozen=True, slots=True)
class PlannedLayout:
    """A layout whose every metric is kept whole: where its values are checked and what they assemble into.

    ``kept`` are the positions (in the scope) of the metrics kept, their
    values one after another in that order; ``zeros`` each of those values'
    zero by its case (see :meth:`~.attributes.MetricSets.values_of`);
    ``checks`` one check per value rule, with the values it governs;
    ``ignored`` the positions and names of the metrics that are no input.
    """

    assembly: AssemblyPlan
    kept: tuple[int, ...]
    zeros: tuple[type[float] | int | None, ...]
    checks: tuple[tuple[Reading, type | None, Taker], ...]
    ignored: tuple[tuple[int, str], ...]

    def values(self, taken: Sequence[Taken]) -> list[float | int] | None:
        """The kept metrics' values, one after another, as read (a zero in its case); None when one fails its
        rule's check (a NaN, out of bounds, the wrong type): then each metric is judged on its own."""
        values = zero_cases(list(chain.from_iterable(taken[i][0] for i in self.kept)), self.zeros)  # type: ignore[arg-type]
        for reading, value_type, take in self.checks:
            if not reading.fit(take(values), value_type):  # type: ignore[arg-type]
                return None
        return values  # type: ignore[return-value]


def planned_layout(hostname: str, names: Sequence[str], plans: Sequence[MetricPlan | None]) -> PlannedLayout | None:
    """The plan of a scope whose metrics are ``names`` read by ``plans`` (None: not an input), or None when some
    metric cannot be kept whole (then every export of the layout is read metric by metric)."""
    kept = [i for i, plan in enumerate(plans) if plan is not None]
    kept_plans = [plan for plan in plans if plan is not None]
    if len({names[i] for i in kept}) < len(kept) or not all(map(_whole, kept_plans)):
        return None
    checks: dict[tuple[int, float, type | None], tuple[Reading, list[int]]] = {}
    zeros: list[type[float] | int | None] = []
    for plan in kept_plans:
        sets, reading = plan.sets, plan.reading
        first = len(zeros)
        zeros.extend(sets.zeros)
        if reading.rule is not None and sets.attributes:
            # one check for every metric of the same rule, scale and value type: fit() over all their values
            # at once passes exactly when it passes over each metric's
            group = checks.setdefault((id(reading.rule), reading.scale, sets.value_type), (reading, []))
            group[1].extend(range(first, len(zeros)))
    points = [(p.reading.spec.suffix, p.sets.attributes, p.sets.value_type) for p in kept_plans]
    return PlannedLayout(
        FrameAssembler.plan(hostname, points),
        tuple(kept),
        tuple(zeros),
        tuple((reading, value_type, taker(positions)) for (_, _, value_type), (reading, positions) in checks.items()),
        tuple((i, names[i]) for i, plan in enumerate(plans) if plan is None),
    )


def _whole(plan: MetricPlan) -> bool:
    """Whether a metric's every point is kept as read, whatever its values (they pass their check)."""
    sets = plan.sets
    return (
        sets.clean
        and sets.distinct
        and sets.recorded is None
        and not plan.delta
        and not (plan.reading.relayed and sets.hostnames)
    )
