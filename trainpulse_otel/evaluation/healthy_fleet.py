"""Healthy simulated fleets: how often ``link_degradation`` rises on nodes whose links are fine.

A healthy node's link counters are not still: a link retransmits now and then, a port counts a few symbol
errors, a congested moment discards packets, a reboot clears every counter. :data:`NOISE` declares that
background per GPU and per port — isolated bursts at random times, each a random size — and :func:`healthy_fleet`
runs the real ``link_degradation`` detector and signal state machine over many node-days of it, read once a
second as a node daemon does. Between bursts nothing moves, and a detector that sees no counter move finds
nothing, so only the seconds around each burst are read (the 60 s a per-minute rate holds a burst, every 5 s).
The background is an assumption, not a fleet's measurement: no public source gives the rates of healthy links'
counters; each rate's reason says what it leans on, and the figure holds under it.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from ..diagnose.detectors.links import LINK_DEGRADATION, LinkDegradation
from ..diagnose.tracker import SignalTracker
from ..samples import PORT_COUNTERS, Frame, GpuSample, PortSample

DAY_S = 86400.0
GPUS = PORTS = 8  # an 8-GPU node with a rail-optimised NIC per GPU
#: Per counter: (per GPU or per port, mean hours between bursts, largest burst, whether a per-minute rate judges it,
#: what it leans on). A burst's size is uniform from 1 to the largest. Healthy as the field defines it: a link
#: within the InfiniBand spec (BER < 1e-12; at most 120 symbol errors an hour, ~0 after FEC on a healthy link —
#: NVSentinel's link-counter design), a GPU's link well inside DCGM's limits.
Noise = tuple[str, float, int, bool, str]
NOISE: dict[str, Noise] = {
    "pcie_replay_errors": ("gpu", 12.0, 3, True, "occasional replays are normal; DCGM warns past 8 a minute"),
    "nvlink_crc_errors": ("gpu", 6.0, 20, False, "a few CRC flits a day; DCGM warns at 100 a second"),
    "symbol_error": ("port", 6.0, 10, False, "a few a day, far inside the spec's 120 an hour"),
    "port_rcv_errors": ("port", 24.0, 3, False, "a malformed packet now and then"),
    "port_xmit_discards": ("port", 2.0, 60, False, "a moment of congestion (a job's start) discards packets"),
    "link_error_recovery": ("port", 240.0, 1, True, "a retrain every ten days or so"),
}
#: Mean days between a node's reboots: every counter starts again from 0.
REBOOT_EVERY_DAYS = 7.0
#: The default fleet: this many node-days (the B200 study reports false alarms per 1,000).
NODE_DAYS = 1000.0
#: This daemon's node, as the detector's tick names it.
NODE = SimpleNamespace(hostname=None)
#: Read around a burst: from a second before it to past the window of a per-minute rate.
BEFORE_S, AFTER_S, WINDOW_STEP_S = 1.0, 62.0, 5.0


@dataclass
class FleetResult:
    node_days: float
    alarms: int
    bursts: int
    description: str

    @property
    def per_1000_node_days(self) -> float:
        return 1000.0 * self.alarms / self.node_days if self.node_days else 0.0

    def to_dict(self) -> dict[str, Any]:
        out = dict(vars(self))
        out["per_1000_node_days"] = round(self.per_1000_node_days, 3)
        return out


def healthy_fleet(node_days: float = NODE_DAYS, seed: int = 0, noise: Mapping[str, Noise] = NOISE) -> FleetResult:
    """``link_degradation`` raised over ``node_days`` node-days of ``noise`` (one node at a time, each a day)."""
    rng = random.Random(seed)
    alarms = bursts = 0
    whole, part = int(node_days), node_days - int(node_days)
    for day in range(whole + (1 if part > 0 else 0)):
        length = DAY_S if day < whole else part * DAY_S
        found, n = _node_day(rng, length, noise)
        alarms, bursts = alarms + found, bursts + n
    description = f"{GPUS} GPUs and {PORTS} ports a node, {bursts} background bursts, a reboot every "
    return FleetResult(node_days, alarms, bursts, description + f"{REBOOT_EVERY_DAYS:g} days on average")


def _node_day(rng: random.Random, length_s: float, noise: Mapping[str, Noise]) -> tuple[int, int]:
    """One node's day: its bursts, read around each; how many link alarms were raised, and how many bursts."""
    events = _bursts(rng, length_s, noise)
    if rng.random() < 1.0 / REBOOT_EVERY_DAYS:
        events.append((rng.uniform(0.0, length_s), "reboot", -1, 0))
    events.sort()
    reads: dict[float, set[tuple[str, int]]] = {}  # each second read, and the GPUs and ports read then
    for at, counter, unit, _ in events:
        for ts in _reads(at, counter, noise):
            reads.setdefault(ts, set()).add((noise[counter][0] if counter in noise else "", unit))
    detector, tracker = LinkDegradation(), SignalTracker()
    values: dict[tuple[str, int], int] = {}
    alarms, applied = 0, 0
    for ts in sorted(reads):
        while applied < len(events) and events[applied][0] <= ts:
            _, counter, unit, size = events[applied]
            if counter == "reboot":
                values.clear()
            else:
                values[(counter, unit)] = values.get((counter, unit), 0) + size
            applied += 1
        frame = _frame(ts, values, reads[ts], noise)
        findings = detector.update(SimpleNamespace(frame=frame, ts=ts, node=NODE))  # type: ignore[arg-type]
        tracker.observe(0, findings or [], LINK_DEGRADATION.policy, ts)
        tracker.expire(ts)
        alarms += sum(1 for t in tracker.drain() if t.event == "raised")
    return alarms, sum(1 for e in events if e[1] != "reboot")


