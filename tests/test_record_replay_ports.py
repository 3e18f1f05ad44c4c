"""A node's InfiniBand ports in a recorded trace: written each tick, read back as they were, and replayed into the
frames the daemon judged; a bad ports line is reported by its field and skipped."""

from __future__ import annotations

import json

from tests import parts
from trainpulse_otel.collect.trace import TraceError, TraceWriter, read_trace
from trainpulse_otel.runtime.replay import replay
from trainpulse_otel.samples import PORT_COUNTERS, HostSample, PortSample

T0 = 1_764_400_000.0


def port(errors: int, device: str = "mlx5_0") -> PortSample:
    counts = tuple((name, errors if name == "symbol_error" else 0) for name in PORT_COUNTERS)
    return PortSample(device, 1, "ACTIVE", "LinkUp", 400.0, "InfiniBand", counts)


def test_ports_recorded_each_tick_replay_into_the_frames_and_raise_what_the_daemon_raised(tmp_path):
    path = tmp_path / "trace.jsonl"
    writer = TraceWriter(str(path))
    for t in range(30):  # mlx5_1's symbol errors climb at 50/s from t=10
        ports = (port(0), port(int(max(0, t - 10) * 50), "mlx5_1"))
        writer.write_tick(T0 + t, (), HostSample(cpu_percent=10.0), None, ports=ports)
    writer.close()
    errors: list[TraceError] = []
    records = list(read_trace(path.read_text().splitlines(), errors))
    assert errors == [] and [r.payload for r in records if r.kind == "ports"][12] == (port(0), port(100, "mlx5_1"))
    result = replay(iter(records), parts.stepper())
    raised = [t for t in result.timeline if t.event == "raised" and t.signal == "link_degradation"]
    # raised at 12 s, and critical two readings on: 50/s is past the spec's 120 symbol errors an hour
    assert [(t.ts - T0, t.severity) for t in raised] == [(12.0, "warning"), (14.0, "critical")]
    assert {tuple(t.subject.items()) for t in raised} == {(("device", "mlx5_1"), ("port", 1))}


def test_a_bad_ports_line_is_reported_by_its_field_and_skipped():
    good = {"device": "mlx5_0", "port": 1, "counters": {"symbol_error": 3}}
    lines = [
        json.dumps({"ts": T0, "ports": [good]}),
        json.dumps({"ts": T0, "ports": [{**good, "counters": {"symbol_errors": 3}}]}),
        json.dumps({"ts": T0, "ports": [{**good, "counters": {"symbol_error": -1}}]}),
        json.dumps({"ts": T0, "ports": [good, good]}),
        json.dumps({"ts": T0, "ports": [{"port": 1}]}),
        json.dumps({"ts": T0, "node": "node-3", "ports": [good]}),
        json.dumps({"ts": T0, "ports": {"device": "mlx5_0"}}),
    ]
    errors: list[TraceError] = []
    (record,) = read_trace(lines, errors)
    assert record.payload == (PortSample("mlx5_0", 1, counters=(("symbol_error", 3),)),)
    said = [str(e) for e in errors]
    assert [e.lineno for e in errors] == [2, 3, 4, 5, 6, 7]
    assert "ports[0].counters.symbol_errors" in said[0] and "ports[0].counters.symbol_error" in said[1]
    assert "listed once" in said[2] and "ports[0].device" in said[3] and "node" in said[4] and "array" in said[5]
