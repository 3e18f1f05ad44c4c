"""InfiniBand and RoCE ports as Linux sysfs shows them: state, rate and error counters.

:func:`read_ports` turns every ``<root>/class/infiniband/<device>/ports/<port>/`` directory into one
:class:`PortSample`, sorted by (device, port). It never raises: a file that is missing, unreadable or not
in the form the kernel writes leaves its field None (its counter absent); a device or port directory that
cannot be listed is left out; a host without ``class/infiniband`` has no ports. Every file read is bounded.

A counter is read from ``counters/`` (the port's PMA PortCounters) and, where that file is missing or
holds no number (``N/A (no PMA)``), from ``hw_counters/`` (driver statistics under the same name, as
Soft-RoCE keeps ``link_downed``). ``counters/`` values saturate: they stop at :data:`COUNTER_MAX` and stay
there until reset. Values are reported as read; telling a stuck counter from a quiet one is the rate
logic's job.

The ``parse_*`` functions are pure; :class:`InfinibandCollector` is the collector around
:func:`read_ports`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from ..samples import PORT_COUNTERS, PortSample, port_order
from .base import Collected

#: The longest value read from one sysfs file. The kernel writes a few dozen bytes at most
#: (``200 Gb/sec (4X HDR)``, ``N/A (no PMA)``, a 20-digit 64-bit counter).
MAX_READ_BYTES = 256

#: Width in bits of each PORT_COUNTERS file in ``counters/``: the PortCounters attribute of the
#: InfiniBand Architecture Specification (Vol. 1, 16.1.3.5), as the kernel decodes it in
#: drivers/infiniband/core/sysfs.c (``PORT_PMA_ATTR(name, counter, width, offset)``). The spec makes
#: these counters stop at their maximum rather than wrap.
COUNTER_BITS: dict[str, int] = {
    "symbol_error": 16,
    "link_downed": 8,
    "link_error_recovery": 8,
    "port_rcv_errors": 16,
    "port_xmit_discards": 16,
    "excessive_buffer_overrun_errors": 4,
    "local_link_integrity_errors": 4,
    "port_rcv_remote_physical_errors": 16,
}

#: The value at which a ``counters/`` file saturates, per counter name (65535, 255, 15).
#: ``hw_counters/`` values are 64-bit driver statistics and are not bounded by this.
COUNTER_MAX: dict[str, int] = {name: (1 << bits) - 1 for name, bits in COUNTER_BITS.items()}

#: The largest value any counter file holds (the kernel prints them as u64 at most).
U64_MAX = (1 << 64) - 1

_T = TypeVar("_T")

# "4: ACTIVE", "5: LinkUp", "7: Phy Test", "9: <unknown>": the number, then the name (state_show,
# phys_state_show in drivers/infiniband/core/sysfs.c).
_NUMBERED_NAME = re.compile(r"\d+:\s*([A-Za-z<][A-Za-z0-9_ <>-]{0,39})")
# "InfiniBand", "Ethernet", "Unknown" (link_layer_show).
_LINK_LAYER = re.compile(r"[A-Za-z]{1,40}")
# "200 Gb/sec (4X HDR)", "2.5 Gb/sec (1X SDR)", "10 Gb/sec (4X)" (rate_show).
_RATE = re.compile(r"(\d+(?:\.\d+)?)\s*Gb/sec\b")


def _first_line(text: str) -> str:
    """The first line of a sysfs value, stripped."""
    lines = text.strip().splitlines()
    return lines[0].strip() if lines else ""


def parse_state(text: str) -> str | None:
    """The name in a ``state`` or ``phys_state`` value (``4: ACTIVE`` → ``ACTIVE``), or None."""
    match = _NUMBERED_NAME.fullmatch(_first_line(text))
    return match.group(1).strip() if match else None


def parse_rate(text: str) -> float | None:
    """The Gb/s in a ``rate`` value (``200 Gb/sec (4X HDR)`` → 200.0), or None."""
    match = _RATE.match(_first_line(text))
    return float(match.group(1)) if match else None


def parse_counter(text: str) -> int | None:
    """A counter file's integer, or None (empty, ``N/A (no PMA)``, negative, garbage, past 64 bits)."""
    line = _first_line(text)
    if not (line.isascii() and line.isdigit()):
        return None
    value = int(line)
    return value if value <= U64_MAX else None


def parse_link_layer(text: str) -> str | None:
    """The ``link_layer`` value (``InfiniBand``, ``Ethernet``), or None when empty or not one word."""
    line = _first_line(text)
    return line if _LINK_LAYER.fullmatch(line) else None


def _read(path: Path) -> str | None:
    """At most MAX_READ_BYTES of a file as text, or None when it cannot be read."""
    try:
        with path.open("rb") as handle:
            return handle.read(MAX_READ_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return None


def _field(path: Path, parse: Callable[[str], _T | None]) -> _T | None:
    """``parse`` of a file's text, or None when the file cannot be read."""
    text = _read(path)
    return None if text is None else parse(text)


def _counter(port_dir: Path, name: str) -> int | None:
    """A counter from ``counters/``, else from ``hw_counters/``; None where neither has it."""
    for group in ("counters", "hw_counters"):
        value = _field(port_dir / group / name, parse_counter)
        if value is not None:
            return value
    return None


def read_port(port_dir: Path, device: str, port: int) -> PortSample:
    """One port directory as a PortSample; what cannot be read is None or absent."""
    counters = ((name, _counter(port_dir, name)) for name in PORT_COUNTERS)
    return PortSample(
        device=device,
        port=port,
        state=_field(port_dir / "state", parse_state),
        phys_state=_field(port_dir / "phys_state", parse_state),
        rate_gbps=_field(port_dir / "rate", parse_rate),
        link_layer=_field(port_dir / "link_layer", parse_link_layer),
        counters=tuple((name, value) for name, value in counters if value is not None),
    )


def _subdirs(path: Path) -> list[tuple[str, Path]]:
    """(name, path) of the directories in ``path`` (symlinks followed); empty when unlistable."""
    try:
        with os.scandir(path) as entries:
            return [(entry.name, Path(entry.path)) for entry in entries if _is_dir(entry)]
    except OSError:
        return []


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def _device_ports(device: str, device_dir: Path) -> list[PortSample]:
    """Every numbered port directory of one device."""
    return [
        read_port(port_dir, device, int(name))
        for name, port_dir in _subdirs(device_dir / "ports")
        if name.isascii() and name.isdigit()
    ]


def read_ports(sysfs_root: str | os.PathLike[str] = "/sys") -> tuple[PortSample, ...]:
    """Every InfiniBand/RoCE port under ``<sysfs_root>/class/infiniband``, sorted by (device, port)."""
    class_dir = Path(sysfs_root) / "class" / "infiniband"
    ports = [port for device, device_dir in _subdirs(class_dir) for port in _device_ports(device, device_dir)]
    return tuple(sorted(ports, key=port_order))


class InfinibandCollector:
    """Reads the host's ports from sysfs; ``collect()`` returns ``Collected(ports=...)``."""

    name = "infiniband"

    def __init__(self, sysfs_root: str = "/sys") -> None:
        self._sysfs_root = sysfs_root

    def describe(self) -> str:
        """One line for logs and the snapshot."""
        return f"infiniband: {Path(self._sysfs_root) / 'class' / 'infiniband'}"

    def collect(self, now: float) -> Collected:
        """The ports as they are now; an empty tuple on a host without InfiniBand/RoCE."""
        return Collected(ports=read_ports(self._sysfs_root))

    def close(self) -> None:
        """Nothing is held."""
