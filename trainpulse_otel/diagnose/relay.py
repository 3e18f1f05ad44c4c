"""Judge locally, correlate globally: the signals judging nodes' daemons raised, as findings of the job's diagnosis.

A node whose daemon sends its verdict (:class:`~trainpulse_otel.samples.NodeSample` ``signals``) judges its
own GPUs and host; the job daemon holds none of their samples in its frame, and takes the node's active
signals of those layers (:data:`RELAYED_LAYERS`) as its own, subject naming the node's ``hostname``. They then
weigh in the job's health and feed correlation like any other: a rank straggling on a GPU its node says
overheats is that GPU's thermal throttling. Signals of the job's own layers (ranks, training, the job) are
the job daemon's to judge from the ranks it receives, never taken from a node. The node already held each
signal through its own hysteresis, so one sighting raises it and it clears once the node stops naming it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..samples import NodeSample
from .spec import GPU, HOST
from .types import Finding, Policy

#: The layers a judging node's daemon judges for the job: what its GPUs and host show.
RELAYED_LAYERS = frozenset({GPU, HOST})
#: Raised on one sighting (the node's daemon already held it), cleared a tick after the node stops naming it;
#: a silent node's last verdict stays (its last state stays visible; ``node_unreachable`` says it is silent).
RELAY_POLICY = Policy(raise_evidence=1.0, min_observations=1, hold=0.75, clear_after_s=1.0, stale_after_s=3600.0)
#: A relayed finding's score: at the raise level, whatever its severity (the node's daemon already judged how far
#: past it the signal is; the severity travels as the node said it).
SIGHTED = 1.0


def relayed_findings(nodes: Iterable[NodeSample], layer_of: Mapping[str, str]) -> list[Finding]:
    """The findings the judging ``nodes`` send of the signals ``layer_of`` (signal name → layer) has in a relayed
    layer; a signal the job daemon does not know is passed over."""
    out = []
    for node in nodes:
        for signal in node.signals or ():
            if layer_of.get(signal.name) not in RELAYED_LAYERS:
                continue
            where = ", ".join(f"{k} {v}" for k, v in signal.subject.items() if k != "hostname")
            out.append(
                Finding(
                    signal.name,
                    SIGHTED,
                    signal.severity,
                    f"{node.hostname}'s daemon raised {signal.name}" + (f" ({where})" if where else ""),
                    signal.subject,
                    {"judged_by": node.hostname},
                )
            )
    return out
