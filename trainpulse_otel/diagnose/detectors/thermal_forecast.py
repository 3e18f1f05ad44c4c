"""``thermal_throttle_risk``: a GPU's temperature forecast to reach its throttle point.

The temperature is fitted over 1 and 3 minutes with the same
:class:`~.forecast.Forecaster` as memory; what is particular to heat — a
GPU warming back up after idling, more load settling at a new level, the
GPU's own throttle point — is judged here.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any

from ...samples import GpuKey, gpu_label, gpu_subject
from ..stats import RobustBaseline, Trend, median
from ..tick import Tick
from ..types import CRITICAL, WARNING, Finding, Policy
from .base import SCORE_CAP, BaseDetector
from .forecast import Forecaster, minutes

#: Where a GPU's thermal slowdown engages when it has never been seen throttling (H100/A100 SXM ~87–90 °C).
DEFAULT_THROTTLE_C = 87.0
#: Seconds over which a rise in power draw counts as more load (the longest temperature fit).
POWER_SPAN_S = 180.0
#: How fast the usual full-load temperature is forgotten (1 °C per 10 min).
USUAL_HIGH_DECAY_C_PER_S = 1.0 / 600.0
#: Seconds of load before a GPU's temperature is judged: it settles within ~3 thermal time constants.
SETTLE_S = 60.0
#: The lowest throttle point learned from observation (a reading below it is a sensor quirk).
MIN_THROTTLE_C = 70.0
#: The longest idle spell a GPU's series is read across (a checkpoint save of seconds to a minute); after a
#: longer one it starts afresh, with SETTLE_S of load.
SHORT_IDLE_S = 60.0
#: Busy readings whose median is where a GPU left off before an idle spell.
LEFT_READINGS = 5


class _GpuHeat:
    """One GPU's temperature and power series, its busy baseline and usual peak, its throttle point."""

    __slots__ = ("baseline", "forecaster", "idle_since", "left", "power", "rebounding", "throttle_c", "usual_high")

    def __init__(self) -> None:
        self.baseline = RobustBaseline(alpha=0.02, warmup=15, band=4.0, min_scale=0.5)
        self.forecaster = _heat_forecaster()
        self.power = _power_trend()
        self.throttle_c = DEFAULT_THROTTLE_C
        self.usual_high = -math.inf
        self.idle_since: float | None = None
        #: The last readings that counted: their median is where the GPU left off before an idle spell (read only
        #: while it rebounds, so not worked out on every reading).
        self.left: deque[float] = deque(maxlen=LEFT_READINGS)
        self.rebounding = False

    def idle(self, ts: float) -> None:
        """The GPU idles: its series is held across a short spell (a save) and started afresh after a long one."""
        if self.idle_since is None:
            self.idle_since, self.rebounding = ts, bool(len(self.forecaster.trend))
        elif ts - self.idle_since > SHORT_IDLE_S and len(self.forecaster.trend):
            self.forecaster, self.power = _heat_forecaster(), _power_trend()
            self.rebounding = False

    def counts(self, temp: float, busy_s: float) -> bool:
        """Whether a busy reading is on the GPU's trend: after SETTLE_S of load, or — resuming from a short idle —
        once it has warmed back to where it left off (so a duty-cycled GPU, a checkpointing job's, is fitted over
        the envelope of its busy temperatures, not over its rebounds). All the way back: a die warms most of the
        way in seconds and its last degree or two over a minute (its heatsink's), and counting from 1 °C below
        forecast a throttle from one routine save of a healthy hour (~2 °C/min over that last minute)."""
        self.idle_since = None
        settled = busy_s >= SETTLE_S
        if self.rebounding and (settled or (self.left and temp >= median(list(self.left)))):
            self.rebounding = False
        if self.rebounding or not (settled or len(self.forecaster.trend)):
            return False  # still rebounding from a short idle, or a fresh series not yet a minute under load
        self.left.append(temp)
        return True

    def learn(self, temp: float, dt: float) -> None:
        """Update the baseline and the slowly forgotten peak of it (the GPU's usual temperature at full load)."""
        base = self.baseline
        base.update(temp)
        if base.ready:
            self.usual_high = max(self.usual_high - USUAL_HIGH_DECAY_C_PER_S * dt, base.loc)


def _heat_forecaster() -> Forecaster:
    return Forecaster((60.0, 180.0), ThermalThrottleRisk.every_s, min_r2=0.5, min_change=1.5, min_t=5.0)


def _power_trend() -> Trend:
    """Power draw read as often as the temperature: the series' size is set by the span, not the tick interval."""
    return Trend(POWER_SPAN_S, ThermalThrottleRisk.every_s)


