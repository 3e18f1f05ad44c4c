"""``link_degradation``: PCIe, NVLink and InfiniBand links judged by their counters' rates and trained state."""

from __future__ import annotations

from dataclasses import replace

from tests.diagnose.builders import T0, Harness, job
from trainpulse_otel.diagnose.detectors.links import LinkDegradation
from trainpulse_otel.runtime import build_pipeline, discover
from trainpulse_otel.samples import PORT_COUNTERS, PortSample

HEALTHY_GPU = {"pcie_replay_errors": 0, "pcie_link_gen": 5, "pcie_link_gen_max": 5, "pcie_link_width": 16,
               "pcie_link_width_max": 16, "nvlink_crc_errors": 0, "nvlink_links_down": 0}  # fmt: skip


def port(t: float, device: str = "mlx5_0", state: str = "ACTIVE", node: str | None = None, **counters: int):
    values = dict.fromkeys(PORT_COUNTERS, 0) | counters
    return PortSample(device, 1, state, "LinkUp" if state == "ACTIVE" else "Disabled", 200.0, "InfiniBand",
                      tuple(values.items()), node)  # fmt: skip


def frame(t: float, ports: tuple[PortSample, ...] = (), **gpu3) -> object:
    return replace(job(t, gpu_changes=HEALTHY_GPU, gpus={3: gpu3}, with_training=False), ports=ports)


def test_symbol_errors_climbing_at_50_a_second_name_the_port_and_host_within_two_intervals():
    def at(t):  # node-7's mlx5_1 symbol_error climbs 50/s from t=10 (a job daemon's view); the others stay clean
        errors = int(max(0.0, t - 10) * 50)
        return frame(t, ports=(port(t), port(t, "mlx5_1"), port(t, "mlx5_1", node="node-7", symbol_error=errors)))

    h = Harness(LinkDegradation()).run(range(30), at)
    # the first reading after the climb began gives its rate, the next confirms it: within two intervals
    assert h.first_raise_s("link_degradation") == 12.0
    (signal,) = h.active()
    assert signal.subject == {"device": "mlx5_1", "port": 1, "hostname": "node-7"}
    assert signal.evidence["symbol_error_per_s"] == 50.0 and "NVSentinel" in signal.message
    # 50/s is past the spec's 120 an hour within three seconds: critical (NVSentinel's fatal rule) from then on
    assert signal.severity == "critical" and signal.evidence["rose"] == ["symbol_error past 120/h"]


def test_a_link_downed_rise_is_critical_and_a_counter_reset_is_nothing():
    downed = {t: 0 if t < 8 else 1 for t in range(20)}
    h = Harness(LinkDegradation()).run(range(20), lambda t: frame(t, ports=(port(t, link_downed=downed[int(t)]),)))
    (signal,) = h.active()
    assert h.first_raise_s() == 8.0 and signal.severity == "critical" and signal.evidence["rose"] == ["link_downed"]

    def reset(t):  # 900 errors kept from before, then the counters are cleared (perfquery -R, a reboot)
        return frame(t, ports=(port(t, symbol_error=900 if t < 10 else 0, link_downed=3 if t < 10 else 0),))

    quiet = Harness(LinkDegradation()).run(range(30), reset)
    assert quiet.raised() == []


def test_an_active_port_that_goes_down_is_critical_and_one_never_up_is_not():
    h = Harness(LinkDegradation()).run(
        range(12), lambda t: frame(t, ports=(port(t, state="ACTIVE" if t < 5 else "DOWN"),))
    )
    (signal,) = h.active()
    assert signal.severity == "critical" and "went DOWN" in signal.message
    spare = Harness(LinkDegradation()).run(range(12), lambda t: frame(t, ports=(port(t, state="DOWN"),)))
    assert spare.raised() == []