def _frame(
    ts: float, values: dict[tuple[str, int], int], read: set[tuple[str, int]], noise: Mapping[str, Noise]
) -> Frame:
    """The GPUs and ports read at ``ts`` (those with a burst around it), at their counts now."""
    gpus = {unit: {} for kind, unit in read if kind == "gpu"}
    ports = {unit: {} for kind, unit in read if kind == "port"}
    for (counter, unit), count in values.items():
        chosen = gpus if noise[counter][0] == "gpu" else ports
        if unit in chosen:
            chosen[unit][counter] = count
    return Frame(
        ts=ts,
        gpus=tuple(GpuSample(index=i, utilization_percent=97.0, **fields) for i, fields in sorted(gpus.items())),
        ports=tuple(
            PortSample(f"mlx5_{i}", 1, "ACTIVE", "LinkUp", 400.0, "InfiniBand", _counts(fields))
            for i, fields in sorted(ports.items())
        ),
    )


def _counts(fields: dict[str, int]) -> tuple[tuple[str, int], ...]:
    return tuple((name, fields.get(name, 0)) for name in PORT_COUNTERS)


def _bursts(rng: random.Random, length_s: float, noise: Mapping[str, Noise]) -> list[tuple[float, str, int, int]]:
    out = []
    for counter, (kind, hours, largest, _, _) in noise.items():
        for unit in range(GPUS if kind == "gpu" else PORTS):
            t = rng.expovariate(1.0 / (hours * 3600.0))
            while t < length_s:
                out.append((t, counter, unit, rng.randint(1, largest)))
                t += rng.expovariate(1.0 / (hours * 3600.0))
    return out


def _reads(at: float, counter: str, noise: Mapping[str, Noise]) -> list[float]:
    """The seconds read around a burst at ``at``: just before and after it; for a per-minute rate, its window."""
    start = float(int(at - BEFORE_S))
    reads = [start, start + 1.0, start + 2.0]
    if counter != "reboot" and noise[counter][3]:
        reads += [start + 2.0 + k * WINDOW_STEP_S for k in range(1, int(AFTER_S / WINDOW_STEP_S) + 1)]
    return reads
