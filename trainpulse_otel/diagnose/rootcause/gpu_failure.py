"""``gpu_hardware_failure``: a GPU that is failing (a fatal XID, uncorrected ECC, lost) or wearing out.

A failing GPU is the deepest cause there is on a node: the rank on it stops
(``training_stalled``) or slows (``rank_straggler``) and every other rank
waits for it (``sync_imbalance``). The candidate lists those signals in
``explains`` — the stall or straggler whose rank runs on that GPU (a stall
that could name no rank, too: the lost GPU is the reason it could not) — so
they rank below it. Memory degradation alone (a pending remap, a rising
corrected-ECC rate) is the same cause seen early: proposed with the strength
of a warning while nothing is lost yet.
"""

from __future__ import annotations

from typing import Any

from ...samples import GpuKey, gpu_label, gpu_order
from ..correlate import Evidence
from ..detectors.gpu_faults import FATAL_XIDS, GPU_HARDWARE_FAULT
from ..detectors.gpu_wear import GPU_MEMORY_DEGRADATION
from ..detectors.logged import RANK_CRASHED
from ..detectors.ranks import RANK_STRAGGLER
from ..detectors.stall import TRAINING_STALLED
from ..spec import HARDWARE, CauseSpec
from ..types import Signal
from .common import CONFIRMED, SYMPTOMS, base_confidence, symptoms
from .failures import crashed_by_gpu
from .ranking import Candidate, Rule

GPU_HARDWARE_FAILURE = CauseSpec(
    "gpu_hardware_failure",
    "a GPU that is failing (a fatal XID, uncorrected ECC, lost from the bus) or wearing out",
    HARDWARE,
    (
        GPU_HARDWARE_FAULT.name,
        GPU_MEMORY_DEGRADATION.name,
        TRAINING_STALLED.name,
        RANK_STRAGGLER.name,
        RANK_CRASHED.name,
        *SYMPTOMS,
    ),
    "drain the node, restart without the GPU, reset it and run DCGM diagnostics; replace it if they fail",
)

#: What each fatal XID asks of the operator, beyond drain / reset / diagnose (NVIDIA's XID catalogue).
XID_ADVICE: dict[int, str] = {
    48: "a double-bit ECC error: the GPU's memory returned corrupt data; the page/row is retired at the next "
    "reset, and repeated DBEs mean the GPU should be replaced",
    64: "the row remapper or page retirement failed: the memory cannot repair itself any more; replace the GPU",
    74: "an NVLink error: check the link (nvidia-smi nvlink -s / -e), the NVSwitch and the baseboard; "
    "reset, and replace the part if it repeats",
    79: "the GPU fell off the bus: the host lost it over PCIe (power, thermals, a riser or the board); "
    "it needs a node reboot or a reseat, and replacement if it repeats",
    94: "a contained ECC error: the process that touched the bad memory was killed; reset to remap the row",
    95: "an uncontained ECC error: the corruption may have reached other processes; reset the GPU now",
    119: "the GPU's GSP firmware stopped answering: reset the GPU (a driver/firmware update if it repeats)",
    120: "the GPU's GSP firmware reported an error: reset the GPU (a driver/firmware update if it repeats)",
    154: "the driver says the GPU needs a reset (or the node a reboot) before it can work again",
}
REMEDY_FAILURE = (
    "GPU {gpu} on {host} is failing{xids}. Drain the node now (cordon it, let the scheduler stop sending work) "
    "and restart the job from its last checkpoint without it. When the GPU is idle, reset it "
    "(nvidia-smi -r -i {gpu}); a GPU that fell off the bus needs a reboot. Then run DCGM diagnostics "
    "(dcgmi diag -r 3) before it takes work again, and collect nvidia-bug-report.sh for the vendor; "
    "replace the GPU if the diagnostics fail or the fault comes back."
)
REMEDY_DEGRADATION = (
    "GPU {gpu} on {host} is wearing out ({what}). Nothing is lost yet: at the next checkpoint or drain, reset "
    "the GPU (nvidia-smi -r -i {gpu}) so pending row remaps take effect, and run dcgmi diag -r 3. "
    "A failed remap or a corrected-error rate that keeps rising means the GPU should be replaced before it "
    "fails a job."
)


