"""The NVIDIA driver's XID lines: ``NVRM: Xid (PCI:0000:3b:00): 79, pid=48213, name=python, GPU has fallen off the bus.``

One parser for every way such a line arrives: the kernel log the collectors read
(:mod:`trainpulse_otel.collect.kmsg`) and a log file or OTLP record the log reader
reads (:mod:`.failures`). Pure: text in, fields out.
"""

from __future__ import annotations

import re
from typing import Any

#: ``NVRM: Xid (PCI:0000:3b:00): 79, …``; older drivers print ``(0000:3b:00)`` without ``PCI:``.
XID = re.compile(r"NVRM: Xid \((?:PCI:)?([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})(?:\.[0-7])?\): (\d+)")
#: What follows the code: ``, pid=48213, name=python, GPU has fallen off the bus.`` (pid and name since ~R470).
XID_REST = re.compile(r"^,\s*(?:pid=(?:'?<unknown>'?|(?P<pid>\d+)),\s*)?(?:name=(?P<name>[^,]*),\s*)?(?P<text>.*)$")

PciAddress = tuple[int, int, int]
"""(domain, bus, device) of a PCI address: the part the driver's Xid line and NVML's bus id share."""


def pci_address(bus_id: str) -> PciAddress | None:
    """``00000000:3B:00.0`` (NVML, nvidia-smi) or ``0000:3b:00`` (the kernel log) → (domain, bus, device)."""
    parts = bus_id.strip().split(":")
    if len(parts) != 3:
        return None
    try:
        return int(parts[0], 16), int(parts[1], 16), int(parts[2].split(".")[0], 16)
    except ValueError:
        return None


def parse_xid_line(line: str) -> tuple[PciAddress, int] | None:
    """The GPU's PCI address and the XID code of one kernel log line, or None if it is no XID line."""
    match = XID.search(line)
    if match is None:
        return None
    address = pci_address(match.group(1))
    code = int(match.group(2))
    return (address, code) if address is not None and code > 0 else None


def xid_details(line: str) -> dict[str, Any] | None:
    """An XID line's fields for a failure event: ``xid`` (int), ``pci`` (the bus id as printed, lower case),
    and where given the ``pid`` and process ``name`` and the driver's ``text``; None if it is no XID line."""
    if "NVRM: Xid" not in line or (match := XID.search(line)) is None or parse_xid_line(match[0]) is None:
        return None
    details: dict[str, Any] = {"xid": int(match[2]), "pci": match[1].lower()}
    rest = XID_REST.match(line[match.end() :])
    if rest is not None:
        if rest["pid"]:
            details["pid"] = int(rest["pid"])
        if rest["name"] and "unknown" not in rest["name"]:
            details["name"] = rest["name"].strip("'")
        if rest["text"].strip():
            details["text"] = rest["text"].strip()[:200]
    return details
