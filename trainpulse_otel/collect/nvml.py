"""GPU samples from NVML, one per GPU, through :mod:`._nvml`.

Handles are fetched once (the device count at start): GPUs do not come and go
under a running training job, and re-enumerating every tick would cost more
than the whole read. A field the GPU does not support is ``None`` (logged once);
a GPU that NVML reports as lost is left out of the tick (logged once per
episode) while the others keep flowing — the contract's "a GPU that
disappears from the list is lost".

Hardware faults: XID codes come from NVML's event set (:mod:`.xid_events`),
drained without waiting each tick, or — for GPUs whose driver has no event
support — from the kernel log (:mod:`.kmsg`), matched to the GPU by its PCI
address. An XID that arrives in the tick its GPU is lost (XID 79, fallen off
the bus) is still reported, on a sample that carries nothing else, so it is
counted while the GPU is gone from the list. ECC counts are the volatile
(since driver load) totals; remapped rows come from ``nvmlDeviceGetRemappedRows``
(Ampere and newer; NotSupported elsewhere, logged once); the PCIe and NVLink
fields from :mod:`.nvml_links`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Any

from ..logs.xid import PciAddress, pci_address
from ..samples import GpuSample
from ._nvml import GpuLost, NvmlSession, decode, decode_reasons
from .base import Collected
from .kmsg import KernelLogFactory, KernelXidLog, xids_by_gpu
from .nvml_links import LinkReader
from .xid_events import XidEvents

log = logging.getLogger(__name__)

#: nvml.h values, used only if a binding lacks the named constant.
_NVML_TEMPERATURE_GPU = 0
_NVML_CLOCK_SM = 1
_NVML_MEMORY_ERROR_TYPE_CORRECTED = 0
_NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
_NVML_VOLATILE_ECC = 0

#: Newer drivers name them clock *events*; the throttle call is the pre-535 name.
_REASON_FUNCTIONS = (
    "nvmlDeviceGetCurrentClocksEventReasons",
    "nvmlDeviceGetCurrentClocksThrottleReasons",
)


@dataclass
class _Gpu:
    """One GPU's handle, its identity once read, and whether it is lost now."""

    index: int
    handle: Any
    uuid: str | None = None
    name: str | None = None
    lost: bool = False


def _watts(milliwatts: Any) -> float | None:
    return None if milliwatts is None else milliwatts / 1000.0


def _number(value: Any, kind: type = float) -> Any:
    return None if value is None else kind(value)


def _attr(struct: Any, name: str, kind: type = float) -> Any:
    return None if struct is None else _number(getattr(struct, name, None), kind)


