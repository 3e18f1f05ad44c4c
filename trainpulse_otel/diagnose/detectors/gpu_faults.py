"""``gpu_hardware_fault``: a GPU failing now (its wearing out is :mod:`.gpu_wear`'s).

The evidence is what the driver says about its own hardware: XID codes (the
frame's cumulative counts by GPU and code, so a code counts when its total
rises), the volatile ECC counters, the row-remapper flags, and GPUs that
leave the node's GPU list while the node keeps reporting (fallen off the bus).
An XID line of the job's output (a ``driver_xid`` event) counts too: on its
GPU when the line names it, else on the GPU at its PCI address.

Which XIDs are which follows NVIDIA's XID catalogue
(https://docs.nvidia.com/deploy/xid-errors/) and its memory-error pages
(https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/,
https://docs.nvidia.com/deploy/dynamic-page-retirement/): a *fatal* XID is
one whose resolution is a GPU reset, a node reboot or service — the GPU's
state is lost or its hardware is failing, and the job on it cannot go on.
XIDs whose resolution is "restart the application" (13, 31, 43, 45: an
illegal instruction, an MMU fault, a channel reset of the user's own work)
are the application's faults and are only counted. The table with each
code's reason is in docs/signals.md.
"""

from __future__ import annotations

from typing import Any

from ...samples import DRIVER_XID, GPU_FAULT, Frame, GpuKey, LogEvent, gpu_order
from ..spec import GPU, SignalSpec
from ..thresholds import CONVENTION, SECONDS, Knob, Thresholds
from ..tick import Tick
from ..types import CRITICAL, Finding, Policy
from .base import BaseDetector

GPU_HARDWARE_FAULT = SignalSpec(
    "gpu_hardware_fault",
    "a GPU failing now: a fatal XID, uncorrected ECC errors rising, a GPU lost from the bus",
    GPU,
    0.24,
    "compute",
    policy=Policy(raise_evidence=2.5, min_observations=1, hold=0.75, clear_after_s=5.0, stale_after_s=60.0),
)
#: A failing GPU's finding scores this: raised at once, critical on the second tick.
FAULT_SCORE = 3.0

#: XID code -> what it means, for the codes that make a GPU unusable (see the module docstring).
FATAL_XIDS: dict[int, str] = {
    48: "double-bit (uncorrectable) ECC error",
    61: "internal micro-controller breakpoint/warning",
    62: "internal micro-controller halt",
    64: "row remapping failed (ECC page retirement or row remapper failure)",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    94: "contained ECC error (the process that touched the memory is killed)",
    95: "uncontained ECC error",
    119: "GSP RPC timeout",
    120: "GSP error",
    154: "GPU recovery action changed (a reset or reboot is required)",
}
#: How long the last piece of evidence of a fault episode keeps its signal up.
FAULT_HOLD = Knob(
    "hold_s",
    600.0,
    SECONDS,
    CONVENTION,
    "a fatal XID or an uncorrected-ECC rise keeps the signal up this long after the last one: the GPU needs a "
    "reset, not time",
    0,
)


def xid_rises(frame: Frame, totals: dict[tuple[GpuKey, int], int]) -> dict[GpuKey, list[int]]:
    """XID codes by GPU whose total rose since the last frame (``totals`` is updated)."""
    out: dict[GpuKey, list[int]] = {}
    for x in frame.xid_counts:
        gpu = (x.node, x.gpu_index)
        key = (gpu, x.xid)
        if x.count > totals.get(key, 0):
            out.setdefault(gpu, []).append(x.xid)
        totals[key] = x.count
    return out


def _by_gpu(item: tuple[GpuKey, Any]) -> tuple[str, int]:
    return gpu_order(item[0])