class ThermalThrottleRisk(BaseDetector):
    """``thermal_throttle_risk``: a GPU's temperature forecast to reach its throttle point.

    Statistic per GPU: the temperature, read every 2 s and fitted over 1 and 3
    minutes every 4 s while the GPU is busy (a least-squares fit shrugs off a
    one-reading sensor blip); the throttle point is 87 °C, or the lowest
    temperature this GPU was seen thermally throttled at. A short idle spell
    (a checkpoint save) does not end the series: the busy readings count again
    once the GPU is back to where it left off, so a duty-cycled
    GPU is fitted over the envelope of its busy temperatures, not over its
    rebounds. Judged after a minute of load (warming back up after a long idle
    spell is not a risk), when
    the fitted temperature is at least 0.5 °C above the GPU's usual full-load
    temperature (the peak of its busy baseline, forgotten at 1 °C per 10 min,
    so a GPU warming back up after a lighter spell is not at risk), its power
    draw did not rise by 5 % of its limit over the last 3 minutes (more load
    warms a GPU to a new level where it settles; failing cooling — a fan, a
    cold plate, the room — warms it at the same power), it is not cooling over
    the 3-minute window (a rebound after a lighter spell warms fast, briefly),
    it is not already throttling (that is ``thermal_instability``), and it
    rose 1.5 °C or more over the window.
    Warning when the forecast is under 15 min, critical under 3 min;
    ``eta_s`` in the evidence. Subject: the GPU.

    Its judging (every 4 s) falls half a period after ``oom_risk``'s (every 4 s from the first frame): at
    512 GPUs a job daemon's slowest ticks were the ones where both fitted and judged every GPU.
    """

    name = "thermal_risk"
    signals = ("thermal_throttle_risk",)
    policy = Policy(raise_evidence=2.0, clear_after_s=60.0)
    every_s = 2.0
    evaluate_every_s = 4.0
    horizon_s = 900.0
    critical_s = 180.0
    margin_c = 0.5
    #: A power rise over the last minute this large (share of the power limit) means more load, not worse cooling.
    load_rise = 0.05

    def __init__(self) -> None:
        self._gpus: dict[GpuKey, _GpuHeat] = {}
        self._next_eval: float | None = None

    def throttle_celsius(self, index: int, node: str | None = None) -> float:
        """The temperature GPU ``index`` (of ``node``; None: this daemon's own) is expected to throttle at."""
        heat = self._gpus.get((node, index))
        return heat.throttle_c if heat is not None else DEFAULT_THROTTLE_C

    def update(self, tick: Tick) -> list[Finding] | None:
        self._sample(tick)
        if self._next_eval is None:  # the first judging half a period in (no GPU is judged before a minute of load)
            self._next_eval = tick.ts + self.evaluate_every_s / 2  # between the memory forecast's (see the class)
        if tick.ts < self._next_eval:
            return None
        self._next_eval = tick.ts + self.evaluate_every_s
        out = []
        for key, heat in self._gpus.items():
            finding = self._judge(key, heat, tick)
            if finding is not None:
                out.append(finding)
        return out

    def _sample(self, tick: Tick) -> None:
        ts, known = tick.ts, self._gpus
        for g, state in tick.gpu_states:
            temp = g.temperature_celsius
            if temp is None:
                continue
            heat = known.get(state.key)
            if heat is None:
                heat = known[state.key] = _GpuHeat()
            if state.last_thermal_ts == ts:  # throttling now: this is where its slowdown engages
                heat.throttle_c = max(MIN_THROTTLE_C, min(heat.throttle_c, temp))
            if state.busy_since is None:
                heat.idle(ts)
                continue
            if not heat.counts(temp, state.busy_for(ts)):  # warming up after idling is not a risk
                continue
            heat.forecaster.add(ts, temp)
            if g.power_watts is not None:
                heat.power.add(ts, g.power_watts)
            heat.learn(temp, self.every_s)

    def _judge(self, key: GpuKey, heat: _GpuHeat, tick: Tick) -> Finding | None:
        state = tick.node.gpus.get(key)
        if state is None or not len(heat.forecaster.trend) or not heat.baseline.ready:
            return None
        if state.last_thermal_ts is not None and tick.ts - state.last_thermal_ts < 30.0:
            return None
        forecast = heat.forecaster.eta(heat.throttle_c)
        if forecast is None:
            return None
        eta, slope, now, window = forecast
        if slope <= 0 or now < heat.usual_high + self.margin_c:
            return None  # not above its usual full-load temperature: warming back up is no risk
        longest = heat.forecaster.trend.fit(heat.forecaster.spans[-1])
        if longest is not None and longest[0] <= 0:
            return None  # cooling over minutes, warming over seconds: a rebound of load, not a trend
        if state.limit and heat.power.window(POWER_SPAN_S)[2] >= self.load_rise * state.limit:
            return None  # it draws more power: the load grew, the temperature follows and will settle
        score = min(SCORE_CAP, self.horizon_s / max(eta, 1.0))
        if score < self.report_floor:
            return None
        severity = CRITICAL if eta <= self.critical_s else WARNING
        evidence: dict[str, Any] = {
            "eta_s": round(eta, 1),
            "temperature_celsius": round(now, 1),
            "throttle_celsius": heat.throttle_c,
            "rate_celsius_per_min": round(slope * 60, 2),
            "usual_celsius": round(heat.usual_high, 1),
            "window_s": window,
        }
        message = (
            f"{gpu_label(key)} is heating {slope * 60:.1f} °C/min ({now:.0f} °C now) and will reach its "
            f"{heat.throttle_c:.0f} °C throttle point in ~{minutes(eta)}"
        )
        return Finding("thermal_throttle_risk", score, severity, message, gpu_subject(key), evidence)
