"""``trainpulse eval``'s node health: the risk rises before a simulated failure, and not on healthy fleets."""

from __future__ import annotations

from trainpulse_otel.collect.sim.precursors import PRECURSORS
from trainpulse_otel.evaluation.healthy_fleet import NOISE, healthy_fleet
from trainpulse_otel.evaluation.node_health import NodeHealthReport, format_node_health, run_precursor


def test_every_precursor_raises_the_risk_minutes_before_its_failure_which_is_then_named():
    runs = [run_precursor(name) for name in PRECURSORS]
    assert all(r.ok for r in runs), runs
    pcie, nvlink = runs
    # PCIe replays ramp to 40/min over 480 s from 90 s: DCGM's 8/min is crossed at 186 s, the minute's window
    # holds it a little later; NVLink CRC ramps to 400/s over 300 s: 100/s at 165 s, confirmed a reading later
    assert 186 <= pcie.risk_rose_at_s <= 240 and 165 <= nvlink.risk_rose_at_s <= 170
    assert pcie.lead_s >= 400 and nvlink.lead_s >= 500 and pcie.failure_found and nvlink.failure_found
    report = NodeHealthReport(runs, healthy_fleet(5))
    assert report.summary()["median_lead_s"] == (pcie.lead_s + nvlink.lead_s) / 2
    assert "pcie_replays_before_xid79" in "\n".join(format_node_health(report))


def test_a_healthy_fleet_raises_no_link_alarm_and_a_fleet_past_the_field_s_limits_does():
    healthy = healthy_fleet(30)
    assert healthy.alarms == 0 and healthy.bursts > 1000 and healthy.per_1000_node_days == 0.0
    # the same background, but each port's symbol errors come in bursts of up to 2,000 every 20 minutes: two in a
    # row past NVSentinel's 10/s now and then (a link far outside the spec's 120 an hour)
    worn = {**NOISE, "symbol_error": ("port", 1.0 / 3.0, 2000, False, "a worn link")}
    assert healthy_fleet(5, noise=worn).alarms > 0
