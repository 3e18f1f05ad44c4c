"""``thermal_instability``: a GPU throttling on heat, or heating fast under unchanged load."""

from __future__ import annotations

from typing import Any

from ...samples import GpuKey, gpu_label, gpu_subject
from ..stats import RecentMedian, RobustBaseline, WindowMin, median
from ..tick import THERMAL_REASONS, GpuState, Tick
from ..types import CRITICAL, WARNING, Finding, Policy
from .base import BaseDetector

#: Seconds between judgements: temperature moves on a ~12 s time constant.
EVERY_S = 2.0
#: Seconds of history for the rise.
RISE_WINDOW_S = 60.0
#: Seconds of load before a GPU's temperature is judged (it settles within ~3 thermal time constants),
#: and of settled history before a rise is.
SETTLE_S = 60.0
MIN_RISE_SPAN_S = 30.0
#: A rise this much faster than the peers' in RISE_WINDOW_S raises the signal.
RISE_C = 6.0
#: Degrees above the GPU's own baseline (and its peers') that keep an active signal.
EXCESS_C = 6.0
#: Seconds after the last thermal throttle reason during which the GPU still counts as throttling.
THROTTLE_MEMORY_S = 30.0
HARD_REASONS = frozenset(("hw_thermal", "hw_slowdown"))


class _GpuTemps:
    """One GPU's filtered temperature, its busy baseline and its recent minimum since it settled."""

    __slots__ = ("baseline", "low", "low_since", "recent")

    def __init__(self) -> None:
        self.recent = RecentMedian(5)
        self.baseline = RobustBaseline(alpha=0.02, warmup=15, band=4.0, min_scale=0.5)
        self.low = WindowMin(RISE_WINDOW_S)
        self.low_since: float | None = None


class ThermalInstability(BaseDetector):
    """Throttle reasons on a GPU, or a fast rise its peers do not share.

    Statistic per GPU, every 2 s: temperature, median of the last 5 readings (a
    sensor blip of a few seconds never counts). The signal is raised by either

    - thermal throttling: ``sw_thermal``, ``hw_thermal`` or ``hw_slowdown`` among
      the GPU's throttle reasons (critical while throttled half the time or by
      a hardware reason); or
    - a fast rise: the temperature climbed 6 °C more than the peers' median
      within the last minute — a fan or cold plate failing, not load (load moves
      every GPU at once, and a GPU is judged only after a minute of load, so one
      warming back up after idling is not).

    It stays active while the GPU throttled within the last 30 s or runs 4.5 °C
    or more above its own busy baseline and its peers, and clears a minute
    after. A slow drift is not instability: ``thermal_throttle_risk`` forecasts
    it. Subject: the GPU.
    """

    name = "thermal"
    signals = ("thermal_instability",)
    policy = Policy(min_observations=3, clear_after_s=60.0)
    every_s = EVERY_S

    def __init__(self) -> None:
        self._gpus: dict[GpuKey, _GpuTemps] = {}

    def update(self, tick: Tick) -> list[Finding] | None:
        if not tick.gpus:
            return None
        rows = []
        known = self._gpus
        for g, state in tick.gpu_states:
            reading = g.temperature_celsius
            if reading is None:
                continue
            temps = known.get(state.key)
            if temps is None:
                temps = known[state.key] = _GpuTemps()
            rows.append(self._measure(temps, state, reading, tick.ts))
        if not rows:
            return None
        peer_rise = median([r[2] for r in rows if r[2] is not None] or [0.0])
        peer_excess = median([r[3] for r in rows if r[3] is not None] or [0.0])
        out = []
        floor = self.report_floor
        for state, temp, rise, excess in rows:
            finding = self._judge(state, temp, rise, excess, peer_rise, peer_excess, tick, floor)
            if finding is not None:
                out.append(finding)
        return out

    def _measure(self, temps: _GpuTemps, state: GpuState, reading: float, ts: float) -> tuple:
        temp = temps.recent.add(reading)
        if state.busy_for(ts) < SETTLE_S:  # warming up after an idle spell is not instability
            temps.low, temps.low_since = WindowMin(RISE_WINDOW_S), None
            return state, temp, None, None
        if temps.low_since is None:
            temps.low_since = ts
        low = temps.low.add(ts, temp)
        base = temps.baseline
        excess = temp - base.loc if base.ready else None
        base.update(temp)
        rise = temp - low if ts - temps.low_since >= MIN_RISE_SPAN_S else None
        return state, temp, rise, excess

    def _judge(
        self,
        state: GpuState,
        temp: float,
        rise: float | None,
        excess: float | None,
        peer_rise: float,
        peer_excess: float,
        tick: Tick,
        floor: float,
    ) -> Finding | None:
        last = state.last_thermal_ts
        throttled = last is not None and tick.ts - last <= THROTTLE_MEMORY_S
        score = (1.5 if last == tick.ts else 1.0) if throttled else 0.0
        rel_rise = None if rise is None else rise - max(0.0, peer_rise)
        rel_excess = None if excess is None else excess - max(0.0, peer_excess)
        if rel_rise is not None:
            score = max(score, rel_rise / RISE_C)
        if rel_excess is not None:
            score = max(score, min(0.95, rel_excess / EXCESS_C))
        if score < floor:
            return None
        hard = bool(HARD_REASONS.intersection(state.reasons))
        severity = CRITICAL if throttled and (hard or state.thermal >= 0.5) else WARNING
        return Finding(
            "thermal_instability",
            score,
            severity,
            self._message(state, temp, throttled, rel_rise, peer_excess),
            gpu_subject(state.key),
            self._evidence(state, temp, rel_rise, rel_excess),
        )

    @staticmethod
    def _message(state: GpuState, temp: float, throttled: bool, rel_rise: float | None, peer_excess: float) -> str:
        if throttled:
            reasons = ", ".join(r for r in state.reasons if r in THERMAL_REASONS) or "recently"
            clock = f"; SM clock at {state.clock_ratio:.0%} of max" if state.clock_ratio is not None else ""
            return f"{gpu_label(state.key)} is thermally throttling ({reasons}) at {temp:.0f} °C{clock}"
        if rel_rise is not None and rel_rise >= RISE_C / 2:
            return (
                f"{gpu_label(state.key)} heated {rel_rise:.0f} °C faster than its peers in the last minute "
                f"(now {temp:.0f} °C) under unchanged load"
            )
        return f"{gpu_label(state.key)} runs hot: {temp:.0f} °C, well above its usual temperature and its peers'"

    @staticmethod
    def _evidence(state: GpuState, temp: float, rel_rise: float | None, rel_excess: float | None) -> dict[str, Any]:
        evidence: dict[str, Any] = {
            "temperature_celsius": temp,
            "throttle_reasons": [r for r in state.reasons if r in THERMAL_REASONS],
            "thermal_throttled_share": round(state.thermal, 3),
        }
        if rel_rise is not None:
            evidence["rise_vs_peers_celsius"] = round(rel_rise, 1)
        if rel_excess is not None:
            evidence["above_baseline_vs_peers_celsius"] = round(rel_excess, 1)
        if state.clock_ratio is not None:
            evidence["sm_clock_ratio"] = round(state.clock_ratio, 3)
        return evidence
