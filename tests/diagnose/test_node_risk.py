"""``node_risk``: each component's and node's chance of interrupting the job, from the evidence it shows."""

from __future__ import annotations

import json

import pytest

from trainpulse_otel.diagnose.risk import EVIDENCE, node_risks
from trainpulse_otel.diagnose.types import Diagnosis, NodeRisk, Signal
from trainpulse_otel.samples import XidCount


def signal(name: str, severity: str = "warning", **subject) -> Signal:
    return Signal(name, severity, 0.0, f"{name} on {subject}", subject)


def by_component(risks) -> dict[tuple, float]:
    return {(r.hostname, r.component): round(r.risk, 4) for r in risks}


def test_one_sign_is_its_weight_several_combine_as_independent_chances_and_the_node_combines_its_parts():
    remap = Signal("gpu_memory_degradation", "warning", 0.0, "GPU 3's memory", {"gpu_index": 3},
                   {"remapped_rows_pending": 1})  # fmt: skip
    risks = node_risks([
        signal("link_degradation", gpu_index=3), remap,
        signal("link_degradation", "critical", device="mlx5_0", port=1),
        signal("rank_straggler", rank=3, gpu_index=3),  # a symptom, not a sign of wear
    ])  # fmt: skip
    got = by_component(risks)
    gpu3 = 1 - (1 - 0.35) * (1 - 0.5)
    assert got[(None, "gpu3")] == pytest.approx(gpu3, abs=1e-4) and got[(None, "mlx5_0/1")] == 0.7
    assert got[(None, "node")] == pytest.approx(1 - (1 - gpu3) * (1 - 0.7), abs=1e-4)
    assert risks[0].component == "node" and len(risks) == 3  # riskiest first; the straggler adds nothing
    (gpu,) = [r for r in risks if r.component == "gpu3"]
    assert any("link_degradation" in e for e in gpu.evidence) and any("memory" in e for e in gpu.evidence)


def test_a_fatal_xid_in_a_node_s_history_raises_that_gpu_and_node_and_nothing_is_no_risk():
    history = [XidCount(2, 79, 1, "node-7"), XidCount(0, 13, 4)]  # 13: the application's fault, not the GPU's
    assert by_component(node_risks([], history)) == {("node-7", "gpu2"): 0.3, ("node-7", "node"): 0.3}
    assert node_risks([]) == () and node_risks([signal("gpu_hardware_fault", "critical", gpu_index=1)])[0].risk == 0.95


def test_every_weight_has_a_reason_and_stays_below_certainty():
    assert all(0 < w < 1 and len(why) > 20 for w, why in EVIDENCE.values())


def test_risks_read_back_from_the_diagnosis_json_and_are_left_out_when_none():
    risks = node_risks([signal("link_degradation", device="mlx5_1", port=1, hostname="node-3")])
    diagnosis = Diagnosis(1.0, node_risk=risks)
    data = json.loads(json.dumps(diagnosis.to_dict()))
    (first,) = [r for r in data["node_risk"] if r["component"] != "node"]
    assert first["component"] == "mlx5_1/1" and first["risk"] == 0.35 and first["hostname"] == "node-3"
    assert first["evidence"][0].startswith("link_degradation: ")
    assert Diagnosis.from_dict(data).node_risk == tuple(NodeRisk(r.hostname, r.component, round(r.risk, 3),
                                                                 r.evidence) for r in risks)  # fmt: skip
    assert "node_risk" not in Diagnosis(1.0).to_dict()
