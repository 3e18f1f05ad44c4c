"""XIDs for the nvidia-smi collector: the kernel log, matched to GPUs by the PCI bus ids nvidia-smi lists.

nvidia-smi has no event interface, so XIDs come from the kernel log
(:mod:`.kmsg`). The GPUs' PCI bus ids do not change while the driver is
loaded: they are asked once (``--query-gpu=index,pci.bus_id``), on the first
tick, right after a query that answered (so never beside a stuck one), and
only once the kernel log has opened readable. When either is unavailable
XIDs are unknown (``xid_errors`` left out), never a failure.
"""

from __future__ import annotations

import csv
import io
import logging
import subprocess
from collections.abc import Callable

from ..logs.xid import PciAddress, pci_address
from ..samples import GpuSample
from .kmsg import KernelLogFactory, KernelXidLog, with_xids, xids_by_gpu

log = logging.getLogger(__name__)

BUS_ID_FIELDS = "index,pci.bus_id"

Runner = Callable[[list[str]], "subprocess.CompletedProcess[str] | None"]
"""Runs one bounded nvidia-smi command; None when it could not run or timed out."""


def parse_bus_ids(text: str) -> dict[PciAddress, int]:
    """``index, 00000000:3B:00.0`` rows → PCI address → GPU index; other lines are skipped."""
    out: dict[PciAddress, int] = {}
    for row in csv.reader(io.StringIO(text), skipinitialspace=True):
        if len(row) != 2 or not row[0].strip().isdigit():
            continue
        address = pci_address(row[1])
        if address is not None:
            out[address] = int(row[0])
    return out


class SmiKernelXids:
    """Attaches the kernel log's XIDs to nvidia-smi's GPU samples."""

    def __init__(self, binary: str, run: Runner, kernel_log: KernelLogFactory | None = None) -> None:
        self._binary = binary
        self._run = run
        self._open_log = kernel_log
        self._log: KernelXidLog | None = None
        self._gpu_of: dict[PciAddress, int] = {}

    def attach(self, samples: tuple[GpuSample, ...]) -> tuple[GpuSample, ...]:
        """The samples with the XIDs logged since the last tick (unchanged when XIDs cannot be heard)."""
        if self._open_log is not None:  # the first tick: open the log, then learn the bus ids
            self._log, self._open_log = self._open_log(), None
            self._gpu_of = self._bus_ids() if self._log.readable else {}
        if not self._gpu_of or self._log is None or not self._log.readable:
            return samples
        xids = xids_by_gpu(self._log.read_lines(), self._gpu_of)
        return with_xids(samples, xids, set(self._gpu_of.values()))

    def close(self) -> None:
        if self._log is not None:
            self._log.close()

    def _bus_ids(self) -> dict[PciAddress, int]:
        result = self._run([self._binary, f"--query-gpu={BUS_ID_FIELDS}", "--format=csv,noheader"])
        gpu_of = parse_bus_ids(result.stdout) if result is not None and result.returncode == 0 else {}
        if not gpu_of:
            log.info("nvidia-smi lists no PCI bus ids; no XIDs from the kernel log")
        return gpu_of
