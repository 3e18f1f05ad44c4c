"""``interconnect_degradation``: a GPU's PCIe link or NVLinks, or a host's InfiniBand/RoCE port, degrading.

A degrading link is named as the cause of what it slows: a straggler rank on
the GPU whose PCIe link trained below its maximum (or whose link replays), the
stragglers and the slow collectives of the host whose port is erroring. The
cause names the link, not just "straggler", and outranks the straggler it
explains. A degrading link that slows nothing yet is a warning to act on at the
next drain.
"""

from __future__ import annotations

from typing import Any

from ...samples import GpuKey, gpu_label
from ..correlate import Evidence
from ..detectors.comms import ALLREDUCE_WAIT, SYNC_IMBALANCE
from ..detectors.links import LINK_DEGRADATION
from ..detectors.ranks import RANK_STRAGGLER
from ..spec import HARDWARE, CauseSpec
from ..types import Signal
from .common import CONFIRMED, STRONG, SYMPTOMS, base_confidence, symptoms
from .ranking import Candidate, Rule

INTERCONNECT_DEGRADATION = CauseSpec(
    "interconnect_degradation",
    "a PCIe link, NVLink or InfiniBand/RoCE port degrading: errors rising, or trained below its maximum",
    HARDWARE,
    (LINK_DEGRADATION.name, RANK_STRAGGLER.name, ALLREDUCE_WAIT.name, *SYMPTOMS),
    "drain the node at the next checkpoint; test the link (dcgmi diag -r 2, then -r 3), reseat or replace it",
)
#: The ladder every remedy ends with: watch, drain, reset, diagnose, replace.
LADDER = (
    "Until then watch the rate (a one-off burst that stops needs nothing); drain {host} at the next checkpoint "
    '(scontrol update nodename={host} state=drain reason="link", or kubectl cordon {host}); reset the GPU or '
    "the port; run `dcgmi diag -r 2` (PCIe and NVLink bandwidth), then `-r 3`; replace what still fails."
)
REMEDY_PCIE = (
    "{gpu}'s PCIe link {what}. Compare `nvidia-smi -q -d PCIE -i {index}` (current against max generation and "
    "width) and `lspci -vv -s <bus>` (LnkSta against LnkCap); a link trained narrow wants the GPU or its riser "
    "reseated and the slot's BIOS link settings checked. "
)
REMEDY_NVLINK = (
    "{gpu}'s NVLinks {what}. `nvidia-smi nvlink -s -i {index}` shows each link's state and `nvidia-smi nvlink -e "
    "-i {index}` its CRC, replay and recovery counters; CRC errors that return after a GPU reset point at the "
    "GPU's or the NVSwitch board's links. "
)
REMEDY_PORT = (
    "{port}: {what}. `ibstat {device} {number}` shows its state and rate, `perfquery -x` (or `ibqueryerrors`) its "
    "error counters, `mlxlink -d {device} -p {number} -c` the cable's bit-error rate; reseat or replace the cable "
    "or transceiver and check the switch port, then clear the counters (`perfquery -R`) to watch them again. "
)


def _host_of(s: Signal) -> str | None:
    host = s.subject.get("hostname", s.evidence.get("hostname"))
    return host if isinstance(host, str) else None


def _on_node(ev: Evidence, signals: list[Signal], node: str | None) -> list[Signal]:
    """The signals of ranks on ``node`` (None: this daemon's own)."""
    return [s for s in signals if ev.node.node_of(_host_of(s)) == node]


def interconnect(ev: Evidence) -> list[Candidate]:
    """One candidate per degrading GPU link and per degrading port, with what each slows."""
    out = [_gpu_link(ev, g, signals) for g, signals in ev.gpu_signals(LINK_DEGRADATION.name).items()]
    ports = [s for s in ev.active(LINK_DEGRADATION.name) if "device" in s.subject]
    return out + [_port(ev, s) for s in ports]


def _gpu_link(ev: Evidence, g: GpuKey, signals: list[Signal]) -> Candidate:
    stragglers = ev.stragglers_on(g)
    explains = stragglers + (symptoms(ev) if stragglers else [])
    base = CONFIRMED if stragglers else base_confidence(signals)
    evidence = signals[0].evidence
    what = signals[0].message.partition(": ")[2] or "is degrading"
    late = f"; rank {stragglers[0].subject.get('rank')} on it straggles" if stragglers else ""
    summary = f"{gpu_label(g)}'s link: {what}{late}"
    host = g[0] or ev.node.hostname or "the node"
    template = REMEDY_NVLINK if "nvlink" in " ".join(evidence) and "pcie_link_width" not in evidence else REMEDY_PCIE
    remedy = template.format(gpu=gpu_label(g), index=g[1], what=what) + LADDER.format(host=host)
    subject = {**ev.gpu_subject([g]), "link": "nvlink" if template is REMEDY_NVLINK else "pcie"}
    return Candidate(INTERCONNECT_DEGRADATION.name, base, summary, remedy, signals, explains, subject)


def _port(ev: Evidence, s: Signal) -> Candidate:
    node = ev.node.node_of(_host_of(s))
    slowed = _on_node(ev, ev.active(RANK_STRAGGLER.name), node)
    waits = [w for w in (ev.job_signal(ALLREDUCE_WAIT.name), ev.job_signal(SYNC_IMBALANCE.name)) if w is not None]
    explains = slowed + waits + (symptoms(ev) if slowed or waits else [])
    base = STRONG if slowed or waits else base_confidence([s])
    device, number = s.subject["device"], s.subject.get("port", 1)
    host = _host_of(s) or ev.node.hostname or "the node"
    what = s.message.partition(": ")[2] or "degrading"
    port = f"{device} port {number} on {host}"
    slows = (
        "; the job's collectives wait on it" if waits else (f"; {len(slowed)} rank(s) there straggle" if slowed else "")
    )
    remedy = REMEDY_PORT.format(port=port, what=what, device=device, number=number) + LADDER.format(host=host)
    subject: dict[str, Any] = {"device": device, "port": number, "link": "port"}
    if _host_of(s):
        subject["hostname"] = _host_of(s)
    return Candidate(INTERCONNECT_DEGRADATION.name, base, f"{port}: {what}{slows}", remedy, [s], explains, subject)


INTERCONNECT = Rule(INTERCONNECT_DEGRADATION, interconnect)
