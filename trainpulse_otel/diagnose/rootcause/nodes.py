"""``node_failure``: a node of the job gone silent, and what it takes down with it.

A node that stops sending (``node_unreachable``) has crashed, lost its network
or been fenced: the ranks on it stop, so the job stalls at its next collective
(``training_stalled``) or, before that, its ranks fall behind (``rank_straggler``)
and every other rank waits (``sync_imbalance``, a throughput collapse). This
cause explains those consequences — it outranks ``rank_hang`` and
``straggler_rank`` for ranks on that node — and claims the stall's lost time.
"""

from __future__ import annotations

from typing import Any

from ..correlate import Evidence
from ..detectors.nodes import NODE_UNREACHABLE
from ..detectors.ranks import RANK_STRAGGLER
from ..detectors.stall import TRAINING_STALLED
from ..spec import HARDWARE, CauseSpec
from ..types import Signal
from .common import SYMPTOMS, base_confidence, symptoms
from .ranking import Candidate, Rule

NODE_FAILURE = CauseSpec(
    "node_failure",
    "a node of the job gone silent, and the ranks it takes down with it",
    HARDWARE,
    (NODE_UNREACHABLE.name, TRAINING_STALLED.name, RANK_STRAGGLER.name, *SYMPTOMS),
    "check the node (BMC, console, network), drain it, and restart the job on healthy nodes",
)

REMEDY_NODE = (
    "Check node {host}: is it up (ping, the BMC: ipmitool chassis status, `scontrol show node {host}` or "
    "`kubectl describe node {host}`), did it panic or run out of memory (the console, journalctl -k -b -1 "
    "after it is back), is its network up (the IB/RoCE link: ibstat, the switch port)? The job's ranks on it "
    'are gone: drain it (scontrol update nodename={host} state=drain reason="node failure", or kubectl '
    "cordon {host}) and restart the job from the last checkpoint on healthy nodes."
)


def node_failure(ev: Evidence) -> list[Candidate]:
    """One candidate per silent node."""
    out = []
    for s in ev.active(NODE_UNREACHABLE.name):
        host = str(s.subject["hostname"])
        consequences = _consequences(ev, host, s)
        explains = consequences + (symptoms(ev) if consequences else [])
        subject: dict[str, Any] = {"hostname": host}
        ranks = s.evidence.get("ranks") or []
        if ranks:
            subject["ranks"] = list(ranks)
        out.append(
            Candidate(
                NODE_FAILURE.name,
                base_confidence([s]),
                _summary(s, consequences),
                REMEDY_NODE.format(host=host),
                [s],
                explains,
                subject,
            )
        )
    return out


def _consequences(ev: Evidence, host: str, silent: Signal) -> list[Signal]:
    """The stall and the stragglers the silent node's ranks account for."""
    ranks = set(silent.evidence.get("ranks") or ())
    out = [
        s for s in ev.active(RANK_STRAGGLER.name) if s.subject.get("hostname") == host or s.subject.get("rank") in ranks
    ]
    stalled = ev.job_signal(TRAINING_STALLED.name)
    if stalled is not None and _stall_on(stalled, host, ranks):
        out.append(stalled)
    return out


def _stall_on(stalled: Signal, host: str, ranks: set[int]) -> bool:
    """Whether the stall's lagging ranks are on the silent node (or the stall could name no rank)."""
    lagging = stalled.evidence.get("lagging") or ()
    if not lagging:
        return True
    return any(e.get("hostname") == host or e.get("rank") in ranks for e in lagging)


def _summary(silent: Signal, consequences: list[Signal]) -> str:
    text = silent.message
    if any(s.name == TRAINING_STALLED.name for s in consequences):
        text += "; the job has stopped: its ranks there cannot reach the next collective and the others wait"
    elif consequences:
        text += "; its ranks fall behind and the others wait for them"
    return text


NODES = Rule(NODE_FAILURE, node_failure)