class _Fault:
    """One GPU's fault episode: the codes, the ECC rise, whether it is lost, and when it was last seen."""

    __slots__ = ("ecc_uncorrected", "faults", "hostname", "last_ts", "lost", "ranks", "since", "xids")

    def __init__(self, ts: float, hostname: str | None) -> None:
        self.since = self.last_ts = ts
        self.hostname = hostname
        self.xids: list[int] = []
        self.faults: list[str] = []  # what log lines said of it beyond an XID (fallen off the bus, an AER error)
        self.ranks: set[int] = set()  # the ranks whose own output told it (their process ran on it)
        self.ecc_uncorrected: tuple[int, int] | None = None  # (first seen, now)
        self.lost = False


class GpuHardwareFault(BaseDetector):
    """A fatal XID, uncorrected ECC errors rising, or a GPU gone from the node's list: critical, at once.

    Raised on the first tick it is seen (one observation; the state machine
    makes it critical on the second), per GPU. A fatal
    XID or an uncorrected-ECC rise holds it for 10 minutes after the last
    one; a lost GPU holds it until the GPU answers again. A node that reports
    no GPU at all (nvidia-smi timed out, NVML gone) says nothing about one GPU
    and loses none.
    """

    name = "gpu_hardware_fault"
    signals = (GPU_HARDWARE_FAULT,)
    knobs = (FAULT_HOLD,)

    def __init__(self, thresholds: Thresholds | None = None) -> None:
        super().__init__(thresholds)
        self.hold_s = self.thresholds.hold_s
        self._totals: dict[tuple[GpuKey, int], int] = {}
        self._ecc: dict[GpuKey, int] = {}
        self._seen: set[GpuKey] = set()
        self._faults: dict[GpuKey, _Fault] = {}
        self._logged: dict[tuple[str | None, str], _Fault] = {}  # logged XIDs of a GPU known by its PCI address

    def update(self, tick: Tick) -> list[Finding] | None:
        frame = tick.frame
        if not frame.gpus and not frame.xid_counts and not self._faults and not frame.events and not self._logged:
            return None
        host = tick.node.hostname
        for gpu, codes in xid_rises(frame, self._totals).items():
            fatal = [c for c in codes if c in FATAL_XIDS]
            if fatal:
                self._fault(gpu, tick.ts, host).xids.extend(fatal)
        for event in frame.events:
            if event.kind == DRIVER_XID and event.details.get("xid") in FATAL_XIDS:
                self._logged_fault(event, tick, host).xids.append(event.details["xid"])
            elif event.kind == GPU_FAULT:
                self._logged_fault(event, tick, host).faults.append(str(event.details.get("fault", "GPU fault")))
        ecc = self._ecc
        for g, state in tick.gpu_states:
            count = g.ecc_uncorrected_errors
            if count is not None:
                key = state.key
                before = ecc.get(key)
                if before is not None and count > before:
                    fault = self._fault(key, tick.ts, host)
                    first = fault.ecc_uncorrected[0] if fault.ecc_uncorrected else before
                    fault.ecc_uncorrected = (first, count)
                ecc[key] = count
        self._track_presence(tick, host)
        for gpu in [g for g, f in self._faults.items() if not self._holds(f, tick.ts)]:
            del self._faults[gpu]  # the episode is over: a later fault on this GPU is a new one
        for pci in [p for p, f in self._logged.items() if not self._holds(f, tick.ts)]:
            del self._logged[pci]
        found = [self._finding(gpu, f) for gpu, f in sorted(self._faults.items(), key=_by_gpu)]
        return found + [self._pci_finding(pci, f) for (_, pci), f in sorted(self._logged.items(), key=str)]

    def _logged_fault(self, event: LogEvent, tick: Tick, host: str | None) -> _Fault:
        """The fault episode a failure line of the job's output (or a kernel log shipped as one) tells of: on
        its GPU when the line names it, else on the GPU at its PCI address (``?``: the line gave none)."""
        node = event.hostname if event.hostname != host else None
        if event.gpu_index is not None:
            return self._fault((node, event.gpu_index), tick.ts, host)
        key = (event.hostname or host, str(event.details.get("pci", "?")))
        fault = self._logged.get(key)
        if fault is None:
            fault = self._logged[key] = _Fault(tick.ts, key[0])
        fault.last_ts = tick.ts
        if event.rank is not None:
            fault.ranks.add(event.rank)
        return fault

    def _pci_finding(self, pci: str, fault: _Fault) -> Finding:
        subject: dict[str, Any] = {} if pci == "?" else {"pci_bus_id": pci}
        if fault.hostname is not None:
            subject["hostname"] = fault.hostname
        if fault.ranks:  # the GPU of the rank(s) whose process told it
            subject["ranks"] = tuple(sorted(fault.ranks))
        codes = sorted(set(fault.xids))
        evidence: dict[str, Any] = {"since": fault.since}
        parts = []
        if codes:
            evidence["xid_errors"] = codes
            evidence["xid_meanings"] = {str(c): FATAL_XIDS[c] for c in codes}
            parts.append("XID " + ", ".join(f"{c} ({FATAL_XIDS[c]})" for c in codes))
        if fault.faults:
            evidence["faults"] = sorted(set(fault.faults))
            parts.extend(evidence["faults"])
        where = f" on {fault.hostname}" if fault.hostname else ""
        gpu = "a GPU" if pci == "?" else f"the GPU at PCI {pci}"
        message = f"{gpu}{where} is failing: " + "; ".join(parts)
        return Finding(GPU_HARDWARE_FAULT.name, FAULT_SCORE, CRITICAL, message, subject, evidence)

    def _fault(self, gpu: GpuKey, ts: float, host: str | None) -> _Fault:
        fault = self._faults.get(gpu)
        if fault is None:
            fault = self._faults[gpu] = _Fault(ts, gpu[0] or host)
        fault.last_ts = ts
        return fault

    def _track_presence(self, tick: Tick, host: str | None) -> None:
        """A GPU gone from its node's list is lost; a node that lists no GPU this tick says nothing of any."""
        present = {state.key for _, state in tick.gpu_states}
        if not present:
            return
        ts = tick.ts
        listing = {node for node, _ in present}
        for gpu in self._seen - present:
            if gpu[0] in listing:
                self._fault(gpu, ts, host).lost = True
        for gpu in present & self._faults.keys():
            self._faults[gpu].lost = False
        self._seen |= present

    def _holds(self, fault: _Fault, ts: float) -> bool:
        return fault.lost or ts - fault.last_ts <= self.hold_s

    def _finding(self, gpu: GpuKey, fault: _Fault) -> Finding:
        subject: dict[str, Any] = {"gpu_index": gpu[1]}
        if fault.hostname is not None:
            subject["hostname"] = fault.hostname
        evidence: dict[str, Any] = {"lost": fault.lost, "since": fault.since}
        parts = []
        if fault.xids:
            codes = sorted(set(fault.xids))
            evidence["xid_errors"] = codes
            evidence["xid_meanings"] = {str(c): FATAL_XIDS[c] for c in codes}
            parts.append("XID " + ", ".join(f"{c} ({FATAL_XIDS[c]})" for c in codes))
        if fault.ecc_uncorrected is not None:
            first, now = fault.ecc_uncorrected
            evidence["ecc_uncorrected_errors"] = now
            evidence["ecc_uncorrected_new"] = now - first
            parts.append(f"{now - first} new uncorrected ECC error(s) ({now} since the driver loaded)")
        if fault.faults:
            evidence["faults"] = sorted(set(fault.faults))
            parts.extend(evidence["faults"])
        if fault.lost:
            parts.append("gone from the node's GPU list (lost from the bus)")
        where = f" on {fault.hostname}" if fault.hostname else ""
        message = f"GPU {gpu[1]}{where} is failing: " + "; ".join(parts)
        return Finding(GPU_HARDWARE_FAULT.name, FAULT_SCORE, CRITICAL, message, subject, evidence)
