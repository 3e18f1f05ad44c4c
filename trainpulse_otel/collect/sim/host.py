"""The simulated host: CPU and load averages, memory and swap (and a leak that exhausts them), disk and network.

A 2-socket, 192-thread host with 2 TiB of memory. The training job's CPU use
and the leak scenario's memory come from the knobs; the all-reduce's traffic
shows on the NICs once the job spans nodes (NVLink inside one node does not).
"""

from __future__ import annotations

import math
import random

from ...samples import HostSample
from .job import JobShape
from .physics import GIB, MIB, TIB, approach

CPU_COUNT = 192  # 2 sockets x 48 cores x 2 threads
HOST_MEMORY_BYTES = 2 * TIB
HOST_AVAILABLE_BYTES = int(1.4 * TIB)
HOST_RESERVE_BYTES = 6 * GIB  # what is left when the OOM killer strikes
JOB_RSS_BYTES = int(0.45 * TIB)  # freed when the job dies
SWAP_TOTAL_BYTES = 8 * GIB
SWAP_BASE_BYTES = 300 * MIB
SWAP_ONSET_AVAILABLE = 96 * GIB  # the kernel starts swapping below this
HOST_CPU_PERCENT = 26.0
SAVE_CPU_PERCENT = 6.0  # serialising a checkpoint


class HostModel:
    """The node's host; :meth:`sample` reads it once per tick (it keeps the load averages)."""

    def __init__(self, rng: random.Random, phase: float, shape: JobShape) -> None:
        self._rng = rng
        self._phase = phase
        self._shape = shape
        self._load = [CPU_COUNT * HOST_CPU_PERCENT / 100] * 3

    def sample(
        self,
        t: float,
        dt: float,
        cpu: float,
        leak: float | None,
        extra_write: float,
        wall_ms: float | None,
        settle: bool,
    ) -> HostSample:
        """The host: CPU and load, memory (minus any leak; ``leak=None`` once the job is gone), I/O."""
        gauss, exp = self._rng.gauss, math.exp
        cpu = min(99.5, max(0.5, cpu + gauss(0.0, 1.5)))
        load1, load5, load15 = self._update_load(cpu, dt, settle)
        wave = 3.0e9 * math.sin(2 * math.pi * t / 1300.0 + self._phase) + gauss(0.0, 0.4e9)
        if leak is None:
            available = HOST_AVAILABLE_BYTES + JOB_RSS_BYTES + wave
        else:
            available = HOST_AVAILABLE_BYTES + wave - leak * (HOST_AVAILABLE_BYTES - HOST_RESERVE_BYTES)
        available = max(HOST_RESERVE_BYTES / 2, available)
        squeeze = min(1.0, max(0.0, (SWAP_ONSET_AVAILABLE - available) / (SWAP_ONSET_AVAILABLE - HOST_RESERVE_BYTES)))
        swap = SWAP_BASE_BYTES + (0.9 * SWAP_TOTAL_BYTES - SWAP_BASE_BYTES) * squeeze
        net = self._allreduce_traffic(wall_ms)
        return HostSample(
            cpu_percent=round(cpu, 1),
            cpu_count=CPU_COUNT,
            load1=round(load1, 2),
            load5=round(load5, 2),
            load15=round(load15, 2),
            memory_total_bytes=HOST_MEMORY_BYTES,
            memory_available_bytes=int(available),
            swap_total_bytes=SWAP_TOTAL_BYTES,
            swap_used_bytes=int(swap),
            disk_read_bytes_per_sec=round(45e6 * exp(gauss(0.0, 0.3)), 1),
            disk_write_bytes_per_sec=round(12e6 * exp(gauss(0.0, 0.4)) + extra_write, 1),
            net_rx_bytes_per_sec=round(60e6 * exp(gauss(0.0, 0.3)) + net, 1),
            net_tx_bytes_per_sec=round(4e6 * exp(gauss(0.0, 0.3)) + net, 1),
        )

    def _update_load(self, cpu: float, dt: float, settle: bool) -> list[float]:
        """Load averages as the kernel keeps them: EMAs (1, 5, 15 min) of the run queue."""
        saturation = 1.0 + 0.4 * max(0.0, cpu - 85.0) / 15.0  # runnable threads queue up
        runq = CPU_COUNT * cpu / 100.0 * saturation
        for i, tau in enumerate((60.0, 300.0, 900.0)):
            self._load[i] += (runq - self._load[i]) * approach(dt, tau, settle)
        return self._load

    def _allreduce_traffic(self, wall_ms: float | None) -> float:
        """NIC bytes/s each way for the inter-node all-reduce (none on one node: NVLink)."""
        nodes = self._shape.nodes
        if nodes == 1 or wall_ms is None:
            return 0.0
        return 2.0 * self._shape.grad_bytes * (nodes - 1) / nodes / (wall_ms / 1000.0)
