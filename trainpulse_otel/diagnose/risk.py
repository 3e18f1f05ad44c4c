"""``node_risk``: how likely a GPU, an InfiniBand port and their node are to interrupt the job, in [0, 1].

A score, apart from the signals that decide: each piece of evidence a
component shows — its link degrading, its memory wearing, a fatal XID it had,
its temperature forecast to throttle — weighs what the field reports of how
often such evidence precedes a failure (:data:`EVIDENCE`), and the pieces
combine as independent chances, ``1 - Π(1 - w)``: one strong sign is most of
the risk, several weak ones add up, none reaches 1 alone. A node's risk
combines its components'. The weights are a declared convention, not fitted
to a fleet: the B200 study found "no single metric consistently dominant",
and ``trainpulse eval`` reports the lead time and false alarms they give.
Pure: signals and XID totals in, risks out.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from ..samples import XidCount
from .detectors.gpu_faults import FATAL_XIDS, GPU_HARDWARE_FAULT
from .detectors.gpu_wear import DEGRADATION_XIDS, GPU_MEMORY_DEGRADATION
from .detectors.links import LINK_DEGRADATION
from .detectors.thermal import THERMAL_INSTABILITY
from .detectors.thermal_forecast import THERMAL_THROTTLE_RISK
from .types import CRITICAL, NodeRisk, Signal

#: What each piece of evidence weighs, and why: (signal or evidence kind, severity or "") → (weight, reason).
EVIDENCE: dict[tuple[str, str], tuple[float, str]] = {
    (GPU_HARDWARE_FAULT.name, ""): (0.95, "failing now: a fatal XID, uncorrected ECC, a GPU off the bus"),
    (LINK_DEGRADATION.name, CRITICAL): (0.7, "a link that flapped or went down (NVSentinel: fatal)"),
    (LINK_DEGRADATION.name, ""): (0.35, "link errors past DCGM's or NVSentinel's rate, or a downtrained link"),
    (GPU_MEMORY_DEGRADATION.name, "remap"): (0.5, "a row remap pending or failed: the bank is running out of spares"),
    (GPU_MEMORY_DEGRADATION.name, ""): (0.3, "a rising corrected-ECC rate or a degradation XID (63, 92)"),
    ("xid_history", ""): (0.3, "a fatal XID since the daemon started: a GPU that failed once fails again more often"),
    (THERMAL_INSTABILITY.name, ""): (0.25, "throttling or heating fast: the cooling is failing"),
    (THERMAL_THROTTLE_RISK.name, ""): (0.15, "forecast to reach its throttle point: little thermal margin"),
}
#: XIDs whose history raises a GPU's risk: the fatal ones (gpu_faults' table) and the degradation ones.
HISTORY_XIDS = frozenset((*FATAL_XIDS, *DEGRADATION_XIDS))
#: A component's name for a whole node.
NODE = "node"


def node_risks(signals: Iterable[Signal], xid_counts: Iterable[XidCount] = ()) -> tuple[NodeRisk, ...]:
    """Every component with evidence, and each of their nodes, riskiest first."""
    pieces: dict[tuple[str | None, str], list[tuple[float, str]]] = {}
    for s in signals:
        weighed = _weigh(s)
        component = _component(s.subject)
        if weighed is not None and component is not None:
            pieces.setdefault(component, []).append(weighed)
    for xid in xid_counts:
        if xid.xid in HISTORY_XIDS and xid.count > 0:
            weight, _ = EVIDENCE[("xid_history", "")]
            pieces.setdefault((xid.node, f"gpu{xid.gpu_index}"), []).append((weight, f"XID {xid.xid} ×{xid.count}"))
    out = [NodeRisk(host, name, _combined(w for w, _ in found), tuple(e for _, e in found))
           for (host, name), found in pieces.items()]  # fmt: skip
    for host in {r.hostname for r in out}:
        parts = [r for r in out if r.hostname == host]
        why = tuple(f"{r.component} {r.risk:.2f}" for r in sorted(parts, key=lambda r: -r.risk))
        out.append(NodeRisk(host, NODE, _combined(r.risk for r in parts), why))
    return tuple(sorted(out, key=lambda r: (-r.risk, r.hostname or "", r.component)))


def _weigh(s: Signal) -> tuple[float, str] | None:
    """A signal's weight and its words, or None when it is no evidence of a node's risk."""
    if s.name == GPU_MEMORY_DEGRADATION.name and (
        s.evidence.get("remapped_rows_pending") or s.evidence.get("remapped_rows_failed")
    ):
        key = (s.name, "remap")
    elif (s.name, s.severity) in EVIDENCE:
        key = (s.name, s.severity)
    else:
        key = (s.name, "")
    found = EVIDENCE.get(key)
    return None if found is None else (found[0], f"{s.name}: {s.message}")


def _component(subject: Mapping[str, Any]) -> tuple[str | None, str] | None:
    """The component a signal's subject names: a GPU or a port, on its host (None: this node)."""
    host = subject.get("hostname")
    host = host if isinstance(host, str) else None
    if isinstance(subject.get("gpu_index"), int):
        return host, f"gpu{subject['gpu_index']}"
    if isinstance(subject.get("device"), str):
        return host, f"{subject['device']}/{subject.get('port', 1)}"
    return None


def _combined(weights: Iterable[float]) -> float:
    """Independent chances combined: ``1 - Π(1 - w)``."""
    return 1.0 - math.prod(1.0 - min(1.0, max(0.0, w)) for w in weights)
