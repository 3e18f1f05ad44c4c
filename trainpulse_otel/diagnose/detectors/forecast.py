"""Predictive signals: memory running out (``oom_risk``), a GPU reaching its throttle point (``thermal_throttle_risk``).

Both fit straight lines to the recent past over several windows (30 s, 2 min
and 10 min for memory; 1 and 3 min for temperature) and take the earliest time
to the limit among the fits they trust: enough points, a slope that is not
noise (t statistic >= 6), a line that explains the data (r² — a one-off jump
in memory is a step, not a trend, and fits a line badly) and a material change
over the window. The short window sees a sudden leak within seconds; the long
ones see slow leaks that hide in noise at short range.

Points are thinned to one every 2 s and the fits run every 4 s: a forecast in
minutes needs no more, and it keeps the tick cheap.
"""

from __future__ import annotations

from typing import Any, Iterable

from ..findings import Finding, Policy
from ..stats import RecentMedian, RobustBaseline, Trend
from ..tick import THERMAL_REASONS, Tick
from ..types import CRITICAL, WARNING
from .base import REPORT_FLOOR, SCORE_CAP, BaseDetector
from .memory import GIB, host_subject

SAMPLE_EVERY_S = 2.0
EVALUATE_EVERY_S = 4.0
MIN_POINTS = 8
MIN_T_STAT = 6.0


class Forecaster:
    """A series fitted over several windows; ``eta`` is the earliest trusted time to a limit."""

    __slots__ = ("trends", "min_r2", "min_change")

    def __init__(self, windows: Iterable[tuple[float, float]], min_r2: float, min_change: float) -> None:
        self.trends = [Trend(span, every) for span, every in windows]
        self.min_r2 = min_r2
        self.min_change = min_change

    def add(self, ts: float, y: float) -> None:
        for trend in self.trends:
            trend.add(ts, y)

    def eta(self, limit: float) -> tuple[float, float, float, float] | None:
        """``(seconds to limit, slope per second, fitted value now, window s)`` of the earliest trusted fit."""
        best = None
        for trend in self.trends:
            if len(trend) < MIN_POINTS or trend.covered_s < 0.5 * trend.span_s:
                continue
            fit = trend.fit()
            if fit is None:
                continue
            slope, now, r2 = fit
            if slope == 0 or r2 < self.min_r2 or trend.t_stat(fit) < MIN_T_STAT:
                continue
            if abs(slope) * trend.covered_s < self.min_change:
                continue
            if _past(now, limit, slope):
                eta = 0.0
            elif (limit - now) * slope < 0:
                continue  # moving away from the limit
            else:
                eta = (limit - now) / slope
            if best is None or eta < best[0]:
                best = (eta, slope, now, trend.span_s)
        return best


def _past(now: float, limit: float, slope: float) -> bool:
    """True when ``now`` is already at or past ``limit`` in the direction the series moves."""
    return now >= limit if slope > 0 else now <= limit


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"


class _Memory:
    """One memory series (a GPU's used fraction or the host's available fraction)."""

    __slots__ = ("forecaster", "limit", "alarm", "last")

    def __init__(self, forecaster: Forecaster, limit: float) -> None:
        self.forecaster = forecaster
        self.limit = limit
        self.alarm: tuple[float, float] | None = None  # (ts, eta) of the last forecast within the horizon
        self.last: float | None = None


