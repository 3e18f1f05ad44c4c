"""Failing GPUs in the simulator: what NVML shows of a GPU wearing out or falling off the bus.

The knobs ``gpu_lost``, ``ecc_corrected_rate``, ``row_remap_pending``,
``pcie_replay_rate`` and ``nvlink_crc_rate`` (:mod:`.scenarios`) move;
:class:`HardwareFaults` turns them into the GPU fields NVML reports: counters
that accumulate the rates (corrected ECC, PCIe replays, NVLink CRC), the
row remapper's pending flag with its XID 63 when the remap is recorded, and
a lost GPU's XID 79 on the tick it falls — a sample with nothing else, as
NVML's collector reports it — after which it is gone from the list. While a
GPU is lost its rank cannot step, so no step of the job completes and the
other ranks spin inside the all-reduce: :func:`spinning_gpus` shows them busy
at a fraction of their training power, as NCCL's polling kernels look.
"""

from __future__ import annotations

import random
from dataclasses import replace

from ...samples import GpuSample
from .knobs import Knobs
from .physics import IDLE_POWER_W, MAX_SM_CLOCK_MHZ

XID_FALLEN_OFF_THE_BUS = 79
XID_ROW_REMAP_RECORDED = 63
#: Board power of a GPU spinning in a collective: SMs polling, no tensor-core work.
SPIN_POWER_W = IDLE_POWER_W + 110.0


class HardwareFaults:
    """Each GPU's fault state across ticks: its corrected-ECC count and the XIDs already reported."""

    def __init__(self, gpus: int) -> None:
        self._corrected = [0.0] * gpus
        self._replays = [0.0] * gpus  # PCIe replays and NVLink CRC errors, accumulated from their knobs' rates
        self._crc = [0.0] * gpus
        self._fell: set[int] = set()
        self._remapped: set[int] = set()

    @staticmethod
    def any_lost(k: Knobs) -> bool:
        """True while some GPU is off the bus: its rank cannot step, so neither can the job."""
        return any(v >= 0.5 for v in k.gpu_lost)

    def apply(self, gpus: tuple[GpuSample, ...], k: Knobs, dt: float) -> tuple[GpuSample, ...]:
        """The samples NVML would show: fault counters on each GPU, lost GPUs gone after their XID 79."""
        out = []
        for g in gpus:
            i = g.index
            if k.gpu_lost[i] >= 0.5:
                if i not in self._fell:
                    self._fell.add(i)
                    out.append(GpuSample(index=i, uuid=g.uuid, name=g.name, xid_errors=(XID_FALLEN_OFF_THE_BUS,)))
                continue
            self._corrected[i] += k.ecc_corrected_rate[i] * dt
            self._replays[i] += k.pcie_replay_rate[i] * dt
            self._crc[i] += k.nvlink_crc_rate[i] * dt
            pending = int(k.row_remap_pending[i] >= 0.5)
            xids: tuple[int, ...] = ()
            if pending and i not in self._remapped:
                self._remapped.add(i)
                xids = (XID_ROW_REMAP_RECORDED,)
            out.append(
                replace(
                    g,
                    ecc_corrected_errors=int(self._corrected[i]),
                    remapped_rows_pending=pending,
                    remapped_rows_failed=0,
                    xid_errors=xids,
                    pcie_replay_errors=int(self._replays[i]),
                    nvlink_crc_errors=int(self._crc[i]),
                )
            )
        return tuple(out)


def spinning_gpus(rng: random.Random, idle: tuple[GpuSample, ...]) -> tuple[GpuSample, ...]:
    """GPUs whose ranks wait inside a collective for a peer that never comes: busy, clocks up, low power."""
    return tuple(
        replace(
            g,
            utilization_percent=100.0,
            memory_utilization_percent=0.0,
            power_watts=round(SPIN_POWER_W + rng.gauss(0.0, 4.0), 3),
            sm_clock_mhz=MAX_SM_CLOCK_MHZ,
            throttle_reasons=(),
        )
        for g in idle
    )
