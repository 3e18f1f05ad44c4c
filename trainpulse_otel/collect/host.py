"""Host samples with psutil: CPU, load, memory, swap, and disk/network rates.

Disk and network rates are deltas of psutil's cumulative counters between two
collects, divided by the difference of the ticks' ``now`` — the tick's clock,
not the wall clock — so the daemon's scheduler and the tests decide time. The
first collect has no rates; a counter that went backwards (reset, a NIC that
went away) gives None for that tick rather than a negative or absurd rate.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psutil

from ..samples import HostSample
from ._once import LogOnce
from .base import Collected

log = logging.getLogger(__name__)

#: Interfaces left out of the network totals: loopback, and virtual devices
#: that carry the same bytes a physical NIC already counted (container veths,
#: bridges, traffic-shaping mirrors).
VIRTUAL_NIC = re.compile(r"^(lo\d*|veth.*|docker\d*|br-.*|virbr.*|ifb\d*)$")


def rate(previous: int | None, current: int | None, seconds: float | None) -> float | None:
    """Per-second rate of a cumulative counter between two readings.

    None when either reading is missing, the interval is not positive, or the
    counter went backwards (reset or wrap): one unknown tick beats one wrong one.
    """
    if previous is None or current is None or seconds is None or seconds <= 0:
        return None
    if current < previous:
        return None
    return (current - previous) / seconds


@dataclass(frozen=True, slots=True)
class Counters:
    """Cumulative byte counters at one instant; None where psutil had none."""

    disk_read: int | None = None
    disk_write: int | None = None
    net_rx: int | None = None
    net_tx: int | None = None


def rates(previous: Counters, current: Counters, seconds: float) -> dict[str, float | None]:
    """The HostSample rate fields from two counter readings ``seconds`` apart."""
    return {
        "disk_read_bytes_per_sec": rate(previous.disk_read, current.disk_read, seconds),
        "disk_write_bytes_per_sec": rate(previous.disk_write, current.disk_write, seconds),
        "net_rx_bytes_per_sec": rate(previous.net_rx, current.net_rx, seconds),
        "net_tx_bytes_per_sec": rate(previous.net_tx, current.net_tx, seconds),
    }


def _net_totals() -> tuple[int | None, int | None]:
    """Received and sent bytes over the physical-looking interfaces."""
    nics = [c for name, c in psutil.net_io_counters(pernic=True).items() if not VIRTUAL_NIC.match(name)]
    if not nics:
        return None, None
    return sum(c.bytes_recv for c in nics), sum(c.bytes_sent for c in nics)


def _disk_totals() -> tuple[int | None, int | None]:
    """Bytes read and written over all disks; None on hosts psutil sees no disk on."""
    disk = psutil.disk_io_counters()
    if disk is None:
        return None, None
    return disk.read_bytes, disk.write_bytes


class HostCollector:
    """Reads the host; ``collect()`` returns ``Collected(host=...)``."""

    name = "host"

    def __init__(self) -> None:
        self._log_once = LogOnce(log)
        self._previous: tuple[float, Counters] | None = None
        # psutil measures CPU between calls: prime it so the first tick has a value.
        self._read("cpu_percent", psutil.cpu_percent, None)

    def describe(self) -> str:
        """One line for logs and the snapshot."""
        return "host: psutil"

    def collect(self, now: float) -> Collected:
        """CPU, load, memory and swap now; disk and network rates since the last call."""
        memory = self._read("memory", psutil.virtual_memory)
        swap = self._read("swap", psutil.swap_memory)
        load = self._read("load", psutil.getloadavg) or (None, None, None)
        return Collected(
            host=HostSample(
                cpu_percent=self._read("cpu_percent", psutil.cpu_percent, None),
                cpu_count=self._read("cpu_count", psutil.cpu_count, True),
                load1=load[0],
                load5=load[1],
                load15=load[2],
                memory_total_bytes=getattr(memory, "total", None),
                memory_available_bytes=getattr(memory, "available", None),
                swap_total_bytes=getattr(swap, "total", None),
                swap_used_bytes=getattr(swap, "used", None),
                **self._rates(now),
            )
        )

    def close(self) -> None:
        """Nothing is held; forget the previous counters."""
        self._previous = None

    def _rates(self, now: float) -> dict[str, float | None]:
        disk = self._read("disk_io", _disk_totals) or (None, None)
        net = self._read("net_io", _net_totals) or (None, None)
        current = Counters(disk[0], disk[1], net[0], net[1])
        previous, self._previous = self._previous, (now, current)
        if previous is None:
            return {}
        return rates(previous[1], current, now - previous[0])

    def _read(self, field: str, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)``, or None (logged once per field) when psutil cannot say."""
        try:
            return fn(*args)
        except Exception as exc:  # noqa: BLE001 - psutil raises OSError, RuntimeError, NotImplementedError, …
            self._log_once(
                field,
                logging.WARNING,
                "host %s unavailable (%s: %s); reporting it as unknown",
                field,
                type(exc).__name__,
                exc,
            )
            return None
