"""Predictive signals: oom_risk (GPU and host) and thermal_throttle_risk, with the ETA in the evidence."""

from __future__ import annotations

import pytest

from tests.diagnose.builders import GIB, GPU_TOTAL, T0, Harness, job
from trainpulse_otel.diagnose.detectors import GpuOomRisk, HostOomRisk, ThermalThrottleRisk
from trainpulse_otel.samples import Frame


def gpu_leak(t: float, start: float = 60.0, per_s: float = 25e6, gpu: int = 3):
    used = int(0.78 * GPU_TOTAL + max(0.0, t - start) * per_s)
    return job(t, gpus={gpu: {"memory_used_bytes": min(used, GPU_TOTAL)}})


def test_a_gpu_leak_is_forecast_minutes_ahead_with_its_eta():
    h = Harness(GpuOomRisk()).run(range(200), gpu_leak)
    raised = h.raised("oom_risk")
    assert raised and raised[0].subject == {"gpu_index": 3}
    assert raised[0].ts - T0 <= 60 + 30
    eta = h.active()[0].evidence["eta_s"]
    true_eta = (0.995 - 0.78) * GPU_TOTAL / 25e6 - (200 - 1 - 60)
    assert eta == pytest.approx(true_eta, rel=0.15)
    assert "will run out in ~" in h.active()[0].message


def test_a_one_off_allocation_step_is_not_a_leak():
    h = Harness(GpuOomRisk()).run(
        range(300), lambda t: job(t, gpus={3: {"memory_used_bytes": int((0.78 if t < 100 else 0.86) * GPU_TOTAL)}})
    )
    assert h.raised() == []


def test_stable_gpu_memory_raises_nothing():
    assert Harness(GpuOomRisk()).run(range(600), job).raised() == []


def host_leak(t: float, per_s: float = 2 * GIB, start: float = 60.0):
    avail = (1400 - max(0.0, t - start) * per_s / GIB) * GIB
    return job(t, host_changes={"memory_available_bytes": int(max(avail, 6 * GIB))})


def test_a_host_leak_is_forecast_within_seconds_and_escalates():
    h = Harness(HostOomRisk()).run(range(400), host_leak)
    raised = h.raised("oom_risk")
    assert raised[0].subject == {"hostname": "node-000"}
    assert raised[0].ts - T0 <= 60 + 15
    assert h.active()[0].severity == "critical"  # under 10 min to go
    true_eta = (1400 - 20.5) / 2 - (400 - 1 - 60)
    assert h.active()[0].evidence["eta_s"] == pytest.approx(true_eta, rel=0.1)


def test_when_the_job_dies_as_forecast_the_signal_says_memory_ran_out():
    def frame(t):
        if t < 700:
            return host_leak(t)
        return job(
            t,
            gpu_changes={"utilization_percent": 0.0, "memory_used_bytes": 512 * 1024**2},
            host_changes={"memory_available_bytes": 1800 * GIB},
            with_training=False,
        )

    h = Harness(HostOomRisk()).run(range(800), frame)
    assert h.cleared() == []
    signal = h.active()[0]
    assert "ran out" in signal.message and signal.evidence["eta_s"] == 0.0


def test_when_training_resumes_the_post_mortem_clears():
    def frame(t):
        if t < 700:
            return host_leak(t)
        if t < 760:
            return job(
                t,
                gpu_changes={"utilization_percent": 0.0},
                with_training=False,
                host_changes={"memory_available_bytes": 1800 * GIB},
            )
        return job(t, host_changes={"memory_available_bytes": 1800 * GIB})

    h = Harness(HostOomRisk()).run(range(900), frame)
    assert h.active() == [] and len(h.cleared()) == 1


def test_host_memory_noise_raises_nothing():
    import math

    def wave(t: float) -> Frame:
        return job(t, host_changes={"memory_available_bytes": int((1400 + 3 * math.sin(t / 200)) * GIB)})

    assert Harness(HostOomRisk()).run(range(900), wave).raised() == []


def warming(t: float, start: float = 60.0, per_s: float = 1 / 15):
    return job(t, gpus={2: {"temperature_celsius": float(round(67.0 + max(0.0, t - start) * per_s))}})


def test_a_gpu_warming_toward_its_throttle_point_is_forecast():
    h = Harness(ThermalThrottleRisk()).run(range(240), warming)
    raised = h.raised("thermal_throttle_risk")
    assert raised and raised[0].subject == {"gpu_index": 2}
    assert raised[0].ts - T0 <= 60 + 60
    eta = h.active()[0].evidence["eta_s"]
    assert eta == pytest.approx((87 - 67 - (240 - 60) / 15) * 15, rel=0.3)


@pytest.mark.parametrize("idle_s", [40, 90])  # a save's short idle, and one longer than the series is held across
def test_a_gpu_warming_back_up_after_idling_is_no_risk(idle_s):
    back = 100 + idle_s

    def frame(t):
        if 100 <= t < back:
            return job(t, gpus={2: {"utilization_percent": 0.0, "temperature_celsius": 45.0}})
        return job(
            t,
            gpus={2: {"temperature_celsius": float(round(67 - max(0.0, 22 - (t - back) * 0.5)))}}
            if t >= back
            else None,
        )

    assert Harness(ThermalThrottleRisk()).run(range(360), frame).raised() == []


