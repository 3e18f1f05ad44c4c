"""gpu_hardware_fault and gpu_memory_degradation on hand-built frames, and the cause they point to."""

from __future__ import annotations

from dataclasses import replace

from tests.diagnose.builders import T0, Harness, job
from tests.diagnose.evidence import TS, causes, node, sig, straggler
from trainpulse_otel.diagnose import VOCABULARY
from trainpulse_otel.diagnose.correlate import Evidence
from trainpulse_otel.diagnose.detectors.gpu_faults import GpuHardwareFault
from trainpulse_otel.diagnose.detectors.gpu_wear import GpuMemoryDegradation
from trainpulse_otel.diagnose.rootcause.gpu_failure import gpu_failure
from trainpulse_otel.diagnose.rootcause.ranking import Candidate, rank_candidates
from trainpulse_otel.samples import XidCount


def healthy(t: float):
    return job(t, gpu_changes={"ecc_uncorrected_errors": 0, "ecc_corrected_errors": 0, "remapped_rows_pending": 0})


def without(frame, gpu: int, xids=()):
    return replace(frame, gpus=tuple(g for g in frame.gpus if g.index != gpu), xid_counts=tuple(xids))


def test_a_healthy_hour_raises_neither_signal_even_with_application_xids():
    xid13 = (XidCount(3, 13, 2),)  # an illegal instruction in the user's kernel: the application's fault
    for detector in (GpuHardwareFault(), GpuMemoryDegradation()):
        h = Harness(detector).run(range(3600), lambda t: replace(healthy(t), xid_counts=xid13 if t > 600 else ()))
        assert h.raised() == [], detector.name


def test_xid_79_and_the_gpu_leaving_the_list_raise_a_critical_fault_at_once_naming_gpu_and_host():
    def frame(t):
        f = healthy(t)
        return f if t < 100 else without(f, 4, [XidCount(4, 79, 1)])

    h = Harness(GpuHardwareFault()).run(range(400), frame)
    first, critical = h.raised("gpu_hardware_fault")  # the state machine escalates on the second critical finding
    assert (first.ts - T0, critical.ts - T0, critical.severity) == (100.0, 101.0, "critical")
    assert first.subject == critical.subject == {"gpu_index": 4, "hostname": "node-000"}
    (signal,) = h.active()
    assert signal.severity == "critical"
    assert signal.evidence["xid_errors"] == [79] and signal.evidence["lost"] is True
    assert "fallen off the bus" in signal.message and h.cleared() == []


def test_a_lost_gpu_alone_is_a_fault_until_it_answers_and_no_gpu_list_loses_none():
    def frame(t):
        f = healthy(t)
        if 50 <= t < 60:
            return replace(f, gpus=())  # nvidia-smi timed out: says nothing about one GPU
        return without(f, 6) if 100 <= t < 150 else f

    h = Harness(GpuHardwareFault()).run(range(900), frame)
    raised = h.raised()[0]
    assert raised.ts - T0 == 100.0 and {r.subject["gpu_index"] for r in h.raised()} == {6}
    (cleared,) = h.cleared()
    assert 150 <= cleared.ts - T0 <= 150 + 600 + 5  # answers again: held for the reset window, then cleared


def test_rising_uncorrected_ecc_is_a_fault_a_constant_count_is_not():
    def frame(t):
        return job(t, gpus={2: {"ecc_uncorrected_errors": 0 if t < 200 else 3}, 5: {"ecc_uncorrected_errors": 7}})

    h = Harness(GpuHardwareFault()).run(range(300), frame)
    raised = h.raised()[0]
    assert {r.subject["gpu_index"] for r in h.raised()} == {2} and raised.ts - T0 == 200.0
    assert h.active()[0].evidence["ecc_uncorrected_new"] == 3


def test_a_pending_row_remap_is_predictive_degradation():
    h = Harness(GpuMemoryDegradation()).run(
        range(300), lambda t: job(t, gpus={6: {"remapped_rows_pending": int(t >= 120), "remapped_rows_failed": 0}})
    )
    (raised,) = h.raised()
    assert raised.severity == "warning" and raised.subject == {"gpu_index": 6, "hostname": "node-000"}
    assert raised.ts - T0 <= 122.0 and "pending" in raised.message


