"""GPU and host detectors alone: memory pressure and thermal instability."""

from __future__ import annotations

from tests.diagnose.builders import GIB, GPU_TOTAL, T0, Harness, job
from trainpulse_otel.diagnose.detectors import GpuMemoryPressure, HostMemoryPressure, ThermalInstability


def used(frac: float) -> dict:
    return {"memory_used_bytes": int(frac * GPU_TOTAL)}


def test_gpu_memory_nearly_full_is_pressure_on_that_gpu():
    h = Harness(GpuMemoryPressure()).run(range(60), lambda t: job(t, gpus={3: used(0.96)} if t >= 20 else None))
    assert [dict(x.subject) for x in h.raised()] == [{"gpu_index": 3}]
    assert 20 < h.first_raise_s() <= 26


def test_a_steady_high_level_is_not_pressure_but_fast_growth_is():
    steady = Harness(GpuMemoryPressure()).run(range(200), lambda t: job(t, gpu_changes=used(0.90)))
    assert steady.raised() == []
    growing = Harness(GpuMemoryPressure()).run(
        range(200), lambda t: job(t, gpu_changes=used(min(0.93, 0.78 + max(0.0, t - 60) * 0.002)))
    )
    first = growing.first_raise_s("memory_pressure")
    assert first is not None and first < 60 + 40  # 84 % after 30 s of growth, 6 points above its plateau
    assert "up from 78%" in growing.raised()[0].message


def test_memory_still_being_allocated_when_the_trace_starts_is_no_growth():
    h = Harness(GpuMemoryPressure()).run(range(120), lambda t: job(t, gpu_changes=used(min(0.9, 0.1 + t * 0.1))))
    assert h.raised() == []


def test_memory_pressure_clears_after_memory_is_freed():
    h = Harness(GpuMemoryPressure()).run(range(200), lambda t: job(t, gpus={1: used(0.97 if t < 60 else 0.7)}))
    assert len(h.raised()) == 1 and len(h.cleared()) == 1


def test_host_memory_low_is_pressure_on_the_host():
    h = Harness(HostMemoryPressure()).run(
        range(60), lambda t: job(t, host_changes={"memory_available_bytes": 100 * GIB} if t >= 10 else None)
    )
    assert h.raised()[0].subject == {"hostname": "node-000"}
    assert h.active()[0].severity == "critical"  # 100 GiB of 2 TiB is under 5 %


def hot(index: int, temp: float, reasons: tuple = ()) -> dict:
    return {index: {"temperature_celsius": temp, "throttle_reasons": reasons}}


def test_a_three_second_temperature_blip_is_not_instability():
    h = Harness(ThermalInstability()).run(range(200), lambda t: job(t, gpus=hot(5, 78.0) if 100 <= t < 103 else None))
    assert h.raised() == []


def test_thermal_throttling_is_instability_on_that_gpu():
    h = Harness(ThermalInstability()).run(
        range(200), lambda t: job(t, gpus=hot(5, 87.0, ("sw_thermal",)) if t >= 100 else None)
    )
    raised = h.raised("thermal_instability")
    assert raised and raised[0].subject == {"gpu_index": 5}
    assert 100 < raised[0].ts - T0 <= 106
    assert "thermally throttling (sw_thermal)" in raised[0].message


def test_throttle_cycles_do_not_flap():
    def frame(t):
        on = t >= 100 and (t // 20) % 2 == 0  # 20 s throttled, 20 s not
        return job(t, gpus=hot(5, 87.0 if on else 85.0, ("sw_thermal",) if on else ()))

    h = Harness(ThermalInstability()).run(range(400), frame)
    assert [x.severity for x in h.raised()] == ["warning", "critical"]  # escalates once, never clears
    assert h.cleared() == []


def test_a_gpu_heating_fast_alone_is_instability_before_it_throttles():
    def ramp(t: float) -> dict:  # +0.4 °C/s to 85 °C
        return hot(5, 67.0 + min(18.0, max(0.0, t - 100) * 0.4))

    h = Harness(ThermalInstability()).run(range(200), lambda t: job(t, gpus=ramp(t)))
    first = h.first_raise_s("thermal_instability")
    assert first is not None and first <= 100 + 25
    assert "faster than its peers" in h.raised()[0].message


def test_every_gpu_warming_together_is_load_not_instability():
    h = Harness(ThermalInstability()).run(
        range(200), lambda t: job(t, gpu_changes={"temperature_celsius": 60.0 + min(15.0, max(0.0, t - 100) * 0.5)})
    )
    assert h.raised() == []


def test_warming_up_after_an_idle_spell_is_not_judged():
    def frame(t):
        if 100 <= t < 130:
            return job(t, gpus={5: {"utilization_percent": 0.0, "temperature_celsius": 45.0}})
        return job(t, gpus=hot(5, 67.0 - max(0.0, 22.0 - (t - 130) * 1.5)) if t >= 130 else None)

    h = Harness(ThermalInstability()).run(range(260), frame)
    assert h.raised() == []


def test_a_slow_drift_is_left_to_the_forecast():
    h = Harness(ThermalInstability()).run(
        range(400), lambda t: job(t, gpus=hot(2, 67.0 + max(0.0, t - 60) / 15.0))
    )  # 1 °C per 15 s
    assert h.raised() == []
