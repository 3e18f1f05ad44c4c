"""A job daemon's trace: each other node's ``gpus`` and ``host`` lines carry ``node``, written on the ticks it
was heard from; ``trainpulse replay`` diagnoses the trace with the job view — the same top cause, naming the
node, and ``node_unreachable`` where a node's lines stop. A malformed ``node`` is reported and skipped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace

from tests import parts
from tests.diagnose.builders import T0
from tests.diagnose.jobs import HOT, node_reports
from trainpulse_otel.collect.trace import TraceError, encode_line, read_trace
from trainpulse_otel.config import Settings
from trainpulse_otel.samples import GpuSample, XidCount


def record_job(path, seconds: int, reports):
    """A job daemon (``-mode none``, ``-record``) fed four nodes' reports every second; its last result."""
    clock = [T0]
    engine = parts.engine(Settings(mode="none", addr="127.0.0.1:0", record=str(path)), clock=lambda: clock[0])
    try:
        for t in range(seconds):
            clock[0] = T0 + t
            engine.ingest_nodes(reports(t))
            result = engine.tick(T0 + t)
    finally:
        engine.close()
    return result


def replay_cli(path) -> dict:
    """``trainpulse replay FILE -json``, as a user runs it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRAINPULSE_", "OTEL_"))}
    argv = [sys.executable, "-m", "trainpulse_otel", "replay", str(path), "-json"]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120, check=True)
    return json.loads(proc.stdout)


def test_a_job_trace_has_each_nodes_lines_with_node_and_replays_to_the_same_cause_on_that_node(tmp_path):
    path = tmp_path / "job.jsonl"
    live = record_job(
        path, 150, lambda t: node_reports(t, hot={3: HOT} if t >= 40 else None, slow_rank=19 if t >= 40 else None)
    )
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    first_tick = [line for line in lines if line["ts"] == T0]
    assert sorted((line.get("node"), kind) for line in first_tick for kind in ("gpus", "host") if kind in line) == [
        (f"node-{n:03d}", kind) for n in range(4) for kind in ("gpus", "host")
    ]
    assert all(len(line["gpus"]) == 8 and "node" not in line["gpus"][0] for line in first_tick if "gpus" in line)

    replayed = replay_cli(path)["diagnosis"]["root_causes"][0]
    top = live.diagnosis.root_causes[0]
    assert top.cause == "gpu_thermal_throttling" and top.subject["hostname"] == "node-002"
    assert (replayed["cause"], replayed["subject"]) == (top.cause, top.subject)


def test_a_node_whose_lines_stop_is_unreachable_in_replay(tmp_path):
    path = tmp_path / "job.jsonl"
    live = record_job(path, 90, lambda t: [r for r in node_reports(t) if not (t >= 60 and r.hostname == "node-002")])
    written = {line.get("node") for line in map(json.loads, path.read_text().splitlines()) if line["ts"] >= T0 + 60}
    assert "node-002" not in written and "node-001" in written  # a silent node writes no lines

    result = replay_cli(path)
    raised = [t for t in result["timeline"] if t["event"] == "raised" and t["signal"] == "node_unreachable"]
    assert raised and {json.dumps(t["subject"]) for t in raised} == {json.dumps({"hostname": "node-002"})}
    assert T0 + 62 <= raised[0]["ts"] <= T0 + 65
    top = result["diagnosis"]["root_causes"][0]
    assert top["cause"] == live.diagnosis.root_causes[0].cause == "node_failure"
    assert top["subject"] == {"hostname": "node-002", "ranks": list(range(16, 24))}


def test_a_malformed_node_is_reported_with_its_line_number_and_skipped():
    gpus = (GpuSample(index=0, utilization_percent=90.0),)
    good = encode_line(T0, "gpus", gpus, "node-001")
    bad = good.replace('"node-001"', "7")
    empty = good.replace('"node-001"', '""')
    errors: list[TraceError] = []
    records = list(read_trace([good, bad, empty, good], errors))
    assert [(r.lineno, r.node) for r in records] == [(1, "node-001"), (4, "node-001")]
    assert [e.lineno for e in errors] == [2, 3]
    assert "node: must be a hostname" in errors[0].message and "number" in errors[0].message
    assert "empty string" in errors[1].message
    assert next(read_trace([encode_line(T0, "gpus", gpus)], errors)).node is None  # the recording daemon's own


def test_another_nodes_xid_is_recorded_on_its_gpu_line_and_replays_as_that_nodes_gpu_fault(tmp_path):
    """A node daemon sends its XID totals over OTLP; the job daemon's trace carries what rose as that GPU's
    ``xid_errors`` (the format's events), and replay counts them again: the same fault on the same node."""
    path = tmp_path / "job.jsonl"

    def reports(t):
        out = node_reports(t)
        if t >= 30:  # node-001's GPU 4 falls off the bus: its daemon counted one XID 79
            out[1] = replace(out[1], xid_counts=(XidCount(4, 79, 1),))
        return out

    live = record_job(path, 40, reports)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    marked = [
        (line["ts"] - T0, g["index"], g["xid_errors"])
        for line in lines
        if line.get("node") == "node-001" and "gpus" in line
        for g in line["gpus"]
        if g.get("xid_errors")
    ]
    assert marked == [(30.0, 4, [79])]  # once, when it rose
    fault = next(s for s in live.diagnosis.signals if s.name == "gpu_hardware_fault")
    assert fault.subject == {"gpu_index": 4, "hostname": "node-001"}
    replayed = replay_cli(path)["diagnosis"]
    assert [(s["name"], s["subject"]) for s in replayed["signals"] if s["name"] == "gpu_hardware_fault"] == [
        ("gpu_hardware_fault", {"gpu_index": 4, "hostname": "node-001"})
    ]