def _stalls_on(ev: Evidence, gpu: GpuKey) -> list[Signal]:
    """``training_stalled`` signals whose stuck rank runs on GPU ``gpu``, or that could name no rank."""
    rank = ev.node.rank_of_gpu.get(gpu)
    out = []
    for s in ev.active(TRAINING_STALLED.name):
        host = s.subject.get("hostname") or s.evidence.get("hostname")
        if isinstance(host, str) and (ev.node.node_of(host) != gpu[0] or not ev.node.is_local(host)):
            continue
        ranks = set(s.subject.get("ranks", ()))
        if "rank" in s.subject:
            ranks.add(s.subject["rank"])
        gpus = set(s.subject.get("gpu_indices", ()))
        if "gpu_index" in s.subject:
            gpus.add(s.subject["gpu_index"])
        if gpu[1] in gpus or (rank is not None and rank in ranks) or not (ranks or gpus):
            out.append(s)
    return out


def _subject(ev: Evidence, gpu: GpuKey, signals: list[Signal]) -> dict[str, Any]:
    subject = ev.gpu_subject([gpu])
    host = next((s.subject["hostname"] for s in signals if "hostname" in s.subject), ev.node.hostname)
    if host is not None:
        subject["hostname"] = host
    return subject


def _xid_text(codes: list[int]) -> str:
    if not codes:
        return ""
    return (
        " ("
        + "; ".join(f"XID {c}: {XID_ADVICE.get(c, FATAL_XIDS.get(c, 'see the XID catalogue'))}" for c in codes)
        + ")"
    )


def gpu_failure(ev: Evidence) -> list[Candidate]:
    """One candidate per failing or degrading GPU."""
    faults = ev.gpu_signals(GPU_HARDWARE_FAULT.name)
    wear = ev.gpu_signals(GPU_MEMORY_DEGRADATION.name)
    out = []
    for gpu in sorted(faults.keys() | wear.keys(), key=gpu_order):
        primary = faults.get(gpu, []) + wear.get(gpu, [])
        consequences = ev.stragglers_on(gpu) + _stalls_on(ev, gpu) + crashed_by_gpu(ev)
        explains = consequences + (symptoms(ev) if consequences else [])
        subject = _subject(ev, gpu, primary)
        host = subject.get("hostname", "its node")
        if gpu in faults:
            codes = sorted({c for s in faults[gpu] for c in s.evidence.get("xid_errors", ())})
            remedy = REMEDY_FAILURE.format(gpu=gpu[1], host=host, xids=_xid_text(codes))
            base = CONFIRMED
        else:
            what = "; ".join(s.message.split(": ", 1)[-1] for s in wear[gpu])
            remedy = REMEDY_DEGRADATION.format(gpu=gpu[1], host=host, what=what)
            base = base_confidence(primary)
        out.append(
            Candidate(
                GPU_HARDWARE_FAILURE.name,
                base,
                _summary(gpu, primary, consequences),
                remedy,
                primary,
                explains,
                subject,
            )
        )
    logged = [s for s in ev.active(GPU_HARDWARE_FAULT.name) if "gpu_index" not in s.subject]
    return out + [_logged_failure(ev, s) for s in logged]


def _logged_failure(ev: Evidence, fault: Signal) -> Candidate:
    """A GPU known by its PCI address, or not at all (a line of the job's output or the kernel log): the job
    stopping, and the crashes on its host, are its doing."""
    stalled = ev.job_signal(TRAINING_STALLED.name)
    consequences = ([stalled] if stalled is not None else []) + crashed_by_gpu(ev)
    host, pci = fault.subject.get("hostname", "its node"), fault.subject.get("pci_bus_id")
    codes = sorted(fault.evidence.get("xid_errors", ()))
    which = f"<index of PCI {pci}: nvidia-smi -q | grep -B2 {pci}>" if pci else "<the GPU: nvidia-smi -q, dmesg>"
    remedy = REMEDY_FAILURE.format(gpu=which, host=host, xids=_xid_text(codes))
    explains = consequences + (symptoms(ev) if consequences else [])
    return Candidate(
        GPU_HARDWARE_FAILURE.name, CONFIRMED, fault.message, remedy, [fault], explains, dict(fault.subject)
    )


def _summary(gpu: GpuKey, primary: list[Signal], consequences: list[Signal]) -> str:
    text = "; ".join(s.message for s in primary)
    stalled = [s for s in consequences if s.name == TRAINING_STALLED.name]
    if stalled:
        text += f"; the job has stopped: the rank on {gpu_label(gpu)} cannot step and the others wait for it"
    elif consequences:
        text += f"; the rank on {gpu_label(gpu)} lags and the others wait for it"
    return text


GPU_FAILURE = Rule(GPU_HARDWARE_FAILURE, gpu_failure)