class NvmlCollector:
    """Reads every GPU NVML can see; ``collect()`` returns ``Collected(gpus=...)``."""

    name = "nvml"

    def __init__(self, session: NvmlSession | None = None, kernel_log: KernelLogFactory | None = None) -> None:
        """``kernel_log`` opens the kernel log for GPUs without NVML XID events (None: no such fallback)."""
        self._nvml = session or NvmlSession()
        self._gpus = self._open_gpus() if self._nvml.init() else []
        self._reason_bits = self._nvml.reason_bits()
        self._constants = self._read_constants()
        self._links = LinkReader(self._nvml)
        self._events = XidEvents(self._nvml, ((g.index, g.handle) for g in self._gpus))
        self._kernel_log, self._gpu_of_pci = self._kernel_fallback(kernel_log)

    @staticmethod
    def available() -> bool:
        """True when NVML starts and sees at least one GPU (for ``-mode auto``)."""
        session = NvmlSession(probe=True)
        if not session.init():
            return False
        try:
            return (session.query("nvmlDeviceGetCount", default=0) or 0) > 0
        finally:
            session.shutdown()

    @property
    def gpu_count(self) -> int:
        """How many GPUs had a handle at start (lost ones included)."""
        return len(self._gpus)

    def describe(self) -> str:
        """One line for logs and the snapshot."""
        return f"nvml: {len(self._gpus)} GPU(s)"

    def collect(self, now: float) -> Collected:
        """One sample per reachable GPU, in index order, with the XIDs since the last tick; ``now`` is not needed."""
        xids = self._drain_xids()
        out = []
        for gpu in self._gpus:
            sample = self._read(gpu)
            codes = xids.get(gpu.index)
            if sample is None and codes:
                sample = GpuSample(index=gpu.index, uuid=gpu.uuid, name=gpu.name)  # lost, but its XID counts
            if sample is not None:
                out.append(replace(sample, xid_errors=tuple(codes or ())) if self._hears_xids(gpu) else sample)
        return Collected(gpus=tuple(out))

    def _hears_xids(self, gpu: _Gpu) -> bool:
        """True when this GPU's XIDs reach us (an empty list then means none); else its XIDs are unknown."""
        return gpu.index in self._events.watching or gpu.index in self._gpu_of_pci.values()

    def close(self) -> None:
        """Shut NVML down; the collector then returns no GPUs."""
        self._gpus = []
        self._events.close()
        if self._kernel_log is not None:
            self._kernel_log.close()
        self._nvml.shutdown()

    # ------------------------------------------------------------------ setup

    def _open_gpus(self) -> list[_Gpu]:
        count = self._nvml.query("nvmlDeviceGetCount", default=0) or 0
        gpus = []
        for index in range(count):
            handle = self._nvml.query("nvmlDeviceGetHandleByIndex", index, field="handle")
            if handle is None:
                log.warning("GPU %d has no NVML handle; leaving it out", index)
                continue
            gpus.append(_Gpu(index, handle))
        log.info("NVML sees %d GPU(s)", len(gpus))
        return gpus

    def _read_constants(self) -> dict[str, int]:
        c = self._nvml.constant
        return {
            "temperature": c("NVML_TEMPERATURE_GPU", _NVML_TEMPERATURE_GPU),
            "clock_sm": c("NVML_CLOCK_SM", _NVML_CLOCK_SM),
            "corrected": c("NVML_MEMORY_ERROR_TYPE_CORRECTED", _NVML_MEMORY_ERROR_TYPE_CORRECTED),
            "uncorrected": c("NVML_MEMORY_ERROR_TYPE_UNCORRECTED", _NVML_MEMORY_ERROR_TYPE_UNCORRECTED),
            "volatile": c("NVML_VOLATILE_ECC", _NVML_VOLATILE_ECC),
        }

    def _kernel_fallback(
        self, kernel_log: KernelLogFactory | None
    ) -> tuple[KernelXidLog | None, dict[PciAddress, int]]:
        """The kernel log and PCI address → GPU map, for the GPUs NVML sends no XID events for."""
        unwatched = [g for g in self._gpus if g.index not in self._events.watching]
        if not unwatched or kernel_log is None:
            return None, {}
        gpu_of: dict[PciAddress, int] = {}
        for gpu in unwatched:
            pci = self._nvml.query("nvmlDeviceGetPciInfo", gpu.handle, field="pci bus id")
            address = pci_address(decode(getattr(pci, "busId", ""))) if pci is not None else None
            if address is not None:
                gpu_of[address] = gpu.index
        if not gpu_of:
            return None, {}
        return kernel_log(), gpu_of

    def _drain_xids(self) -> dict[int, list[int]]:
        """XID codes by GPU since the last tick: NVML events, and kernel log lines for unwatched GPUs."""
        xids = self._events.drain()
        if self._kernel_log is not None:
            for index, codes in xids_by_gpu(self._kernel_log.read_lines(), self._gpu_of_pci).items():
                xids.setdefault(index, []).extend(codes)
        return xids

    # ------------------------------------------------------------------ reads

    def _read(self, gpu: _Gpu) -> GpuSample | None:
        """A sample, or None while the GPU is lost (logged once each way)."""
        try:
            sample = self._sample(gpu)
        except GpuLost:
            if not gpu.lost:
                gpu.lost = True
                log.warning("GPU %d (%s) is lost; leaving it out until it answers", gpu.index, gpu.uuid)
            return None
        if gpu.lost:
            gpu.lost = False
            log.info("GPU %d (%s) answers again", gpu.index, gpu.uuid)
        return sample

    def _get(self, gpu: _Gpu, fn: str, *args: Any, field: str) -> Any:
        return self._nvml.query(fn, gpu.handle, *args, gpu=gpu.index, field=field)

    def _sample(self, gpu: _Gpu) -> GpuSample:
        self._read_identity(gpu)
        k = self._constants
        util = self._get(gpu, "nvmlDeviceGetUtilizationRates", field="utilization")
        memory = self._get(gpu, "nvmlDeviceGetMemoryInfo", field="memory")
        return GpuSample(
            index=gpu.index,
            uuid=gpu.uuid,
            name=gpu.name,
            utilization_percent=_attr(util, "gpu"),
            memory_utilization_percent=_attr(util, "memory"),
            memory_used_bytes=_attr(memory, "used", int),
            memory_total_bytes=_attr(memory, "total", int),
            temperature_celsius=_number(
                self._get(gpu, "nvmlDeviceGetTemperature", k["temperature"], field="temperature")
            ),
            power_watts=_watts(self._get(gpu, "nvmlDeviceGetPowerUsage", field="power")),
            power_limit_watts=_watts(self._get(gpu, "nvmlDeviceGetEnforcedPowerLimit", field="power_limit")),
            sm_clock_mhz=_number(self._get(gpu, "nvmlDeviceGetClockInfo", k["clock_sm"], field="sm_clock")),
            max_sm_clock_mhz=_number(self._get(gpu, "nvmlDeviceGetMaxClockInfo", k["clock_sm"], field="max_sm_clock")),
            throttle_reasons=self._reasons(gpu),
            ecc_uncorrected_errors=_number(
                self._get(gpu, "nvmlDeviceGetTotalEccErrors", k["uncorrected"], k["volatile"], field="ecc_uncorrected"),
                int,
            ),
            ecc_corrected_errors=_number(
                self._get(gpu, "nvmlDeviceGetTotalEccErrors", k["corrected"], k["volatile"], field="ecc_corrected"),
                int,
            ),
            **self._remapped_rows(gpu),
            **self._links.read(gpu.handle, gpu.index),
        )

    def _remapped_rows(self, gpu: _Gpu) -> dict[str, int]:
        """``remapped_rows_pending`` / ``_failed`` from NVML's (corrected, uncorrected, pending, failure)."""
        rows = self._get(gpu, "nvmlDeviceGetRemappedRows", field="remapped_rows")
        if rows is None or len(rows) < 4:
            return {}
        return {"remapped_rows_pending": int(bool(rows[2])), "remapped_rows_failed": int(bool(rows[3]))}

    def _read_identity(self, gpu: _Gpu) -> None:
        """UUID and name never change; read them until known, then never again."""
        if gpu.uuid is None:
            gpu.uuid = self._get(gpu, "nvmlDeviceGetUUID", field="uuid")
        if gpu.name is None:
            gpu.name = self._get(gpu, "nvmlDeviceGetName", field="name")

    def _reasons(self, gpu: _Gpu) -> tuple[str, ...] | None:
        """Decoded throttle bits, trying the clock-events call before the old name."""
        for fn in _REASON_FUNCTIONS:
            mask = self._get(gpu, fn, field=f"throttle_reasons ({fn})")
            if mask is not None:
                return decode_reasons(int(mask), self._reason_bits)
        return None
