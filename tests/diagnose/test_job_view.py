"""A job daemon's view of a job across nodes: each node's GPUs, host and ranks reach the same detectors, a cause
on one node is found from that node's own GPUs and ranks, and a node that goes silent is ``node_unreachable`` and
the job's ``node_failure``."""

from __future__ import annotations

from tests import parts
from tests.diagnose.builders import T0
from tests.diagnose.jobs import GPUS_PER_NODE, HOT, node_reports
from trainpulse_otel.publish.snapshot import build_snapshot


def run(seconds: int, reports) -> tuple[list, object, object]:
    """Feed a job daemon (``-mode none``: no GPUs of its own) the nodes' reports every second."""
    stepper = parts.stepper()
    timeline, result = [], None
    for t in range(seconds):
        ts = T0 + t
        for report in reports(t):
            stepper.latest.put_node(report, ts)
        result = stepper.step(ts)
        timeline.extend(result.transitions)
    return timeline, result, stepper


def test_a_throttled_gpu_on_one_node_is_found_with_that_nodes_host_and_rank():
    timeline, result, _ = run(
        150, lambda t: node_reports(t, hot={3: HOT} if t >= 40 else None, slow_rank=19 if t >= 40 else None)
    )
    top = result.diagnosis.root_causes[0]
    assert top.cause == "gpu_thermal_throttling", [c.cause for c in result.diagnosis.root_causes]
    assert top.subject == {"gpu_index": 3, "hostname": "node-002", "rank": 19}
    assert "GPU 3 on node-002" in top.summary
    straggler = next(s for s in result.diagnosis.signals if s.name == "rank_straggler")
    assert straggler.subject == {"rank": 19, "gpu_index": 3, "hostname": "node-002"}
    assert "rank 19 on node-002" in straggler.message
    assert not [t for t in timeline if t.event == "raised" and t.ts < T0 + 40]


def test_a_silent_node_is_unreachable_within_three_of_its_intervals_and_is_the_jobs_node_failure():
    def reports(t):
        return [r for r in node_reports(t) if not (t >= 60 and r.hostname == "node-002")]

    timeline, result, stepper = run(90, reports)
    raised = [t for t in timeline if t.event == "raised" and t.signal == "node_unreachable"]
    assert {tuple(t.subject.items()) for t in raised} == {(("hostname", "node-002"),)}
    assert T0 + 59 + 3 <= raised[0].ts <= T0 + 59 + 5  # last heard at 59 s, every 1 s: three missed at 62 s
    assert raised[-1].severity == "critical"  # raised, then critical on the next tick (the state machine's rule)
    top = result.diagnosis.root_causes[0]
    assert top.cause == "node_failure"
    assert top.subject == {"hostname": "node-002", "ranks": list(range(16, 24))}
    assert "drain" in top.remediation and "node-002" in top.remediation
    snapshot = build_snapshot(stepper.window.latest, result.diagnosis, "none").to_dict()
    stale = {n["hostname"]: n["stale"] for n in snapshot["nodes"]}
    assert stale == {"node-000": False, "node-001": False, "node-002": True, "node-003": False}
    assert len(snapshot["nodes"][2]["gpus"]) == GPUS_PER_NODE and snapshot["gpus"] == []


def test_a_node_that_speaks_again_clears():
    def reports(t):
        return [r for r in node_reports(t) if not (60 <= t < 75 and r.hostname == "node-002")]

    timeline, result, _ = run(100, reports)
    events = [(t.event, t.ts - T0) for t in timeline if t.signal == "node_unreachable"]
    assert [e for e, _ in events if e == "cleared"] == ["cleared"] and events[-1][0] == "cleared"
    assert 75 <= events[-1][1] <= 82
    assert not any(s.name == "node_unreachable" for s in result.diagnosis.signals)
