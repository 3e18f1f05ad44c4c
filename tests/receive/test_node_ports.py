"""Another node's InfiniBand ports reach a job daemon: the node daemon's own instruments through the OTel SDK's
OTLP encoder, decoded by the job daemon, held per node and judged on that node."""

from __future__ import annotations

from dataclasses import replace

from tests import parts
from tests.receive.otlp_requests import NodeExporter
from trainpulse_otel.collect.base import Collected
from trainpulse_otel.receive import OtlpReceiver
from trainpulse_otel.samples import PORT_COUNTERS, PortSample

T0 = 1_764_400_000.0


def port(errors: int, device: str = "mlx5_2") -> PortSample:
    counts = tuple((name, errors if name == "symbol_error" else 0) for name in PORT_COUNTERS)
    return PortSample(device, 1, "ACTIVE", "LinkUp", 400.0, "InfiniBand", counts)


def test_a_node_s_ports_come_back_on_that_node_and_a_climb_there_is_raised_naming_its_host():
    node, receiver = NodeExporter("node-7"), OtlpReceiver()
    (report,) = receiver.decode(node.export(Collected(ports=(port(0), port(3, "mlx5_0"))))).reports
    assert report.hostname == "node-7"
    assert report.ports == tuple(replace(p, node="node-7") for p in (port(3, "mlx5_0"), port(0)))  # on their node
    stepper = parts.stepper()
    raised = []
    for t in range(30):  # node-7's mlx5_2 symbol errors climb at 50/s from t=10
        ts = T0 + t
        decoded = receiver.decode(node.export(Collected(ports=(port(int(max(0, t - 10) * 50)),)), ts))
        for r in decoded.reports:
            stepper.latest.put_node(r, ts)
        result = stepper.step(ts)
        raised += [(tr.ts - T0, dict(tr.subject)) for tr in result.transitions if tr.event == "raised"]
    assert ("link_degradation" in {s.name for s in result.diagnosis.signals}) and raised[0] == (
        12.0, {"device": "mlx5_2", "port": 1, "hostname": "node-7"})  # fmt: skip
    risk = {(r.hostname, r.component): r.risk for r in result.diagnosis.node_risk}
    assert risk[("node-7", "mlx5_2/1")] == risk[("node-7", "node")] > 0