def duty_cycled(warming_c_per_min: float, busy_s: int = 36, idle_s: int = 25, tau_s: float = 12.0):
    """GPU 2 of a checkpointing job from 60 s on: busy ``busy_s``, idle ``idle_s`` (a save), its temperature
    following its load with a ``tau_s`` time constant toward 67 °C busy (plus ``warming_c_per_min`` of failing
    cooling since 60 s) and 40 °C idle; read as whole degrees."""
    temp = {"c": 67.0}

    def frame(t: float) -> Frame:
        busy = t < 60 or (t - 60) % (busy_s + idle_s) < busy_s
        target = 67.0 + warming_c_per_min * max(0.0, t - 60) / 60.0 if busy else 40.0
        temp["c"] += (target - temp["c"]) / tau_s
        load = {} if busy else {"utilization_percent": 0.0, "power_watts": 95.0}
        return job(t, gpus={2: {**load, "temperature_celsius": float(round(temp["c"]))}})

    return frame


def test_a_duty_cycled_gpu_whose_cooling_fails_is_forecast_over_its_busy_envelope():
    h = Harness(ThermalThrottleRisk()).run(range(420), duty_cycled(3.0))
    raised = h.raised("thermal_throttle_risk")
    assert raised and raised[0].subject == {"gpu_index": 2}
    assert raised[0].ts - T0 <= 60 + 240  # within a few of its 61-s cycles, long before it throttles (~ 7 min)


def test_a_duty_cycled_gpu_rebounding_after_every_save_is_no_risk():
    assert Harness(ThermalThrottleRisk()).run(range(900), duty_cycled(0.0)).raised() == []


def test_the_throttle_point_is_learned_from_observed_throttling():
    det = ThermalThrottleRisk()
    h = Harness(det)
    h.feed(job(t, gpus={2: {"temperature_celsius": 80.0, "throttle_reasons": ("sw_thermal",)}}) for t in range(12))
    assert det.throttle_celsius(2) == 80.0 and det.throttle_celsius(7) == 87.0


def test_a_quick_rebound_after_a_lighter_spell_is_no_risk():
    def temp(t):  # cools 6 °C over 3 minutes (lighter work), then warms 4 °C in 40 s
        if t < 100:
            return 67.0
        if t < 280:
            return 67.0 - (t - 100) / 30.0
        return 61.0 + min(4.0, (t - 280) / 10.0)

    h = Harness(ThermalThrottleRisk()).run(
        range(360), lambda t: job(t, gpus={2: {"temperature_celsius": float(round(temp(t)))}})
    )
    assert h.raised() == []


def test_the_whole_node_warming_at_the_same_power_is_a_risk_on_every_gpu():
    def room(t: float) -> Frame:
        return job(t, gpu_changes={"temperature_celsius": float(round(66.0 + max(0.0, t - 60) / 12.0))})

    h = Harness(ThermalThrottleRisk()).run(range(200), room)
    assert {x.subject["gpu_index"] for x in h.raised()} == set(range(8))


def test_more_load_warming_a_gpu_to_a_new_level_is_no_risk():
    def frame(t):  # util and power step up at 100 s; the temperature follows with a 12 s time constant
        if t < 100:
            return job(t)
        rise = 8.0 * (1 - 2.718 ** (-(t - 100) / 12.0))
        return job(t, gpus={4: {"temperature_celsius": float(round(67.0 + rise)), "power_watts": 690.0}})

    assert Harness(ThermalThrottleRisk()).run(range(300), frame).raised() == []


def startup_allocation(t: float, begin: float = 0.0, gib: float = 1.0, over_s: float = 10.0):
    """A 24 GiB host whose job allocates ``gib`` over ``over_s`` seconds from ``begin`` on, then stays flat."""
    filled = gib * min(1.0, max(0.0, t - begin) / over_s)
    return job(t, host_changes={"memory_total_bytes": 24 * GIB, "memory_available_bytes": int((22 - filled) * GIB)})


def test_a_jobs_start_up_allocation_is_no_leak():
    # measured on a real 4-rank gloo job: ~1 GB in its first 10 s raised a critical oom_risk for the run
    assert Harness(HostOomRisk()).run(range(300), startup_allocation).raised() == []


def test_a_ramp_that_ends_clears_instead_of_holding_its_eta():
    h = Harness(HostOomRisk()).run(range(400), lambda t: startup_allocation(t, begin=120.0, gib=12.0, over_s=60.0))
    assert h.raised("oom_risk")  # 12 GiB in a minute, heading for the limit: a real risk while it lasts
    cleared = h.cleared("oom_risk")
    # gone once the 2-minute fit's recent half is flat (~50 s), plus the policy's 30 s before clearing
    assert cleared and cleared[0].ts - T0 < 180 + 90
    assert h.active() == []