def test_corrected_ecc_climbing_is_degradation_a_steady_trickle_is_not():
    def frame(t):
        climbing = 0 if t < 600 else int((t - 600) * 0.5)  # 30 corrected errors a minute from t=600
        trickle = int(t / 60)  # one a minute, all along: this GPU's normal
        return job(t, gpus={6: {"ecc_corrected_errors": climbing}, 1: {"ecc_corrected_errors": 40 + trickle}})

    h = Harness(GpuMemoryDegradation()).run(range(1800), frame)
    (raised,) = h.raised()
    assert raised.subject["gpu_index"] == 6 and 600 < raised.ts - T0 <= 600 + 60
    assert h.active()[0].evidence["ecc_corrected_new_5m"] >= 20


# ----------------------------------------------------------------- the cause


FAULT = sig("gpu_hardware_fault", "critical", {"gpu_index": 4, "hostname": "node-000"}, xid_errors=[79], lost=True)
STALL = sig("training_stalled", "critical", {"rank": 4, "gpu_index": 4, "hostname": "node-000"})


def test_a_failing_gpu_outranks_the_hang_and_the_straggler_it_produces():
    signals = [FAULT, STALL, straggler(4), sig("sync_imbalance")]
    ev = Evidence(signals, {}, node(), TS)
    (mine,) = gpu_failure(ev)
    assert {s.name for s in mine.explains} == {"training_stalled", "rank_straggler", "sync_imbalance"}
    hang = Candidate("rank_hang", 0.85, "rank 4 is stuck", "dump its stacks", [STALL])
    for losses in (None, {"sync": 0.3, "compute": 0.2}):
        ranked = rank_candidates([hang, *gpu_failure(Evidence(signals, {}, node(), TS))], VOCABULARY, losses)
        assert [c.cause for c in ranked] == ["gpu_hardware_failure", "rank_hang"], losses
        assert ranked[0].confidence >= ranked[1].confidence + 0.1

    got = causes(signals)
    assert [c.cause for c in got[:2]] == ["gpu_hardware_failure", "straggler_rank"]
    top = got[0]
    assert top.subject == {"gpu_index": 4, "rank": 4, "hostname": "node-000"}
    assert "XID 79" in top.remediation and "fell off the bus" in top.remediation
    for step in ("Drain", "nvidia-smi -r -i 4", "dcgmi diag -r 3", "replace"):
        assert step in top.remediation, step


def test_a_stall_on_another_gpu_is_not_explained_by_this_one():
    other = sig("training_stalled", "critical", {"rank": 2, "gpu_index": 2})
    (mine,) = gpu_failure(Evidence([FAULT, other], {}, node(), TS))
    assert mine.explains == []
    unknown = sig("training_stalled", "critical", {})  # no heartbeats: the stuck rank could not be named
    (mine,) = gpu_failure(Evidence([FAULT, unknown], {}, node(), TS))
    assert [s.name for s in mine.explains] == ["training_stalled"]


def test_memory_degradation_alone_is_the_cause_with_a_warnings_confidence_before_time_is_lost():
    wear = sig("gpu_memory_degradation", "warning", {"gpu_index": 6}, remapped_rows_pending=1)
    (top,) = causes([wear])
    assert top.cause == "gpu_hardware_failure" and top.subject == {"gpu_index": 6, "rank": 6, "hostname": "node-000"}
    assert 0.5 <= top.confidence <= 0.7
    assert "nvidia-smi -r -i 6" in top.remediation and "Nothing is lost yet" in top.remediation


def test_a_later_fault_on_the_same_gpu_is_a_new_episode():
    def frame(t):
        f = healthy(t)
        count = 1 if t >= 100 else 0
        count += 1 if t >= 2000 else 0
        return replace(f, xid_counts=(XidCount(2, 48, count),) if count else ())

    h = Harness(GpuHardwareFault()).run(range(2100), frame)
    starts = [r.ts - T0 for r in h.raised() if r.severity == "warning"]
    assert starts == [100.0, 2000.0] and len(h.cleared()) == 1
    (signal,) = h.active()
    assert signal.evidence["since"] == T0 + 2000 and signal.evidence["xid_errors"] == [48]