class OomRisk(BaseDetector):
    """``oom_risk``: GPU or host memory forecast to run out.

    GPU: ``used / total`` trending up to 99.5 % (r² >= 0.9: allocations grow
    in steps, and one step is not a leak). Host: ``available / total``
    trending down to 1 % (r² >= 0.8). Both need the trend to have moved 0.5 %
    of the total over its window. Warning when the forecast time to
    exhaustion is under 30 min, critical under 10 min; the evidence carries
    ``eta_s``, the rate and the window. Subject: the GPU, or the host.

    When the job stops right after such a forecast — every GPU idle, no step,
    and the memory suddenly freed — the signal stays, critical, saying memory
    ran out, until training reports again: the dashboard then tells why the
    job died instead of going quiet.
    """

    name = "oom"
    signals = ("oom_risk",)
    policy = Policy(raise_evidence=2.0, clear_after_s=30.0)
    horizon_s = 1800.0
    critical_s = 600.0

    def __init__(self) -> None:
        self._gpus: dict[int, _Memory] = {}
        self._host: _Memory | None = None
        self._next_sample = self._next_eval = float("-inf")
        self._stopped_since: float | None = None

    def update(self, tick: Tick) -> list[Finding] | None:
        ts = tick.ts
        if tick.report is not None or not tick.paused:
            self._stopped_since = None
        elif self._stopped_since is None:
            self._stopped_since = ts
        if ts >= self._next_sample:
            self._next_sample = ts + SAMPLE_EVERY_S
            self._sample(tick)
        if ts < self._next_eval:
            return None
        self._next_eval = ts + EVALUATE_EVERY_S
        out = []
        for index, memory in self._gpus.items():
            self._judge(out, memory, ts, {"gpu_index": index}, f"GPU {index} memory")
        if self._host is not None:
            self._judge(out, self._host, ts, host_subject(tick), "host memory")
        return out

    def _sample(self, tick: Tick) -> None:
        for g in tick.gpus:
            if g.memory_used_bytes is None or not g.memory_total_bytes:
                continue
            memory = self._gpus.get(g.index)
            if memory is None:
                memory = self._gpus[g.index] = _Memory(_memory_forecaster(0.9), 0.995)
            memory.last = y = g.memory_used_bytes / g.memory_total_bytes
            memory.forecaster.add(tick.ts, y)
        host = tick.host
        if host is not None and host.memory_available_bytes is not None and host.memory_total_bytes:
            if self._host is None:
                self._host = _Memory(_memory_forecaster(0.8), max(0.01, GIB / host.memory_total_bytes))
            self._host.last = y = host.memory_available_bytes / host.memory_total_bytes
            self._host.forecaster.add(tick.ts, y)

    def _judge(self, out: list[Finding], memory: _Memory, ts: float, subject: dict, what: str) -> None:
        ran_out = self._ran_out(memory, ts)
        if ran_out is not None:
            out.append(Finding("oom_risk", 2.0, CRITICAL, f"{what} ran out: training stopped {ran_out}",
                               subject, {"eta_s": 0.0, "stopped_at": self._stopped_since}))
            return
        forecast = memory.forecaster.eta(memory.limit)
        if forecast is None:
            return
        eta, slope, now, window = forecast
        score = min(SCORE_CAP, self.horizon_s / max(eta, 1.0))
        if score < REPORT_FLOOR:
            return
        if score >= 1.0:
            memory.alarm = (ts, eta)
        severity = CRITICAL if eta <= self.critical_s else WARNING
        evidence = {"eta_s": round(eta, 1), "rate_fraction_per_s": round(slope, 7),
                    "fraction_now": round(now, 4), "limit_fraction": round(memory.limit, 4), "window_s": window}
        message = f"{what} will run out in ~{_minutes(eta)} at the current trend"
        out.append(Finding("oom_risk", score, severity, message, subject, evidence))

    def _ran_out(self, memory: _Memory, ts: float) -> str | None:
        """How long ago training stopped, if it stopped when this memory was forecast to run out and was freed."""
        stopped, alarm = self._stopped_since, memory.alarm
        if stopped is None or alarm is None or ts - stopped < 5.0 or memory.last is None:
            return None
        alarm_ts, eta = alarm
        if not alarm_ts - 60.0 <= stopped <= alarm_ts + eta + 120.0:
            return None
        freed = memory.last < 0.5 * memory.limit if memory.limit > 0.5 else memory.last > 2.0 * memory.limit + 0.05
        return f"{ts - stopped:.0f} s ago, when the forecast said it would" if freed else None


def _memory_forecaster(min_r2: float) -> Forecaster:
    return Forecaster(((30.0, SAMPLE_EVERY_S), (120.0, SAMPLE_EVERY_S), (600.0, 10.0)), min_r2, 0.005)


#: Where a GPU's thermal slowdown engages when it has never been seen throttling (H100/A100 SXM ~87–90 °C).
DEFAULT_THROTTLE_C = 87.0
#: Seconds of load before a GPU's temperature is judged: it settles within ~3 thermal time constants.
SETTLE_S = 60.0
#: The lowest throttle point learned from observation (a reading below it is a sensor quirk).
MIN_THROTTLE_C = 70.0


