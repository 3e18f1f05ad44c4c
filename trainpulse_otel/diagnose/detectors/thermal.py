"""``thermal_instability``: a GPU throttling on heat, or heating fast under unchanged load."""

from __future__ import annotations

from typing import Any

from ...samples import GpuKey, gpu_label, gpu_subject
from ..spec import GPU, SignalSpec
from ..stats import RecentMedian, RobustBaseline, WindowMin, median
from ..thresholds import CELSIUS, CONVENTION, PHYSICS, SECONDS, SHARE, Knob, Thresholds
from ..tick import THERMAL_REASONS, GpuState, Tick
from ..types import CRITICAL, WARNING, Finding, Policy
from .base import BaseDetector
from .level import WINDOW
from .thermal_forecast import BASELINE

THERMAL_INSTABILITY = SignalSpec(
    "thermal_instability",
    "a GPU throttling on heat, or heating fast under unchanged load",
    GPU,
    0.10,
    "compute",
    policy=Policy(min_observations=3, clear_after_s=60.0),
)
#: Seconds between judgements: temperature moves on a ~12 s time constant.
EVERY_S = 2.0
#: Seconds of history for the rise.
RISE_WINDOW_S = 60.0
HARD_REASONS = frozenset(("hw_thermal", "hw_slowdown"))
#: A throttle reason on this very tick scores more than one remembered from the last ``throttle_memory_s``.
THROTTLING_NOW_SCORE = 1.5
#: The most a temperature above its baseline scores: it holds an active signal, never raises one.
HOLD_ONLY = 0.95


class _GpuTemps:
    """One GPU's filtered temperature, its busy baseline and its recent minimum since it settled."""

    __slots__ = ("baseline", "low", "low_since", "recent")

    def __init__(self) -> None:
        self.recent = RecentMedian(WINDOW)
        self.baseline = RobustBaseline(**BASELINE)
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
    signals = (THERMAL_INSTABILITY,)
    knobs = (
        Knob(
            "rise_c",
            6.0,
            CELSIUS,
            CONVENTION,
            "a rise this much faster than the peers' median within a minute: cooling failing, not load (load moves "
            "every GPU at once)",
            0.1,
        ),
        Knob(
            "excess_c",
            6.0,
            CELSIUS,
            CONVENTION,
            "degrees above its own busy baseline and its peers' that keep an active signal (score 0.75 at 4.5 °C)",
            0.1,
        ),
        Knob(
            "throttle_memory_s",
            30.0,
            SECONDS,
            CONVENTION,
            "after its last thermal throttle reason a GPU still counts as throttling this long",
            0,
        ),
        Knob(
            "settle_s",
            60.0,
            SECONDS,
            PHYSICS,
            "seconds of load before a GPU's temperature is judged: ~3 thermal time constants, so warming back up "
            "after idling is not instability",
            0,
        ),
        Knob("min_rise_span_s", 30.0, SECONDS, CONVENTION, "settled history a rise needs before it is judged", 0),
        Knob(
            "critical_share",
            0.5,
            SHARE,
            CONVENTION,
            "critical while throttled this share of recent ticks (or by a hardware reason)",
            0,
            1,
        ),
    )
    every_s = EVERY_S

    def __init__(self, thresholds: Thresholds | None = None) -> None:
        super().__init__(thresholds)
        t = self.thresholds
        self.rise_c, self.excess_c, self.throttle_memory_s = t.rise_c, t.excess_c, t.throttle_memory_s
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
        if state.busy_for(ts) < self.thresholds.settle_s:  # warming up after an idle spell is not instability
            temps.low, temps.low_since = WindowMin(RISE_WINDOW_S), None
            return state, temp, None, None
        if temps.low_since is None:
            temps.low_since = ts
        low = temps.low.add(ts, temp)
        base = temps.baseline
        excess = temp - base.loc if base.ready else None
        base.update(temp)
        rise = temp - low if ts - temps.low_since >= self.thresholds.min_rise_span_s else None
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
        throttled = last is not None and tick.ts - last <= self.throttle_memory_s
        score = (THROTTLING_NOW_SCORE if last == tick.ts else 1.0) if throttled else 0.0
        rel_rise = None if rise is None else rise - max(0.0, peer_rise)
        rel_excess = None if excess is None else excess - max(0.0, peer_excess)
        if rel_rise is not None:
            score = max(score, rel_rise / self.rise_c)
        if rel_excess is not None:
            score = max(score, min(HOLD_ONLY, rel_excess / self.excess_c))
        if score < floor:
            return None
        hard = bool(HARD_REASONS.intersection(state.reasons))
        severity = CRITICAL if throttled and (hard or state.thermal >= self.thresholds.critical_share) else WARNING
        return Finding(
            THERMAL_INSTABILITY.name,
            score,
            severity,
            self._message(state, temp, throttled, rel_rise, self.rise_c),
            gpu_subject(state.key),
            self._evidence(state, temp, rel_rise, rel_excess),
        )

    @staticmethod
    def _message(state: GpuState, temp: float, throttled: bool, rel_rise: float | None, rise_c: float) -> str:
        if throttled:
            reasons = ", ".join(r for r in state.reasons if r in THERMAL_REASONS) or "recently"
            clock = f"; SM clock at {state.clock_ratio:.0%} of max" if state.clock_ratio is not None else ""
            return f"{gpu_label(state.key)} is thermally throttling ({reasons}) at {temp:.0f} °C{clock}"
        if rel_rise is not None and rel_rise >= rise_c / 2:
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
