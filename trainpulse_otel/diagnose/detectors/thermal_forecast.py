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
from ..spec import GPU, SignalSpec
from ..stats import RobustBaseline, Trend, median
from ..thresholds import CELSIUS, CONVENTION, MEASURED, PHYSICS, SECONDS, SHARE, T_STAT, Knob, Thresholds
from ..tick import Tick
from ..types import CRITICAL, WARNING, Finding, Policy
from .base import SCORE_CAP, BaseDetector
from .forecast import Forecaster, minutes

THERMAL_THROTTLE_RISK = SignalSpec(
    "thermal_throttle_risk",
    "a GPU's temperature forecast to reach its throttle point",
    GPU,
    0.06,
    "compute",
    predictive=True,
    policy=Policy(raise_evidence=2.0, clear_after_s=60.0),
)
#: The temperature's windows (s): a least-squares fit over each shrugs off a one-reading sensor blip.
HEAT_SPANS = (60.0, 180.0)
#: Seconds over which a rise in power draw counts as more load (the longest temperature fit).
POWER_SPAN_S = 180.0
#: Busy readings whose median is where a GPU left off before an idle spell.
LEFT_READINGS = 5
#: The busy baseline: a robust EWMA (weight, seed readings, band in sigmas, smallest sigma in °C).
BASELINE = {"alpha": 0.02, "warmup": 15, "band": 4.0, "min_scale": 0.5}