def test_pcie_replays_above_dcgm_s_limit_and_nvlink_crc_at_its_rate():
    h = Harness(LinkDegradation()).run(range(60), lambda t: frame(t, pcie_replay_errors=int(t) // 3))  # 20/min
    (signal,) = h.active()
    assert signal.subject == {"gpu_index": 3} and 18 <= signal.evidence["pcie_replays_per_min"] <= 21  # this node's
    slow = Harness(LinkDegradation()).run(range(60), lambda t: frame(t, pcie_replay_errors=int(t) // 10))  # 6/min
    assert slow.raised() == []
    crc = Harness(LinkDegradation()).run(range(20), lambda t: frame(t, nvlink_crc_errors=int(t) * 150))
    assert crc.active()[0].evidence["nvlink_crc_per_s"] == 150


def test_a_downtrained_link_is_raised_a_lower_generation_only_while_busy():
    narrow = Harness(LinkDegradation()).run(range(6), lambda t: frame(t, pcie_link_width=8))
    (signal,) = narrow.active()
    assert "Gen5 x8 of Gen5 x16" in signal.message and signal.evidence["pcie_link_width"] == 8
    idle = Harness(LinkDegradation()).run(range(6), lambda t: frame(t, pcie_link_gen=1, utilization_percent=0.0))
    assert idle.raised() == []  # an idle GPU drops to Gen1 to save power
    busy = Harness(LinkDegradation()).run(range(6), lambda t: frame(t, pcie_link_gen=3))
    assert "Gen3 x16 of Gen5 x16" in busy.active()[0].message


def test_a_burst_within_one_reading_is_not_a_rate_and_two_readings_are():
    """One poll's burst (40 symbol errors between two readings, then none) is noise: a rate needs two readings."""
    once = Harness(LinkDegradation()).run(
        range(30), lambda t: frame(t, ports=(port(t, symbol_error=40 if t >= 10 else 0),))
    )
    assert once.raised() == [] and once.findings  # judged, not raised
    twice = {t: 0 if t < 10 else (40 if t < 11 else 80) for t in range(30)}
    h = Harness(LinkDegradation()).run(range(30), lambda t: frame(t, ports=(port(t, symbol_error=twice[int(t)]),)))
    assert h.first_raise_s() == 11.0


def test_a_healthy_fleet_raises_nothing_over_an_hour():
    h = Harness(LinkDegradation()).run(range(0, 3600, 5), lambda t: frame(t, ports=(port(t), port(t, "mlx5_1"))))
    assert (h.raised() == [] and h.findings == []) or all(not found for _, found in h.findings)


def test_the_detector_knows_every_knob_by_name_with_its_source():
    knobs = {k.name: k for k in LinkDegradation.knobs}
    assert knobs["pcie_replays_per_min"].value == 8.0 and "DCGM" in knobs["pcie_replays_per_min"].reason
    assert knobs["ib_errors_per_s"].value == 10.0 and "NVSentinel" in knobs["ib_errors_per_s"].reason


def diagnose(frames):
    pipeline = build_pipeline(discover(autoload=False))
    for f in frames:
        result = pipeline.update(f)
    return result.diagnosis


def test_a_downtrained_link_behind_a_straggler_is_the_cause_ranked_first_naming_the_link():
    def at(t):  # from t=30 GPU 3's PCIe link runs at x8 and its rank 3 is 30 % slower than the others
        late = t >= 30
        gpu3 = {"pcie_link_width": 8} if late else {}
        slow = {3: {"step_time_ms": 1700.0 * 1.3}} if late else {}
        f = job(t, gpu_changes=HEALTHY_GPU, gpus={3: gpu3}, rank_changes=slow)
        return replace(f, ports=(port(t),))

    d = diagnose(at(float(t)) for t in range(150))
    top = d.root_causes[0]
    assert top.cause == "interconnect_degradation", [(c.cause, round(c.confidence, 2)) for c in d.root_causes]
    assert top.subject["gpu_index"] == 3 and top.subject["rank"] == 3 and top.subject["link"] == "pcie"
    assert "Gen5 x8 of Gen5 x16" in top.summary and "rank 3" in top.summary
    assert {"link_degradation", "rank_straggler"} <= set(top.signals)
    straggler = next(c for c in d.root_causes if c.cause == "straggler_rank")
    assert straggler.confidence < top.confidence and "interconnect_degradation" in straggler.evidence["explained_by"]
    assert "dcgmi diag -r 2" in top.remediation and "lspci" in top.remediation


def test_an_erroring_port_with_nothing_slow_is_a_warning_to_drain_at_the_next_checkpoint():
    errors = {t: int(max(0, t - 20) * 40) for t in range(60)}
    d = diagnose(replace(job(t), ports=(port(t, symbol_error=errors[int(t)]),)) for t in map(float, range(60)))
    (cause,) = [c for c in d.root_causes if c.cause == "interconnect_degradation"]
    assert cause.subject == {"device": "mlx5_0", "port": 1, "link": "port", "hostname": "node-000"}
    assert "perfquery" in cause.remediation and "drain" in cause.remediation


def test_nvsentinel_s_other_port_rules_and_dcgm_s_nvlink_error_rule():
    def run(**counters_at):
        return Harness(LinkDegradation()).run(
            range(130), lambda t: frame(t, ports=(port(t, **{c: f(t) for c, f in counters_at.items()}),))
        )

    discards = run(port_xmit_discards=lambda t: int(t) * 150).active()[0]
    assert discards.evidence["port_xmit_discards_per_s"] == 150 and discards.severity == "warning"
    flapping = run(link_error_recovery=lambda t: int(t) // 10).active()  # 6 a minute: above NVSentinel's 5
    assert flapping and flapping[0].evidence["link_error_recovery_per_min"] >= 5.5
    assert run(link_error_recovery=lambda t: int(t) // 20).raised() == []  # 3 a minute
    integrity = run(local_link_integrity_errors=lambda t: 1 if t >= 60 else 0).active()[0]
    assert integrity.severity == "critical" and integrity.evidence["rose"] == ["local_link_integrity_errors"]
    nvlink = Harness(LinkDegradation()).run(range(30), lambda t: frame(t, nvlink_recovery_errors=1 if t >= 12 else 0))
    assert nvlink.active()[0].evidence["nvlink_errors"] == 1


def test_a_per_minute_rate_is_over_the_whole_minute_even_for_a_daemon_just_started():
    """One link retrain two seconds after the daemon started is one a minute, not thirty; six within a minute are
    past NVSentinel's five."""
    once = Harness(LinkDegradation()).run(
        range(120), lambda t: frame(t, ports=(port(t, link_error_recovery=1 if t >= 2 else 0),))
    )
    assert once.raised() == []
    six = Harness(LinkDegradation()).run(
        range(120), lambda t: frame(t, ports=(port(t, link_error_recovery=min(6, int(t) // 5)),))
    )
    # the sixth at 30 s: past at 30, confirmed at 31, and a marginal rate (1.2x) raised on its second finding
    assert six.first_raise_s() == 32.0


def test_symbol_errors_past_the_spec_s_120_an_hour_are_critical_and_a_few_a_day_are_nothing():
    """The InfiniBand spec allows 120 symbol errors an hour (NVSentinel: fatal past it). 3 a minute, steady, passes
    it once 121 have come within the hour (~40 minutes in); a burst of ten every few hours never does."""
    steady = Harness(LinkDegradation()).run(
        range(0, 3600, 10), lambda t: frame(t, ports=(port(t, symbol_error=int(t) // 20),))
    )
    first = steady.raised()[0]
    assert 2400 <= first.ts - T0 <= 2460
    (signal,) = steady.active()
    assert signal.severity == "critical" and signal.evidence["rose"] == ["symbol_error past 120/h"]
    assert "symbol_error past 120/h (fatal to NVSentinel)" in signal.message
    bursts = Harness(LinkDegradation()).run(
        range(0, 7200, 10), lambda t: frame(t, ports=(port(t, symbol_error=10 * (int(t) // 3000)),))
    )
    assert bursts.raised() == []


def test_nvsentinel_s_rules_on_the_driver_s_counters_a_severed_connection_and_ack_timeouts():
    severed = Harness(LinkDegradation()).run(
        range(20), lambda t: frame(t, ports=(port(t, rnr_nak_retry_err=1 if t >= 5 else 0),))
    )
    (signal,) = severed.active()
    assert signal.severity == "critical" and signal.evidence["rose"] == ["rnr_nak_retry_err"]
    timeouts = Harness(LinkDegradation()).run(
        range(20), lambda t: frame(t, ports=(port(t, local_ack_timeout_err=3 * int(t)),))
    )
    assert timeouts.active()[0].evidence["local_ack_timeout_err_per_s"] == 3.0
    slow = Harness(LinkDegradation()).run(
        range(20), lambda t: frame(t, ports=(port(t, local_ack_timeout_err=int(t) // 2),))
    )
    assert slow.raised() == []  # one every 2 s: inside NVSentinel's 1/s