class _GpuHeat:
    __slots__ = ("recent", "baseline", "forecaster", "throttle_c")

    def __init__(self) -> None:
        self.recent = RecentMedian(3)
        self.baseline = RobustBaseline(alpha=0.02, warmup=15, band=4.0, adopt=-1, min_scale=0.5)
        self.forecaster = _heat_forecaster()
        self.throttle_c = DEFAULT_THROTTLE_C


def _heat_forecaster() -> Forecaster:
    return Forecaster(((60.0, SAMPLE_EVERY_S), (180.0, 4.0)), min_r2=0.5, min_change=1.5)


class ThermalThrottleRisk(BaseDetector):
    """``thermal_throttle_risk``: a GPU's temperature forecast to reach its throttle point.

    Statistic per GPU: the temperature (median of 3 readings) fitted over 1
    and 3 minutes while the GPU is busy; the throttle point is 87 °C, or the
    lowest temperature this GPU was seen thermally throttled at. Judged only
    after a minute of load (warming back up after an idle spell is not a risk)
    when the GPU runs at least 1 °C above its own busy baseline, is not already
    throttling (that is ``thermal_instability``), and rose 1.5 °C or more over
    the window. Warning
    when the forecast is under 10 min, critical under 2 min; ``eta_s`` in the
    evidence. Subject: the GPU.
    """

    name = "thermal_risk"
    signals = ("thermal_throttle_risk",)
    policy = Policy(raise_evidence=2.0, clear_after_s=60.0)
    horizon_s = 600.0
    critical_s = 120.0
    margin_c = 1.0

    def __init__(self) -> None:
        self._gpus: dict[int, _GpuHeat] = {}
        self._next_sample = self._next_eval = float("-inf")

    def update(self, tick: Tick) -> list[Finding] | None:
        ts = tick.ts
        if ts >= self._next_sample:
            self._next_sample = ts + SAMPLE_EVERY_S
            self._sample(tick)
        if ts < self._next_eval:
            return None
        self._next_eval = ts + EVALUATE_EVERY_S
        out = []
        for index, heat in self._gpus.items():
            finding = self._judge(index, heat, tick)
            if finding is not None:
                out.append(finding)
        return out

    def _sample(self, tick: Tick) -> None:
        for g in tick.gpus:
            if g.temperature_celsius is None:
                continue
            state = tick.node.gpus[g.index]
            heat = self._gpus.get(g.index)
            if heat is None:
                heat = self._gpus[g.index] = _GpuHeat()
            temp = heat.recent.add(g.temperature_celsius)
            if THERMAL_REASONS.intersection(state.reasons):
                heat.throttle_c = max(MIN_THROTTLE_C, min(heat.throttle_c, temp))
            if state.busy_for(tick.ts) < SETTLE_S:  # warming up after idling is not a risk
                if len(heat.forecaster.trends[0]):
                    heat.forecaster = _heat_forecaster()
                continue
            heat.forecaster.add(tick.ts, temp)
            heat.baseline.update(temp)

    def _judge(self, index: int, heat: _GpuHeat, tick: Tick) -> Finding | None:
        state = tick.node.gpus.get(index)
        if state is None or state.busy_for(tick.ts) < SETTLE_S or not heat.baseline.ready:
            return None
        if state.last_thermal_ts is not None and tick.ts - state.last_thermal_ts < 30.0:
            return None
        forecast = heat.forecaster.eta(heat.throttle_c)
        if forecast is None:
            return None
        eta, slope, now, window = forecast
        if slope <= 0 or now < heat.baseline.loc + self.margin_c:
            return None
        score = min(SCORE_CAP, self.horizon_s / max(eta, 1.0))
        if score < REPORT_FLOOR:
            return None
        severity = CRITICAL if eta <= self.critical_s else WARNING
        evidence: dict[str, Any] = {"eta_s": round(eta, 1), "temperature_celsius": round(now, 1),
                                    "throttle_celsius": heat.throttle_c, "rate_celsius_per_min": round(slope * 60, 2),
                                    "baseline_celsius": round(heat.baseline.loc, 1), "window_s": window}
        message = (f"GPU {index} is heating {slope * 60:.1f} °C/min ({now:.0f} °C now) and will reach its "
                   f"{heat.throttle_c:.0f} °C throttle point in ~{_minutes(eta)}")
        return Finding("thermal_throttle_risk", score, severity, message, {"gpu_index": index}, evidence)