class _GpuHeat:
    """One GPU's temperature and power series, its busy baseline and usual peak, its throttle point."""

    __slots__ = (
        "baseline",
        "every_s",
        "forecaster",
        "idle_since",
        "left",
        "power",
        "rebounding",
        "t",
        "throttle_c",
        "usual_high",
    )

    def __init__(self, t: Thresholds, every_s: float) -> None:
        self.t, self.every_s = t, every_s
        self.baseline = RobustBaseline(**BASELINE)
        self.forecaster = self._forecaster()
        self.power = self._power_trend()
        self.throttle_c = t.default_throttle_c
        self.usual_high = -math.inf
        self.idle_since: float | None = None
        #: The last readings that counted: their median is where the GPU left off before an idle spell (read only
        #: while it rebounds, so not worked out on every reading).
        self.left: deque[float] = deque(maxlen=LEFT_READINGS)
        self.rebounding = False

    def _forecaster(self) -> Forecaster:
        t = self.t
        return Forecaster(HEAT_SPANS, self.every_s, t, min_r2=t.min_r2, min_change=t.min_rise_c)

    def _power_trend(self) -> Trend:
        """Power draw read as often as the temperature: the series' size is set by the span, not the tick."""
        return Trend(POWER_SPAN_S, self.every_s)

    def idle(self, ts: float) -> None:
        """The GPU idles: its series is held across a short spell (a save) and started afresh after a long one."""
        if self.idle_since is None:
            self.idle_since, self.rebounding = ts, bool(len(self.forecaster.trend))
        elif ts - self.idle_since > self.t.short_idle_s and len(self.forecaster.trend):
            self.forecaster, self.power = self._forecaster(), self._power_trend()
            self.rebounding = False

    def counts(self, temp: float, busy_s: float) -> bool:
        """Whether a busy reading is on the GPU's trend: after ``settle_s`` of load, or — resuming from a short
        idle — once it has warmed back to where it left off (so a duty-cycled GPU, a checkpointing job's, is fitted
        over the envelope of its busy temperatures, not over its rebounds). All the way back: a die warms most of
        the way in seconds and its last degree or two over a minute (its heatsink's), and counting from 1 °C below
        forecast a throttle from one routine save of a healthy hour (~2 °C/min over that last minute)."""
        self.idle_since = None
        settled = busy_s >= self.t.settle_s
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
            self.usual_high = max(self.usual_high - self.t.usual_decay_c_per_s * dt, base.loc)


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
    signals = (THERMAL_THROTTLE_RISK,)
    knobs = (
        Knob(
            "horizon_s",
            900.0,
            SECONDS,
            CONVENTION,
            "warning when the throttle point is forecast within 15 min",
            1,
            at_least="critical_s",
        ),
        Knob("critical_s", 180.0, SECONDS, CONVENTION, "critical within 3 min: about one thermal time constant", 0),
        Knob(
            "default_throttle_c",
            87.0,
            CELSIUS,
            PHYSICS,
            "where thermal slowdown engages on a GPU never seen throttling (H100/A100 SXM: ~87-90 °C)",
            0,
        ),
        Knob("min_throttle_c", 70.0, CELSIUS, PHYSICS, "the lowest throttle point learned (lower: a sensor quirk)", 0),
        Knob(
            "margin_c",
            0.5,
            CELSIUS,
            CONVENTION,
            "the fitted temperature must be this far above the GPU's usual full-load temperature",
            0,
        ),
        Knob(
            "usual_decay_c_per_s",
            1.0 / 600.0,
            "°C/s",
            CONVENTION,
            "how fast the usual full-load temperature is forgotten (1 °C per 10 min)",
            0,
        ),
        Knob(
            "load_rise",
            0.05,
            SHARE,
            CONVENTION,
            "a power rise over the last 3 min this large (of the limit) means more load, not worse cooling",
            0,
            1,
        ),
        Knob("min_rise_c", 1.5, CELSIUS, CONVENTION, "the least a fit may rise over its window", 0),
        Knob("min_r2", 0.5, SHARE, CONVENTION, "r² of the fit: temperatures are read as whole degrees", 0, 1),
        Knob("min_t", 5.0, T_STAT, CONVENTION, "the fitted slope's t statistic: a trend, not noise", 0),
        Knob(
            "min_recent_rate",
            0.25,
            SHARE,
            CONVENTION,
            "the later half of a window must still warm at this share of the fitted rate",
            0,
            1,
        ),
        Knob(
            "settle_s",
            60.0,
            SECONDS,
            PHYSICS,
            "seconds of load before a GPU is judged: it settles within ~3 thermal time constants (~12 s each)",
            0,
        ),
        Knob(
            "short_idle_s",
            60.0,
            SECONDS,
            MEASURED,
            "the longest idle spell a series is read across (a checkpoint save); after a longer one it starts afresh",
            0,
        ),
        Knob(
            "throttled_within_s",
            30.0,
            SECONDS,
            CONVENTION,
            "a GPU that throttled this recently is thermal_instability's, not at risk",
            0,
        ),
    )
    every_s = 2.0
    evaluate_every_s = 4.0

    def __init__(self, thresholds: Thresholds | None = None) -> None:
        super().__init__(thresholds)
        t = self.thresholds
        self.horizon_s, self.critical_s, self.margin_c, self.load_rise = (
            t.horizon_s,
            t.critical_s,
            t.margin_c,
            t.load_rise,
        )
        self._gpus: dict[GpuKey, _GpuHeat] = {}
        self._next_eval: float | None = None

    def throttle_celsius(self, index: int, node: str | None = None) -> float:
        """The temperature GPU ``index`` (of ``node``; None: this daemon's own) is expected to throttle at."""
        heat = self._gpus.get((node, index))
        return heat.throttle_c if heat is not None else self.thresholds.default_throttle_c

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
                heat = known[state.key] = _GpuHeat(self.thresholds, self.every_s)
            if state.last_thermal_ts == ts:  # throttling now: this is where its slowdown engages
                heat.throttle_c = max(self.thresholds.min_throttle_c, min(heat.throttle_c, temp))
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
        if state.last_thermal_ts is not None and tick.ts - state.last_thermal_ts < self.thresholds.throttled_within_s:
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
        return Finding(THERMAL_THROTTLE_RISK.name, score, severity, message, gpu_subject(key), evidence)
