"""A failing GPU end to end: fake pynvml → NVML collector → the engine's OTel path → diagnosis, /metrics, trace.

XID 79 on GPU 4 (it falls off the bus and leaves the list) and a pending row remap on GPU 6, through the real
collector, LatestSamples, instruments, frame read back, pipeline and Prometheus exposition; the recorded trace
replays to the same diagnosis.
"""

from __future__ import annotations

import sys

import pytest

from tests import parts
from tests.fakes.fake_pynvml import FakeGpu, make_fake_pynvml, raise_xid
from trainpulse_otel.collect.nvml import NvmlCollector
from trainpulse_otel.collect.trace import read_trace
from trainpulse_otel.config import Settings
from trainpulse_otel.runtime.replay import replay
from trainpulse_otel.samples import RankSample, TrainingSample

T0 = 1_764_400_000.0


def report(step: int, ts: float) -> TrainingSample:
    ranks = tuple(
        RankSample(rank=r, gpu_index=r, hostname="node-000", step_time_ms=1500.0 + r, sync_wait_ms=20.0)
        for r in range(8)
    )
    return TrainingSample(
        timestamp=ts, global_step=step, step_time_ms=1540.0, tokens_per_sec=170_000.0, hostname="node-000", ranks=ranks
    )


@pytest.fixture
def run(monkeypatch, tmp_path):
    fake = make_fake_pynvml([FakeGpu(uuid=f"GPU-{i}", pci_bus_id=f"00000000:{0x18 + i:02X}:00.0") for i in range(8)])
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    path = tmp_path / "trace.jsonl"
    clock = [T0]
    engine = parts.engine(
        Settings(record=str(path), addr="127.0.0.1:0"),
        collectors=[NvmlCollector()],
        mode="nvml",
        clock=lambda: clock[0],
    )
    timeline = []
    healthy_signals = []
    for i in range(240):
        if i == 120:
            fake.state.gpus[6].remapped_rows = (3, 0, 1, 0)  # a remap recorded, waiting for a reset
        if i == 180:
            raise_xid(fake, 4, 79)
            fake.state.gpus[4].lost = True
        if i < 180:
            engine.ingest(report(1000 + i, clock[0]))  # no step completes once GPU 4 is gone
        result = engine.tick()
        timeline.extend(result.transitions)
        if i < 120:
            healthy_signals.extend(result.diagnosis.signals)
        clock[0] += 1.0
    yield engine, timeline, healthy_signals, path
    engine.close()


def test_xid_79_and_a_pending_remap_reach_the_diagnosis_and_metrics_and_replay_the_same(run):
    engine, timeline, healthy_signals, path = run
    assert healthy_signals == []
    diagnosis = engine.pipeline.diagnosis
    by_name = {s.name: s for s in diagnosis.signals}
    fault, wear = by_name["gpu_hardware_fault"], by_name["gpu_memory_degradation"]
    assert fault.severity == "critical" and fault.subject == {"gpu_index": 4, "hostname": "node-000"}
    assert fault.evidence["xid_errors"] == [79] and fault.evidence["lost"] is True
    assert wear.subject["gpu_index"] == 6 and wear.evidence["remapped_rows_pending"] == 1
    raised_at = {}
    for t in timeline:
        if t.event == "raised":
            raised_at.setdefault(t.signal, t.ts - T0)  # the first raise (a critical one escalates on the next tick)
    assert raised_at["gpu_hardware_fault"] == 180.0 and 120.0 <= raised_at["gpu_memory_degradation"] <= 121.0

    top = diagnosis.root_causes[0]
    assert top.cause == "gpu_hardware_failure" and top.subject == {"gpu_index": 4, "rank": 4, "hostname": "node-000"}
    assert "XID 79" in top.remediation and "dcgmi diag -r 3" in top.remediation
    assert any(c.cause == "gpu_hardware_failure" and c.subject["gpu_index"] == 6 for c in diagnosis.root_causes)

    assert [g.index for g in engine.snapshot().gpus] == [0, 1, 2, 3, 5, 6, 7]
    text = engine.exports.prometheus.render().decode()
    assert 'trainpulse_gpu_xid_errors_total{gpu_index="4",xid="79"} 1.0' in text
    assert 'trainpulse_gpu_remapped_rows_pending{gpu_index="6"' in text

    stepper = parts.stepper()
    with open(path, "rb") as fh:
        replayed = replay(read_trace(fh, []), stepper)
    assert {(s.name, tuple(s.subject.items())) for s in replayed.diagnosis.signals} == {
        (s.name, tuple(s.subject.items())) for s in diagnosis.signals
    }
    assert replayed.diagnosis.root_causes[0].cause == "gpu_hardware_failure"
    assert stepper.latest.xid_counts() == engine.latest.xid_counts()
