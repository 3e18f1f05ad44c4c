"""``memory_pressure``: GPU memory close to full or climbing fast, host memory running low."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ...samples import GpuKey, gpu_label, gpu_subject
from ..spec import GPU, SignalSpec
from ..thresholds import CONVENTION, PHYSICS, SECONDS, SHARE, TIMES, Knob, Thresholds
from ..tick import Tick
from ..types import CRITICAL, WARNING, Finding
from .base import SCORE_CAP, BaseDetector, Threshold, percent

MEMORY_PRESSURE = SignalSpec(
    "memory_pressure", "GPU memory close to full or climbing fast, host memory running low", GPU, 0.10, "compute"
)
GIB = 1024**3


class _Plateau:
    """The level a GPU's memory last rested at: what steady-state training holds.

    ``confirmed`` once memory has rested within ``band`` (of the total) for ``rest_s``: a trace that starts
    while a job is still allocating has no plateau to grow from yet.
    """

    __slots__ = ("band", "candidate", "confirmed", "level", "rest_s", "since")

    def __init__(self, frac: float, ts: float, band: float, rest_s: float) -> None:
        self.level = self.candidate = frac
        self.since = ts
        self.confirmed = False
        self.band, self.rest_s = band, rest_s

    def update(self, frac: float, ts: float) -> float:
        if abs(frac - self.candidate) > self.band:
            self.candidate, self.since = frac, ts
        elif ts - self.since >= self.rest_s:
            self.level, self.confirmed = self.candidate, True
        if frac < self.level:
            self.level = frac  # memory was freed: the new floor counts at once
        return self.level


class GpuMemoryPressure(BaseDetector):
    """``memory_pressure`` on a GPU: memory nearly full, or growing fast past its plateau.

    Statistic per GPU, every 2 s: ``memory_used_bytes / memory_total_bytes``. Warning at
    95 %, critical at 98 % (the caching allocator starts freeing and retrying,
    fragmentation makes the next large allocation fail). Also a warning from
    83 % when memory has grown 6 points above the plateau it rested on (the
    level it last held for a minute): steady-state training does not grow.
    Clears below ~92 % (and once growth stops). Subject: the GPU.
    """

    name = "gpu_memory"
    signals = (MEMORY_PRESSURE,)
    knobs = (
        Knob(
            "gpu_warning",
            0.95,
            SHARE,
            PHYSICS,
            "of the device's memory in use: PyTorch's caching allocator starts freeing and retrying",
            0,
            1,
        ),
        Knob(
            "gpu_critical",
            0.98,
            SHARE,
            PHYSICS,
            "fragmentation makes the next large allocation fail",
            0,
            1,
            at_least="gpu_warning",
        ),
        Knob(
            "gpu_hold",
            0.97,
            TIMES,
            CONVENTION,
            "hysteresis: an active signal holds down to this times the warning",
            0,
            1,
        ),
        Knob(
            "growth",
            0.06,
            SHARE,
            CONVENTION,
            "growth above the plateau (of the total) that counts: training does not grow",
            0.001,
            1,
        ),
        Knob("growth_from", 0.83, SHARE, CONVENTION, "growth counts only from this much memory in use", 0, 1),
        Knob("plateau_band", 0.01, SHARE, CONVENTION, "memory within this much of its total is resting", 0, 1),
        Knob(
            "plateau_s",
            60.0,
            SECONDS,
            CONVENTION,
            "resting this long makes a plateau; a job still allocating has none",
            1,
        ),
    )
    every_s = 2.0

    def __init__(self, thresholds: Thresholds | None = None) -> None:
        super().__init__(thresholds)
        t = self.thresholds
        self.policy = replace(self.policy, hold=t.gpu_hold)
        self.threshold = Threshold(t.gpu_warning, t.gpu_critical)
        self.growth, self.growth_from = t.growth, t.growth_from
        self._plateau: dict[GpuKey, _Plateau] = {}

    def update(self, tick: Tick) -> list[Finding] | None:
        if not tick.gpus:
            return None
        out = []
        floor = self.report_floor
        for g, state in tick.gpu_states:
            used, total = g.memory_used_bytes, g.memory_total_bytes
            if used is None or not total:
                continue
            frac = used / total
            key = state.key
            plateau = self._plateau.get(key)
            if plateau is None:
                plateau = self._plateau[key] = _Plateau(
                    frac, tick.ts, self.thresholds.plateau_band, self.thresholds.plateau_s
                )
            base = plateau.update(frac, tick.ts)
            score = frac / self.threshold.warning
            if frac >= self.growth_from and plateau.confirmed:
                score = max(score, (frac - base) / self.growth)
            if score >= floor:
                severity = CRITICAL if frac >= self.threshold.critical else WARNING
                out.append(self._finding(key, frac, base, used, total, min(score, SCORE_CAP), severity))
        return out

    def _finding(
        self, key: GpuKey, frac: float, base: float, used: int, total: int, score: float, severity: str
    ) -> Finding:
        message = f"{gpu_label(key)} memory is {percent(frac)} full ({used / GIB:.1f} of {total / GIB:.1f} GiB)"
        if frac - base >= self.growth / 2:
            message += f", up from {percent(base)}"
        evidence = {
            "used_fraction": round(frac, 4),
            "plateau_fraction": round(base, 4),
            "memory_used_bytes": used,
            "memory_total_bytes": total,
        }
        return Finding("memory_pressure", score, severity, message, gpu_subject(key), evidence)


class HostMemoryPressure(BaseDetector):
    """``memory_pressure`` on the host: little memory left available.

    Statistic: ``memory_available_bytes / memory_total_bytes``. Warning below
    10 %, critical below 5 % (the kernel is reclaiming hard and swapping; the
    OOM killer is next). Clears above 12 %. Subject: the host.
    """

    name = "host_memory"
    signals = (MEMORY_PRESSURE,)
    knobs = (
        Knob(
            "host_warning",
            0.10,
            SHARE,
            PHYSICS,
            "of host memory available: the kernel reclaims hard and swaps",
            0,
            1,
            at_least="host_critical",
        ),
        Knob("host_critical", 0.05, SHARE, PHYSICS, "the OOM killer is next", 0, 1),
        Knob(
            "host_clear_above",
            0.12,
            SHARE,
            CONVENTION,
            "hysteresis: an active signal clears above this",
            0.001,
            1,
            at_least="host_warning",
        ),
    )
    every_s = 2.0

    def __init__(self, thresholds: Thresholds | None = None) -> None:
        super().__init__(thresholds)
        t = self.thresholds
        self.policy = replace(self.policy, hold=t.host_warning / t.host_clear_above)
        self.threshold = Threshold(t.host_warning, t.host_critical, higher_is_worse=False)

    def update(self, tick: Tick) -> list[Finding] | None:
        out = None
        for node, host in tick.hosts():
            if host.memory_available_bytes is None or not host.memory_total_bytes:
                continue
            out = out or []
            avail = host.memory_available_bytes / host.memory_total_bytes
            score, severity = self.threshold.judge(avail)
            if score < self.report_floor:
                continue
            evidence: dict[str, Any] = {
                "available_fraction": round(avail, 4),
                "memory_available_bytes": host.memory_available_bytes,
            }
            if host.swap_used_bytes is not None:
                evidence["swap_used_bytes"] = host.swap_used_bytes
            where = "host memory" if node is None else f"host memory of {node}"
            message = f"{where} is {percent(1 - avail)} used: {host.memory_available_bytes / GIB:.0f} GiB available"
            out.append(Finding("memory_pressure", score, severity, message, host_subject(tick, node), evidence))
        return out


def host_subject(tick: Tick, node: str | None = None) -> dict[str, Any]:
    """The host a host-level signal is about: another node of the job, else the training job's hostname
    when it is known."""
    hostname = node or tick.node.hostname
    return {"hostname": hostname} if hostname else {}
