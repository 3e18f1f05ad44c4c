"""The simulator's failing GPUs: GPU 4 falling off the bus, GPU 6's memory wearing out."""

from __future__ import annotations

from tests.collect.sim_runs import run, ticks, training
from trainpulse_otel.collect.sim.scenarios import SCENARIOS


def test_gpu_4_reports_xid_79_once_then_leaves_the_list_and_the_job_stops_stepping():
    onset = SCENARIOS["gpu_hardware_fault"].onset_s
    samples = run("gpu_hardware_fault")
    (falls,) = ticks(samples, onset, onset + 1)
    stub = next(g for g in falls.gpus if g.index == 4)
    assert stub.xid_errors == (79,) and stub.utilization_percent is None and stub.uuid is not None
    after = ticks(samples, onset + 1)
    assert all([g.index for g in c.gpus] == [0, 1, 2, 3, 5, 6, 7] for c in after)
    assert all(all(g.xid_errors == () for g in c.gpus) for c in after)
    assert training(samples, onset) == [] and training(samples, 0, onset)
    spinning = [g for c in after for g in c.gpus]  # the peers wait inside the all-reduce
    assert min(g.utilization_percent for g in spinning) == 100.0
    assert max(g.power_watts for g in spinning) < 250.0
    assert all(c.host is not None for c in after)  # the node keeps reporting: GPU 4 is lost, not the node


def test_gpu_6_corrected_ecc_climbs_then_a_row_remap_is_recorded_and_pending():
    scenario = SCENARIOS["gpu_memory_degradation"]
    samples = run("gpu_memory_degradation")
    gpu6 = [(t, next(g for g in c.gpus if g.index == 6)) for t, c in samples]
    counts = [g.ecc_corrected_errors for _, g in gpu6]
    assert counts == sorted(counts) and counts[int(scenario.onset_s)] == 0 and counts[-1] > 300
    pending = [t for t, g in gpu6 if g.remapped_rows_pending]
    assert pending[0] == 240.0 and pending == [t for t, _ in gpu6 if t >= 240.0]
    assert [t for t, g in gpu6 if g.xid_errors] == [240.0] and gpu6[240][1].xid_errors == (63,)
    others = [g for _, c in samples for g in c.gpus if g.index != 6]
    assert {(g.ecc_corrected_errors, g.remapped_rows_pending, g.remapped_rows_failed) for g in others} == {(0, 0, 0)}
    assert len(training(samples, scenario.onset_s)) > 0.95 * (scenario.duration_s - scenario.onset_s)
